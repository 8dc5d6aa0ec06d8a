//! kube-proxy's `iptables` mode as v1.34 writes it: `pkg/proxy/iptables/proxier.go`
//! (`iptablesJumpChains`, `syncProxyRules`, `writeServiceToEndpointRules`, `CleanupLeftovers`),
//! read at Nordix/kubernetes@d328a85c (a mirror of kubernetes master after #132456, first in
//! v1.34.0-beta.0, and before #135800), checked against its `TestOverallIPTablesRules`. Default
//! configuration: masquerade bit 14, `--iptables-localhost-nodeports` on and NodePorts on every
//! local address (so `route_localnet=1`, `KUBE-FIREWALL` and the localhost NodePort rules), the
//! nfacct counters kube-proxy creates where the kernel has nfacct (the project kernel does;
//! without it kube-proxy leaves the `-m nfacct` matches out and `apply` here panics),
//! `nf_conntrack_tcp_be_liberal` off (so `KUBE-FORWARD` drops ctstate INVALID), `MASQUERADE
//! --random-fully` (iptables 1.8.9 has it). This file owns the `KUBE-*` chains of the filter and
//! nat tables, their jumps from the built-in chains, the mangle canary and kube-proxy's two
//! nfacct counters; it touches no other chain.

use std::{net::SocketAddrV4, process::Command};

use nix::{
    errno::Errno,
    sys::socket::{
        AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
        socket,
    },
};

use super::{
    MASQUERADE_MARK, Proxier, Proxy, Service, hash_base32, read_sysctl, run_with_input,
    write_sysctl,
};
use crate::run;

const SERVICES: &str = "KUBE-SERVICES";
const EXTERNAL_SERVICES: &str = "KUBE-EXTERNAL-SERVICES";
const NODEPORTS: &str = "KUBE-NODEPORTS";
const POSTROUTING: &str = "KUBE-POSTROUTING";
const MARK_MASQ: &str = "KUBE-MARK-MASQ";
const FORWARD: &str = "KUBE-FORWARD";
const PROXY_FIREWALL: &str = "KUBE-PROXY-FIREWALL";
const CANARY: &str = "KUBE-PROXY-CANARY";
/// kubelet's anti-martian chain, which kube-proxy duplicates for localhost NodePorts.
const KUBELET_FIREWALL: &str = "KUBE-FIREWALL";

/// Prefixes of the per-Service and per-endpoint chains (`isServiceChainName`).
const SERVICE_CHAIN_PREFIXES: [&str; 5] = [
    "KUBE-SVC-",
    "KUBE-SVL-",
    "KUBE-EXT-",
    "KUBE-FW-",
    "KUBE-SEP-",
];

/// Above this many endpoints in all, kube-proxy leaves the per-endpoint comments out.
const LARGE_CLUSTER_ENDPOINTS: usize = 1000;

/// kube-proxy's nfacct counter of dropped ctstate INVALID packets.
const INVALID_DROPPED_COUNTER: &str = "ct_state_invalid_dropped_pkts";
/// kube-proxy's nfacct counter of accepted localhost NodePort packets.
const LOCALHOST_NODEPORTS_COUNTER: &str = "localhost_nps_accepted_pkts";

const ROUTE_LOCALNET: &str = "net/ipv4/conf/all/route_localnet";
const TCP_BE_LIBERAL: &str = "net/netfilter/nf_conntrack_tcp_be_liberal";

/// `KUBE-SVC-…`: the Service port's chain (Cluster traffic policy).
#[must_use]
pub fn service_chain(service: &Service) -> String {
    format!("KUBE-SVC-{}", port_proto_hash(service))
}

/// `KUBE-EXT-…`: the Service port's chain for external (NodePort) traffic.
#[must_use]
pub fn external_chain(service: &Service) -> String {
    format!("KUBE-EXT-{}", port_proto_hash(service))
}

