//! Per-pod source routing of the cloud IPAM modes (Cilium's `pkg/datapath/linux/routing`):
//! an ingress rule (priority 20, `to <pod> lookup main`), egress rules (priority 111, or 110 in
//! Azure's "compat" form) sending the pod's traffic to the table of the interface owning its
//! address, and in that table `<gw> dev <link> scope link` plus `default via <gw>`. Everything
//! carries `proto kernel`, as Cilium's: that and the priorities are how weft finds its own
//! rules again (removal, status, cleanup). Owns no policy: callers say which pod, table,
//! gateway and link. Must not touch links, addresses or any other rule.

use std::net::IpAddr;

use futures::TryStreamExt;
use ipnet::IpNet;
use nix::errno::Errno;
use rtnetlink::{
    Handle, IpVersion, RouteMessageBuilder,
    packet_route::{
        AddressFamily,
        route::{RouteMessage, RouteProtocol, RouteScope},
        rule::{RuleAction, RuleAttribute, RuleMessage},
    },
};

use super::{NetlinkError, connect, is_errno};

/// Priority of the rule sending traffic to a pod through the main table.
pub const INGRESS_PRIORITY: u32 = 20;
/// Priority of a pod's egress rules (ENI, `AlibabaCloud`).
pub const EGRESS_PRIORITY: u32 = 111;
/// Priority of a pod's egress rules in Azure's "compat" form.
pub const EGRESS_PRIORITY_COMPAT: u32 = 110;

/// The rules and table routes of one pod address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRules {
    /// The pod address.
    pub ip: IpAddr,
    /// Egress priority ([`EGRESS_PRIORITY`] or [`EGRESS_PRIORITY_COMPAT`]).
    pub priority: u32,
    /// The interface's table.
    pub table: u32,
    /// The interface's gateway.
    pub gateway: IpAddr,
    /// Ifindex of the interface.
    pub link: u32,
    /// One egress rule per CIDR (masquerading); `None`: one rule for every destination.
    pub cidrs: Option<Vec<IpNet>>,
}

/// One of weft's rules as the kernel lists it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuleRow {
    /// Priority.
    pub priority: u32,
    /// `from` selector, if any.
    pub from: Option<IpNet>,
    /// `to` selector, if any.
    pub to: Option<IpNet>,
    /// Table looked up.
    pub table: u32,
}

impl std::fmt::Display for RuleRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:", self.priority)?;
        if let Some(from) = self.from {
            write!(f, " from {from}")?;
        }
        if let Some(to) = self.to {
            write!(f, " to {to}")?;
        }
        write!(f, " lookup {}", table_name(self.table))
    }
}

fn table_name(table: u32) -> String {
    if table == MAIN_TABLE {
        "main".to_owned()
    } else {
        table.to_string()
    }
}

/// The main routing table.
const MAIN_TABLE: u32 = 254;

fn host(ip: IpAddr) -> IpNet {
    IpNet::from(ip)
}

