//! The node side of the cloud IPAM modes (eni, azure, alibabacloud), as the daemon drives it:
//! each pod address's source routing (spec §9.5) from the routing metadata IPAM gives it,
//! installed at ADD, removed at DEL, rebuilt from the endpoint records at start-up and swept of
//! addresses no record holds; and (in `devices`) the ENI device configurator. The netlink work
//! is `datapath::netlink::{cloud, device}`; this module only decides which table, priority
//! and CIDRs a pod gets.

pub mod devices;

use std::{collections::BTreeSet, net::IpAddr};

use tracing::{info, warn};

use crate::{
    config::AgentConfig,
    datapath::{
        netlink::{
            NetlinkError,
            cloud::{self, EGRESS_PRIORITY, EGRESS_PRIORITY_COMPAT, PodRules, RuleRow},
            device,
        },
        teardown::Removed,
    },
    error::chain,
    ipam::{
        cloud::{PodRouting, parse_mac},
        mode::IpamMode,
    },
};

/// Why a pod's source routing could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CloudRoutingError {
    /// The result's MAC is not a MAC (Cilium's `invalid mac`).
    #[error("invalid mac {mac:?}")]
    InvalidMac {
        /// The MAC as given.
        mac: String,
    },
    /// No link of the node has the interface's MAC.
    #[error(
        "no link has MAC {mac} (the interface of {ip}): is the ENI attached, and did the device \
         configurator find it (`weft-agent status`)?"
    )]
    NoLink {
        /// The MAC.
        mac: String,
        /// The pod address.
        ip: IpAddr,
    },
    /// Masquerading but the result has no CIDR (Cilium's `empty cidrs`).
    #[error("empty cidrs for {ip}")]
    EmptyCidrs {
        /// The pod address.
        ip: IpAddr,
    },
    /// The kernel refused.
    #[error("installing the source routing of {ip}")]
    Netlink {
        /// The pod address.
        ip: IpAddr,
        /// The netlink error.
        #[source]
        source: NetlinkError,
    },
}

/// Whether `mode` routes pods through their cloud interface.
#[must_use]
pub(crate) const fn routes_pods(mode: IpamMode) -> bool {
    matches!(
        mode,
        IpamMode::Eni | IpamMode::Azure | IpamMode::AlibabaCloud
    )
}

/// The CIDRs every result carries besides the interface's: `ipv4-native-routing-cidr`.
#[must_use]
pub(crate) fn extra_cidrs(config: &AgentConfig) -> Vec<ipnet::IpNet> {
    config
        .ipv4_native_routing_cidr
        .map(ipnet::IpNet::V4)
        .into_iter()
        .chain(config.ipv6_native_routing_cidr.map(ipnet::IpNet::V6))
        .collect()
}

/// Whether the address family of `ip` is masqueraded (`enable-ipv{4,6}-masquerade`): then
/// the egress rules are per CIDR.
fn masquerading(config: &AgentConfig, ip: IpAddr) -> bool {
    if ip.is_ipv4() {
        config.enable_ipv4_masquerade
    } else {
        config.enable_ipv6_masquerade
    }
}

/// The rules of `routing` on this node (its link found by MAC).
async fn rules_for(
    config: &AgentConfig,
    routing: &PodRouting,
) -> Result<PodRules, CloudRoutingError> {
    let ip = routing.ip;
    let mac = parse_mac(&routing.mac).ok_or_else(|| CloudRoutingError::InvalidMac {
        mac: routing.mac.clone(),
    })?;
    let link = device::find_by_mac(mac)
        .await
        .map_err(|source| CloudRoutingError::Netlink { ip, source })?
        .ok_or_else(|| CloudRoutingError::NoLink {
            mac: routing.mac.clone(),
            ip,
        })?;
    let cidrs = if masquerading(config, ip) {
        if routing.cidrs.is_empty() {
            return Err(CloudRoutingError::EmptyCidrs { ip });
        }
        Some(routing.cidrs.clone())
    } else {
        None
    };
    let (priority, table) = if routing.compat {
        (EGRESS_PRIORITY_COMPAT, link.index)
    } else {
        (EGRESS_PRIORITY, 10 + routing.interface_number)
    };
    Ok(PodRules {
        ip,
        priority,
        table,
        gateway: routing.gateway,
        link: link.index,
        cidrs,
    })
}

/// Install the source routing of every address of a pod.
///
/// # Errors
/// The first address whose routing could not be installed (the others may be in place:
/// [`remove`] them).
pub(crate) async fn install(
    config: &AgentConfig,
    routing: &[PodRouting],
) -> Result<(), CloudRoutingError> {
    if routing.is_empty() || crate::faults::skipped(crate::faults::Point::PodRules) {
        return Ok(());
    }
    for r in routing {
        let rules = rules_for(config, r).await?;
        cloud::install(&rules)
            .await
            .map_err(|source| CloudRoutingError::Netlink { ip: r.ip, source })?;
    }
    Ok(())
}

/// Remove the rules of `ips`, and the table routes of any table no rule of weft's uses any
/// more (a DEL leaves nothing behind).
///
/// # Errors
/// The kernel refused.
pub(crate) async fn remove(ips: &[IpAddr]) -> Result<Vec<RuleRow>, NetlinkError> {
    if ips.is_empty() {
        return Ok(Vec::new());
    }
    let removed = cloud::remove_where(|ip| ips.contains(&ip)).await?;
    flush_unused_tables(&removed).await?;
    Ok(removed)
}