/// `KUBE-SEP-…`: the chain of one endpoint of the Service port
/// (`servicePortEndpointChainName`).
#[must_use]
pub fn endpoint_chain(service: &Service, endpoint: SocketAddrV4) -> String {
    let name = format!(
        "{}{}{endpoint}",
        service.service_port_name(),
        service.protocol
    );
    format!("KUBE-SEP-{}", &hash_base32(&name)[..16])
}

/// kube-proxy's `portProtoHash`: 16 characters of base32(sha256("ns/svc:port" + "tcp")).
fn port_proto_hash(service: &Service) -> String {
    let name = format!("{}{}", service.service_port_name(), service.protocol);
    hash_base32(&name)[..16].to_owned()
}

/// `Jump::new_only` values.
const NEW: bool = true;
const ALL: bool = false;

/// A rule in a built-in chain that jumps to one of kube-proxy's chains.
struct Jump {
    table: &'static str,
    from: &'static str,
    to: &'static str,
    /// Only for `-m conntrack --ctstate NEW`.
    new_only: bool,
    /// "" for none.
    comment: &'static str,
}

impl Jump {
    const fn new(
        table: &'static str,
        to: &'static str,
        from: &'static str,
        new_only: bool,
        comment: &'static str,
    ) -> Self {
        Self {
            table,
            from,
            to,
            new_only,
            comment,
        }
    }

    /// The rule's arguments after `<chain> -t <table>`.
    fn args(&self) -> Vec<&'static str> {
        let mut args = Vec::new();
        if self.new_only {
            args.extend(["-m", "conntrack", "--ctstate", "NEW"]);
        }
        if !self.comment.is_empty() {
            args.extend(["-m", "comment", "--comment", self.comment]);
        }
        args.extend(["-j", self.to]);
        args
    }
}

/// `iptablesJumpChains` then `iptablesKubeletJumpChains`, in the order kube-proxy ensures them
/// (each is inserted at the top, so a built-in chain ends up with them reversed).
#[rustfmt::skip]
const JUMPS: [Jump; 14] = [
    Jump::new("filter", EXTERNAL_SERVICES, "INPUT", NEW, "kubernetes externally-visible service portals"),
    Jump::new("filter", EXTERNAL_SERVICES, "FORWARD", NEW, "kubernetes externally-visible service portals"),
    Jump::new("filter", NODEPORTS, "INPUT", ALL, "kubernetes health check service ports"),
    Jump::new("filter", SERVICES, "FORWARD", NEW, "kubernetes service portals"),
    Jump::new("filter", SERVICES, "OUTPUT", NEW, "kubernetes service portals"),
    Jump::new("filter", FORWARD, "FORWARD", ALL, "kubernetes forwarding rules"),
    Jump::new("filter", PROXY_FIREWALL, "INPUT", NEW, "kubernetes load balancer firewall"),
    Jump::new("filter", PROXY_FIREWALL, "OUTPUT", NEW, "kubernetes load balancer firewall"),
    Jump::new("filter", PROXY_FIREWALL, "FORWARD", NEW, "kubernetes load balancer firewall"),
    Jump::new("nat", SERVICES, "OUTPUT", ALL, "kubernetes service portals"),
    Jump::new("nat", SERVICES, "PREROUTING", ALL, "kubernetes service portals"),
    Jump::new("nat", POSTROUTING, "POSTROUTING", ALL, "kubernetes postrouting rules"),
    Jump::new("filter", KUBELET_FIREWALL, "INPUT", ALL, ""),
    Jump::new("filter", KUBELET_FIREWALL, "OUTPUT", ALL, ""),
];

/// The `iptables` proxier.
pub(super) struct Iptables;

impl Proxier for Iptables {
    fn ruleset(&self, proxy: &Proxy, services: &[Service]) -> String {
        Restore::build(proxy, services).text()
    }