fn rule_message(priority: u32, from: Option<IpNet>, to: Option<IpNet>, table: u32) -> RuleMessage {
    let mut msg = RuleMessage::default();
    let v4 = from.or(to).is_none_or(|n| n.addr().is_ipv4());
    msg.header.family = if v4 {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    msg.header.action = RuleAction::ToTable;
    msg.header.table = u8::try_from(table).unwrap_or(0);
    msg.attributes.push(RuleAttribute::Table(table));
    msg.attributes.push(RuleAttribute::Priority(priority));
    msg.attributes
        .push(RuleAttribute::Protocol(RouteProtocol::Kernel));
    if let Some(from) = from {
        msg.header.src_len = from.prefix_len();
        msg.attributes.push(RuleAttribute::Source(from.addr()));
    }
    if let Some(to) = to {
        msg.header.dst_len = to.prefix_len();
        msg.attributes.push(RuleAttribute::Destination(to.addr()));
    }
    msg
}

/// The rows [`install`] makes for `rules`.
#[must_use]
pub fn rows(rules: &PodRules) -> Vec<RuleRow> {
    let mut out = vec![RuleRow {
        priority: INGRESS_PRIORITY,
        from: None,
        to: Some(host(rules.ip)),
        table: MAIN_TABLE,
    }];
    let egress = |to| RuleRow {
        priority: rules.priority,
        from: Some(host(rules.ip)),
        to,
        table: rules.table,
    };
    match &rules.cidrs {
        Some(cidrs) => out.extend(cidrs.iter().map(|c| egress(Some(*c)))),
        None => out.push(egress(None)),
    }
    out
}

/// Install the rules and table routes of one pod address (what exists already is kept).
///
/// # Errors
/// The kernel refused one of them.
pub async fn install(rules: &PodRules) -> Result<(), NetlinkError> {
    let handle = connect()?;
    for route in table_routes(rules)? {
        let shown = format!("{route:?}");
        handle
            .route()
            .add(route)
            .replace()
            .execute()
            .await
            .map_err(|source| NetlinkError::CloudRoute {
                route: shown,
                source,
            })?;
    }
    for row in rows(rules) {
        add_rule(&handle, &row).await?;
    }
    Ok(())
}

async fn add_rule(handle: &Handle, row: &RuleRow) -> Result<(), NetlinkError> {
    let mut req = handle.rule().add();
    *req.message_mut() = rule_message(row.priority, row.from, row.to, row.table);
    match req.execute().await {
        Err(e) if is_errno(&e, Errno::EEXIST) => Ok(()),
        result => result.map_err(|source| NetlinkError::Rule {
            rule: row.to_string(),
            source,
        }),
    }
}

/// `<gw> dev <link> scope link table T` and `default via <gw> dev <link> table T`.
fn table_routes(rules: &PodRules) -> Result<Vec<RouteMessage>, NetlinkError> {
    let build = |dst: IpNet, via: Option<IpAddr>, scope: RouteScope| {
        let mut b = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(dst.addr(), dst.prefix_len())
            .map_err(|e| NetlinkError::NodeRouteMessage {
                route: format!("{dst} table {}", rules.table),
                source: Box::new(e),
            })?;
        if let Some(via) = via {
            b = b.gateway(via).map_err(|e| NetlinkError::NodeRouteMessage {
                route: format!("{dst} via {via} table {}", rules.table),
                source: Box::new(e),
            })?;
        }
        Ok::<_, NetlinkError>(
            b.output_interface(rules.link)
                .scope(scope)
                .table_id(rules.table)
                .protocol(RouteProtocol::Kernel)
                .build(),
        )
    };
    let default = match rules.gateway {
        IpAddr::V4(_) => IpNet::V4(ipnet::Ipv4Net::default()),
        IpAddr::V6(_) => IpNet::V6(ipnet::Ipv6Net::default()),
    };
    Ok(vec![
        build(host(rules.gateway), None, RouteScope::Link)?,
        build(default, Some(rules.gateway), RouteScope::Universe)?,
    ])
}

/// Every rule of weft's (its priorities, `proto kernel`, a single-address selector).
///
/// # Errors
/// Listing the rules failed.
pub async fn list() -> Result<Vec<RuleRow>, NetlinkError> {
    Ok(list_messages(&connect()?)
        .await?
        .into_iter()
        .map(|(row, _)| row)
        .collect())
}

async fn list_messages(handle: &Handle) -> Result<Vec<(RuleRow, RuleMessage)>, NetlinkError> {
    let mut out = Vec::new();
    for version in [IpVersion::V4, IpVersion::V6] {
        let mut rules = handle.rule().get(version).execute();
        while let Some(msg) = rules.try_next().await.map_err(NetlinkError::ListRules)? {
            if let Some(row) = weft_row(&msg) {
                out.push((row, msg));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The row of a rule weft made, `None` for any other rule.
fn weft_row(msg: &RuleMessage) -> Option<RuleRow> {
    let mut row = RuleRow {
        priority: 0,
        from: None,
        to: None,
        table: u32::from(msg.header.table),
    };
    let mut kernel = false;
    for attr in &msg.attributes {
        match attr {
            RuleAttribute::Priority(p) => row.priority = *p,
            RuleAttribute::Table(t) => row.table = *t,
            RuleAttribute::Protocol(p) => kernel = *p == RouteProtocol::Kernel,
            RuleAttribute::Source(ip) => row.from = IpNet::new(*ip, msg.header.src_len).ok(),
            RuleAttribute::Destination(ip) => row.to = IpNet::new(*ip, msg.header.dst_len).ok(),
            _ => {}
        }
    }
    let single = |n: Option<IpNet>| n.is_some_and(|n| n.prefix_len() == n.max_prefix_len());
    let ours = match row.priority {
        INGRESS_PRIORITY => row.from.is_none() && single(row.to) && row.table == MAIN_TABLE,
        EGRESS_PRIORITY | EGRESS_PRIORITY_COMPAT => single(row.from),
        _ => false,
    };
    (kernel && ours).then_some(row)
}

/// The address a row of weft's is about.
#[must_use]
pub fn pod_of(row: &RuleRow) -> Option<IpAddr> {
    if row.priority == INGRESS_PRIORITY {
        row.to.map(|n| n.addr())
    } else {
        row.from.map(|n| n.addr())
    }
}

/// Remove every rule of weft's about the addresses `ips` accepts; the removed rows.
///
/// # Errors
/// Listing or deleting failed.
pub async fn remove_where(ips: impl Fn(IpAddr) -> bool) -> Result<Vec<RuleRow>, NetlinkError> {
    let handle = connect()?;
    let mut removed = Vec::new();
    for (row, msg) in list_messages(&handle).await? {
        if !pod_of(&row).is_some_and(&ips) {
            continue;
        }
        match handle.rule().del(msg).execute().await {
            Ok(()) => removed.push(row),
            Err(e) if is_errno(&e, Errno::ENOENT) => {}
            Err(source) => {
                return Err(NetlinkError::Rule {
                    rule: row.to_string(),
                    source,
                });
            }
        }
    }
    Ok(removed)
}

/// Remove the `proto kernel` routes of `table` (weft's table routes); how many went.
///
/// # Errors
/// Listing or deleting failed.
pub async fn flush_table(table: u32) -> Result<usize, NetlinkError> {
    let handle = connect()?;
    let mut removed = 0;
    for version in [IpVersion::V4, IpVersion::V6] {
        let filter = match version {
            IpVersion::V4 => RouteMessageBuilder::<std::net::Ipv4Addr>::new()
                .table_id(table)
                .build(),
            IpVersion::V6 => RouteMessageBuilder::<std::net::Ipv6Addr>::new()
                .table_id(table)
                .build(),
        };
        let routes: Vec<RouteMessage> = handle
            .route()
            .get(filter)
            .execute()
            .try_collect()
            .await
            .map_err(NetlinkError::ListRules)?;
        for route in routes
            .into_iter()
            .filter(|r| route_table(r) == table && r.header.protocol == RouteProtocol::Kernel)
        {
            match handle.route().del(route).execute().await {
                Ok(()) => removed += 1,
                Err(e) if is_errno(&e, Errno::ESRCH) || is_errno(&e, Errno::ENOENT) => {}
                Err(source) => {
                    return Err(NetlinkError::CloudRoute {
                        route: format!("table {table}"),
                        source,
                    });
                }
            }
        }
    }
    Ok(removed)
}

fn route_table(route: &RouteMessage) -> u32 {
    route
        .attributes
        .iter()
        .find_map(|a| match a {
            rtnetlink::packet_route::route::RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(route.header.table))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masquerading_makes_one_egress_rule_per_cidr() {
        let mut rules = PodRules {
            ip: "10.6.1.21".parse().expect("ip"),
            priority: EGRESS_PRIORITY,
            table: 11,
            gateway: "10.6.1.1".parse().expect("ip"),
            link: 3,
            cidrs: Some(vec![
                "10.6.0.0/16".parse().expect("cidr"),
                "10.0.0.0/8".parse().expect("cidr"),
            ]),
        };
        let shown: Vec<String> = rows(&rules).iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "20: to 10.6.1.21/32 lookup main",
                "111: from 10.6.1.21/32 to 10.6.0.0/16 lookup 11",
                "111: from 10.6.1.21/32 to 10.0.0.0/8 lookup 11",
            ]
        );
        rules.cidrs = None;
        rules.priority = EGRESS_PRIORITY_COMPAT;
        let shown: Vec<String> = rows(&rules).iter().map(ToString::to_string).collect();
        assert_eq!(shown[1], "110: from 10.6.1.21/32 lookup 11");
        for row in rows(&rules) {
            let msg = rule_message(row.priority, row.from, row.to, row.table);
            assert_eq!(weft_row(&msg), Some(row.clone()), "{row} is found again");
            assert_eq!(pod_of(&row), Some(rules.ip));
        }
    }

    #[test]
    fn rules_of_other_priorities_or_protocols_are_not_weft_s() {
        let mut msg = rule_message(32766, None, None, MAIN_TABLE);
        assert_eq!(weft_row(&msg), None);
        msg = rule_message(
            EGRESS_PRIORITY,
            Some("10.0.0.0/8".parse().expect("n")),
            None,
            11,
        );
        assert_eq!(weft_row(&msg), None, "not a single address");
        msg = rule_message(
            EGRESS_PRIORITY,
            Some("10.0.0.1/32".parse().expect("n")),
            None,
            11,
        );
        msg.attributes
            .retain(|a| !matches!(a, RuleAttribute::Protocol(_)));
        msg.attributes
            .push(RuleAttribute::Protocol(RouteProtocol::Boot));
        assert_eq!(weft_row(&msg), None, "a rule someone added by hand");
    }
}