/// Flush the tables `removed` egress rules pointed at that no remaining rule uses.
async fn flush_unused_tables(removed: &[RuleRow]) -> Result<(), NetlinkError> {
    let tables: BTreeSet<u32> = removed
        .iter()
        .filter(|r| r.priority != cloud::INGRESS_PRIORITY)
        .map(|r| r.table)
        .collect();
    if tables.is_empty() {
        return Ok(());
    }
    let used: BTreeSet<u32> = cloud::list().await?.iter().map(|r| r.table).collect();
    for table in tables.difference(&used) {
        cloud::flush_table(*table).await?;
    }
    Ok(())
}

impl super::Daemon {
    /// On the tick (cloud modes): install again the source routing of every wired pod whose
    /// rules are gone (a link that came up late, a hand's `ip rule flush`), under the pod's
    /// attachment lock so no DEL is undone.
    pub(crate) async fn repair_pod_routing(&self) {
        if !routes_pods(self.config.ipam) {
            return;
        }
        let (Ok(rows), Ok((records, _))) = (cloud::list().await, self.records.all()) else {
            return;
        };
        let routed: BTreeSet<IpAddr> = rows
            .iter()
            .filter(|r| r.priority != cloud::INGRESS_PRIORITY)
            .filter_map(cloud::pod_of)
            .collect();
        for stale in records
            .into_iter()
            .filter(|r| r.routing.iter().any(|p| !routed.contains(&p.ip)))
        {
            let _attachment = self
                .attachments
                .lock(&stale.container_id, &stale.ifname)
                .await;
            let Ok(Some(mut record)) = self.records.get(&stale.container_id, &stale.ifname) else {
                continue;
            };
            if record.deleting || record.result.is_none() {
                continue;
            }
            match install(&self.config, &record.routing).await {
                Ok(()) => {
                    info!(pod = %record.owner, "the pod's source routing is back");
                    // Every address has its routing now (none lacked metadata): no problem left.
                    if record.routing.len() == record.addrs.len()
                        && record.routing_problem.take().is_some()
                        && let Err(error) = self.records.put(&record)
                    {
                        warn!(error = %chain(&error), "updating the endpoint record");
                    }
                }
                Err(error) => {
                    warn!(pod = %record.owner, error = %chain(&error), "the pod's source routing is still missing");
                }
            }
        }
    }
}

/// Start-up: remove the rules of addresses no live record holds (an agent killed inside a
/// DEL, a pod gone while it was down).
pub(crate) async fn sweep(live: &BTreeSet<IpAddr>) {
    match cloud::remove_where(|ip| !live.contains(&ip)).await {
        Ok(removed) if !removed.is_empty() => {
            info!(
                rules = removed.len(),
                "removed the source-routing rules of gone pods"
            );
            if let Err(error) = flush_unused_tables(&removed).await {
                warn!(error = %chain(&error), "flushing unused tables");
            }
        }
        Ok(_) => {}
        Err(error) => warn!(error = %chain(&error), "sweeping stale source-routing rules"),
    }
}

/// Why `weft-agent cleanup` could not take the cloud routing off.
#[derive(Debug, thiserror::Error)]
pub enum CloudCleanupError {
    /// A rule, route or address could not be removed.
    #[error("removing weft's rules, tables and ENI addresses")]
    Netlink(#[from] NetlinkError),
    /// `rp_filter` could not be put back.
    #[error("putting rp_filter back")]
    RpFilter(#[from] crate::datapath::rp_filter::RpFilterError),
}

/// `weft-agent cleanup`: the addresses the device configurator added (and `rp_filter` as it
/// was), every rule of weft's, and the routes of the tables they or the ENIs used; what went
/// is pushed to `removed` as it goes.
///
/// # Errors
/// The kernel refused.
pub async fn remove_all(
    state_dir: &std::path::Path,
    removed: &mut Vec<Removed>,
) -> Result<(), CloudCleanupError> {
    let added = devices::load(&state_dir.join(devices::DEVICES_FILE));
    for a in &added {
        if let Some(address) = a.address
            && device::remove_address(a.ifindex, &a.ifname, address).await?
        {
            removed.push(Removed {
                what: "ENI address",
                name: format!("{address} dev {}", a.ifname),
            });
        }
        if let Some(was) = &a.rp_filter_was
            && crate::datapath::rp_filter::get(&a.ifname).is_ok()
        {
            crate::datapath::rp_filter::set(&a.ifname, was)?;
        }
    }
    let rules = cloud::remove_where(|_| true).await?;
    removed.extend(rules.iter().map(|r| Removed {
        what: "ip rule",
        name: r.to_string(),
    }));
    let tables: BTreeSet<u32> = rules
        .iter()
        .filter(|r| r.priority != cloud::INGRESS_PRIORITY)
        .map(|r| r.table)
        .chain(added.iter().map(|a| a.table))
        .collect();
    for table in tables {
        let n = cloud::flush_table(table).await?;
        if n > 0 {
            removed.push(Removed {
                what: "routes of table",
                name: format!("{table} ({n})"),
            });
        }
    }
    Ok(())
}