    fn apply(&self, proxy: &Proxy, services: &[Service]) {
        // NewProxier: localhost NodePorts need route_localnet; a liberal conntrack would make
        // kube-proxy leave the INVALID drop out, which this model always writes.
        write_sysctl(ROUTE_LOCALNET, "1");
        let liberal = read_sysctl(TCP_BE_LIBERAL);
        assert!(
            liberal == "0",
            "nf_conntrack_tcp_be_liberal is {liberal} in this namespace: kube-proxy would not \
             write its ctstate INVALID drop rule, and these rules have it"
        );
        // ipt.Monitor's canaries, then the jumps and counters of a full sync, then the restore.
        for table in ["mangle", "nat", "filter"] {
            ensure_chain(table, CANARY);
        }
        for jump in &JUMPS {
            ensure_chain(jump.table, jump.to);
            if !has_rule(jump) {
                run(Command::new("iptables")
                    .args(["-w", "-I", jump.from, "-t", jump.table])
                    .args(jump.args()));
            }
        }
        for counter in [INVALID_DROPPED_COUNTER, LOCALHOST_NODEPORTS_COUNTER] {
            nfacct_add(counter);
        }
        run_with_input(
            Command::new("iptables-restore").args(["-w", "--noflush", "--counters"]),
            &self.ruleset(proxy, services),
        );
    }

    fn remove(&self) {
        // CleanupLeftovers, plus kubelet's KUBE-FIREWALL (no kubelet here) and the counters.
        for jump in &JUMPS {
            if has_rule(jump) {
                run(Command::new("iptables")
                    .args(["-w", "-D", jump.from, "-t", jump.table])
                    .args(jump.args()));
            }
        }
        remove_chains(
            "nat",
            &[SERVICES, NODEPORTS, POSTROUTING, MARK_MASQ, CANARY],
        );
        remove_chains(
            "filter",
            &[
                SERVICES,
                EXTERNAL_SERVICES,
                FORWARD,
                NODEPORTS,
                PROXY_FIREWALL,
                CANARY,
                KUBELET_FIREWALL,
            ],
        );
        remove_chains("mangle", &[CANARY]);
        for counter in [INVALID_DROPPED_COUNTER, LOCALHOST_NODEPORTS_COUNTER] {
            nfacct_delete(counter);
        }
    }
}

/// The `iptables-restore` input of one sync, in the order kube-proxy writes its buffers.
#[derive(Debug, Default)]
struct Restore {
    filter_chains: Vec<String>,
    filter_rules: Vec<String>,
    nat_chains: Vec<String>,
    nat_rules: Vec<String>,
}

/// A chain line: creates the chain or flushes it.
fn chain_line(chain: &str) -> String {
    format!(":{chain} - [0:0]")
}

impl Restore {
    fn build(proxy: &Proxy, services: &[Service]) -> Self {
        let mark = MASQUERADE_MARK;
        let mut restore = Self::default();
        for chain in [
            SERVICES,
            EXTERNAL_SERVICES,
            FORWARD,
            NODEPORTS,
            PROXY_FIREWALL,
        ] {
            restore.filter_chains.push(chain_line(chain));
        }
        for chain in [SERVICES, NODEPORTS, POSTROUTING, MARK_MASQ] {
            restore.nat_chains.push(chain_line(chain));
        }
        restore.nat_rules.extend([
            format!("-A {POSTROUTING} -m mark ! --mark {mark}/{mark} -j RETURN"),
            format!("-A {POSTROUTING} -j MARK --xor-mark {mark}"),
            format!(
                "-A {POSTROUTING} -m comment --comment \"kubernetes service traffic requiring \
                 SNAT\" -j MASQUERADE --random-fully"
            ),
            format!("-A {MARK_MASQ} -j MARK --or-mark {mark}"),
        ]);
        restore.filter_chains.push(chain_line(KUBELET_FIREWALL));
        restore.filter_rules.push(format!(
            "-A {KUBELET_FIREWALL} -m comment --comment \"block incoming localnet connections\" \
             -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT \
             -j DROP"
        ));

        let endpoints: usize = services.iter().map(|s| s.endpoints.len()).sum();
        let large_cluster = endpoints > LARGE_CLUSTER_ENDPOINTS;
        for service in services {
            restore.add_service(proxy, service, large_cluster);
        }

        restore.nat_rules.push(format!(
            "-A {SERVICES} -m comment --comment \"kubernetes service nodeports; NOTE: this must \
             be the last rule in this chain\" -m addrtype --dst-type LOCAL -j {NODEPORTS}"
        ));
        restore.filter_rules.extend([
            format!(
                "-A {FORWARD} -m conntrack --ctstate INVALID -m nfacct --nfacct-name \
                 {INVALID_DROPPED_COUNTER} -j DROP"
            ),
            format!(
                "-A {FORWARD} -m comment --comment \"kubernetes forwarding rules\" -m mark \
                 --mark {mark}/{mark} -j ACCEPT"
            ),
            format!(
                "-A {FORWARD} -m comment --comment \"kubernetes forwarding conntrack rule\" -m \
                 conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
            ),
        ]);
        restore
    }

    /// One Service port's rules; `large_cluster` drops the per-endpoint comments.
    fn add_service(&mut self, proxy: &Proxy, service: &Service, large_cluster: bool) {
        let name = service.service_port_name();
        let proto = service.protocol;
        let cluster_ip = format!(
            "-m {proto} -p {proto} -d {} --dport {}",
            service.cluster_ip, service.port
        );
        let endpoints = service.sorted_endpoints();
        let svc_chain = service_chain(service);
        let ext_chain = external_chain(service);

        if endpoints.is_empty() {
            let comment = format!("-m comment --comment \"{name} has no endpoints\"");
            self.filter_rules
                .push(format!("-A {SERVICES} {comment} {cluster_ip} -j REJECT"));
            if let Some(node_port) = service.node_port {
                self.filter_rules.push(format!(
                    "-A {EXTERNAL_SERVICES} {comment} -m addrtype --dst-type LOCAL -m {proto} -p \
                     {proto} --dport {node_port} -j REJECT"
                ));
            }
            return;
        }

        self.nat_rules.push(format!(
            "-A {SERVICES} -m comment --comment \"{name} cluster IP\" {cluster_ip} -j {svc_chain}"
        ));
        if let Some(node_port) = service.node_port {
            self.nat_rules.extend([
                format!(
                    "-A {NODEPORTS} -m comment --comment {name} -m {proto} -p {proto} -d \
                     127.0.0.0/8 --dport {node_port} -m nfacct --nfacct-name \
                     {LOCALHOST_NODEPORTS_COUNTER} -j {ext_chain}"
                ),
                format!(
                    "-A {NODEPORTS} -m comment --comment {name} -m {proto} -p {proto} --dport \
                     {node_port} -j {ext_chain}"
                ),
            ]);
        }
        self.nat_rules.push(format!(
            "-A {svc_chain} -m comment --comment \"{name} cluster IP\" {cluster_ip} ! -s {} -j \
             {MARK_MASQ}",
            proxy.cluster_cidr
        ));
        if service.node_port.is_some() {
            self.nat_chains.push(chain_line(&ext_chain));
            self.nat_rules.extend([
                format!(
                    "-A {ext_chain} -m comment --comment \"masquerade traffic for {name} external \
                     destinations\" -j {MARK_MASQ}"
                ),
                format!("-A {ext_chain} -j {svc_chain}"),
            ]);
        }

        self.nat_chains.push(chain_line(&svc_chain));
        self.add_endpoints(service, &endpoints, large_cluster);
    }

    /// `writeServiceToEndpointRules` (affinity first, then one rule per endpoint, each taking
    /// 1/(endpoints left) of what reaches it) and the endpoint chains.
    fn add_endpoints(
        &mut self,
        service: &Service,
        endpoints: &[SocketAddrV4],
        large_cluster: bool,
    ) {
        let name = service.service_port_name();
        let proto = service.protocol;
        let svc_chain = service_chain(service);
        let to_endpoint = |endpoint: &SocketAddrV4| {
            if large_cluster {
                String::new()
            } else {
                format!(" -m comment --comment \"{name} -> {endpoint}\"")
            }
        };
        if let Some(timeout) = service.affinity_timeout {
            for endpoint in endpoints {
                let sep = endpoint_chain(service, *endpoint);
                self.nat_rules.push(format!(
                    "-A {svc_chain}{} -m recent --name {sep} --rcheck --seconds {timeout} --reap \
                     -j {sep}",
                    to_endpoint(endpoint)
                ));
            }
        }
        for (i, endpoint) in endpoints.iter().enumerate() {
            let left = endpoints.len() - i;
            let statistic = if left > 1 {
                format!(
                    " -m statistic --mode random --probability {}",
                    probability(left)
                )
            } else {
                String::new()
            };
            self.nat_rules.push(format!(
                "-A {svc_chain}{}{statistic} -j {}",
                to_endpoint(endpoint),
                endpoint_chain(service, *endpoint)
            ));
        }

        let comment = if large_cluster {
            String::new()
        } else {
            format!(" -m comment --comment {name}")
        };
        for endpoint in endpoints {
            let sep = endpoint_chain(service, *endpoint);
            self.nat_chains.push(chain_line(&sep));
            let recent = if service.affinity_timeout.is_some() {
                format!(" -m recent --name {sep} --set")
            } else {
                String::new()
            };
            self.nat_rules.extend([
                format!("-A {sep}{comment} -s {} -j {MARK_MASQ}", endpoint.ip()),
                format!(
                    "-A {sep}{comment}{recent} -m {proto} -p {proto} -j DNAT --to-destination \
                     {endpoint}"
                ),
            ]);
        }
    }

    fn text(&self) -> String {
        let mut lines = vec!["*filter".to_owned()];
        lines.extend(self.filter_chains.iter().cloned());
        lines.extend(self.filter_rules.iter().cloned());
        lines.push("COMMIT".to_owned());
        lines.push("*nat".to_owned());
        lines.extend(self.nat_chains.iter().cloned());
        lines.extend(self.nat_rules.iter().cloned());
        lines.push("COMMIT".to_owned());
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }
}

/// kube-proxy's `computeProbability`: 1/n as Go's `%0.10f`.
fn probability(n: usize) -> String {
    let n = u32::try_from(n).expect("fewer than 2^32 endpoints");
    format!("{:.10}", 1.0 / f64::from(n))
}

/// `EnsureChain`: `iptables -N`, content if the chain exists.
fn ensure_chain(table: &str, chain: &str) {
    let out = Command::new("iptables")
        .args(["-w", "-N", chain, "-t", table])
        .output()
        .unwrap_or_else(|e| panic!("cannot start iptables: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || stderr.contains("exists"),
        "iptables -N {chain} -t {table} failed ({}): {stderr}",
        out.status
    );
}

/// `iptables -C`: whether `jump` is in its built-in chain.
fn has_rule(jump: &Jump) -> bool {
    Command::new("iptables")
        .args(["-w", "-C", jump.from, "-t", jump.table])
        .args(jump.args())
        .output()
        .unwrap_or_else(|e| panic!("cannot start iptables: {e}"))
        .status
        .success()
}

/// Flush and delete, in one restore, those of `fixed` and of the per-Service chains that
/// exist in `table`.
fn remove_chains(table: &str, fixed: &[&str]) {
    let saved = run(Command::new("iptables-save").args(["-t", table]));
    let saved = String::from_utf8_lossy(&saved.stdout);
    let doomed: Vec<&str> = saved
        .lines()
        .filter_map(|line| line.strip_prefix(':')?.split(' ').next())
        .filter(|chain| {
            fixed.contains(chain) || SERVICE_CHAIN_PREFIXES.iter().any(|p| chain.starts_with(p))
        })
        .collect();
    if doomed.is_empty() {
        return;
    }
    let mut lines = vec![format!("*{table}")];
    lines.extend(doomed.iter().map(|chain| chain_line(chain)));
    lines.extend(doomed.iter().map(|chain| format!("-X {chain}")));
    lines.push("COMMIT\n".to_owned());
    run_with_input(
        Command::new("iptables-restore").args(["-w", "--noflush", "--counters"]),
        &lines.join("\n"),
    );
}

/// nfnetlink's accounting subsystem (`NFNL_SUBSYS_ACCT`) and its messages.
const NFNL_SUBSYS_ACCT: u16 = 7;
const NFNL_MSG_ACCT_NEW: u16 = 0;
const NFNL_MSG_ACCT_DEL: u16 = 3;
/// `NFACCT_NAME`, the counter's name attribute.
const NFACCT_NAME: u16 = 1;

/// Create the nfacct counter `name` in the calling thread's namespace, as kube-proxy's
/// `nfacct.Ensure` does; an existing one is kept.
fn nfacct_add(name: &str) {
    let flags = u16::try_from(libc::NLM_F_CREATE).expect("flag fits");
    match nfacct_request(NFNL_MSG_ACCT_NEW, flags, name) {
        Ok(()) | Err(Errno::EBUSY | Errno::EEXIST) => {}
        Err(e) => panic!(
            "create nfacct counter {name}: {e}: kube-proxy writes its nfacct matches only where \
             it can create its counters, and these rules have them (the project kernel has \
             NETFILTER_NETLINK_ACCT and NETFILTER_XT_MATCH_NFACCT)"
        ),
    }
}

/// Delete the nfacct counter `name`; a missing one is fine.
fn nfacct_delete(name: &str) {
    match nfacct_request(NFNL_MSG_ACCT_DEL, 0, name) {
        Ok(()) | Err(Errno::ENOENT) => {}
        Err(e) => panic!("delete nfacct counter {name}: {e}"),
    }
}

/// Send one nfnetlink accounting request naming `name` and return the kernel's verdict.
fn nfacct_request(message: u16, flags: u16, name: &str) -> Result<(), Errno> {
    let mut attr = name.as_bytes().to_vec();
    attr.push(0);
    let attr_len = 4 + attr.len();
    let len = 16 + 4 + attr_len.next_multiple_of(4);
    let mut msg = Vec::with_capacity(len);
    // nlmsghdr
    msg.extend(u32::try_from(len).expect("short message").to_ne_bytes());
    msg.extend(((NFNL_SUBSYS_ACCT << 8) | message).to_ne_bytes());
    let request = u16::try_from(libc::NLM_F_REQUEST | libc::NLM_F_ACK).expect("flags fit");
    msg.extend((request | flags).to_ne_bytes());
    msg.extend(1u32.to_ne_bytes());
    msg.extend(0u32.to_ne_bytes());
    // nfgenmsg: AF_UNSPEC, NFNETLINK_V0, res_id 0
    msg.extend([0u8, 0, 0, 0]);
    // NFACCT_NAME
    msg.extend(u16::try_from(attr_len).expect("short name").to_ne_bytes());
    msg.extend(NFACCT_NAME.to_ne_bytes());
    msg.extend(attr);
    msg.resize(len, 0);

    let socket = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkNetFilter,
    )?;
    sendto(
        std::os::fd::AsRawFd::as_raw_fd(&socket),
        &msg,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )?;
    let mut reply = [0u8; 1024];
    let n = recv(
        std::os::fd::AsRawFd::as_raw_fd(&socket),
        &mut reply,
        MsgFlags::empty(),
    )?;
    // The acknowledgement: nlmsghdr of type NLMSG_ERROR, then the (negative) errno.
    let kind = u16::from_ne_bytes([reply[4], reply[5]]);
    assert!(
        n >= 20 && i32::from(kind) == libc::NLMSG_ERROR,
        "unexpected nfnetlink reply to {name}: {:?}",
        &reply[..n]
    );
    match i32::from_ne_bytes([reply[16], reply[17], reply[18], reply[19]]) {
        0 => Ok(()),
        error => Err(Errno::from_raw(-error)),
    }
}

#[cfg(test)]
mod tests;
