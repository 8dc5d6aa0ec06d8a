//! kube-proxy's `nftables` mode as v1.34 writes it: `pkg/proxy/nftables/proxier.go`
//! (`nftablesBaseChains`, `nftablesJumpChains`, `setupNFTables`, `syncProxyRules`,
//! `writeServiceToEndpointRules`, `CleanupLeftovers`), read at Nordix/kubernetes@d328a85c (a
//! mirror of kubernetes master): the base-chain layout of #132456 (first in v1.34.0-beta.0:
//! `filter-prerouting-pre-dnat` / `filter-output-pre-dnat` at dstnat-10, the other filter chains
//! at priority 0) and the `mark-for-masquerade` chain that #135800 later inlined; checked
//! against `TestOverallNFTablesRules` at 81810de6. Transaction text as sigs.k8s.io/knftables
//! writes it (`objects.go`). Default configuration: masquerade bit 14, `--nodeport-addresses
//! primary` (the `nodeport-ips` set), no ServiceCIDR known (so no "unallocated ClusterIP" drop).
//! This mode writes no ct state invalid rule (removed in v1.30, #122663). This file owns `table
//! ip kube-proxy`; it touches no other table.

use std::{fmt::Write as _, net::SocketAddrV4, process::Command};

use super::{MASQUERADE_MARK, Proxier, Proxy, Service, hash_base32, run_with_input};
use crate::run;

/// The family and table every command names.
const TABLE: &str = "ip kube-proxy";

/// knftables' `NameLengthMax` less kube-proxy's longest prefix (`chainNameBaseLengthMax`).
const NAME_BASE_MAX: usize = 256 - 16;

/// `service-…`: the Service port's chain (Cluster traffic policy).
#[must_use]
pub fn service_chain(service: &Service) -> String {
    format!("service-{}", port_name_base(service))
}

/// `external-…`: the Service port's chain for external (NodePort) traffic.
#[must_use]
pub fn external_chain(service: &Service) -> String {
    format!("external-{}", port_name_base(service))
}

/// `endpoint-…`: the chain of one endpoint of the Service port.
#[must_use]
pub fn endpoint_chain(service: &Service, endpoint: SocketAddrV4) -> String {
    format!("endpoint-{}", endpoint_name_base(service, endpoint))
}

/// `affinity-…`: the set of clients stuck to one endpoint (sessionAffinity ClientIP).
#[must_use]
pub fn affinity_set(service: &Service, endpoint: SocketAddrV4) -> String {
    format!("affinity-{}", endpoint_name_base(service, endpoint))
}

/// `servicePortChainNameBase`: `HASH-ns/svc/tcp/port`.
fn port_name_base(service: &Service) -> String {
    hash_and_truncate(&format!(
        "{}/{}/{}/{}",
        service.namespace, service.name, service.protocol, service.port_name
    ))
}

/// `servicePortEndpointChainNameBase`: `HASH-ns/svc/tcp/port__ip/port`.
fn endpoint_name_base(service: &Service, endpoint: SocketAddrV4) -> String {
    hash_and_truncate(&format!(
        "{}/{}/{}/{}__{}/{}",
        service.namespace,
        service.name,
        service.protocol,
        service.port_name,
        endpoint.ip(),
        endpoint.port()
    ))
}

/// `hashAndTruncate`: 8 characters of base32(sha256(name)), `-`, name; cut to the name limit
/// with `...`.
fn hash_and_truncate(name: &str) -> String {
    let mut base = format!("{}-{name}", &hash_base32(name)[..8]);
    if base.len() > NAME_BASE_MAX {
        base.truncate(NAME_BASE_MAX - 3);
        base.push_str("...");
    }
    base
}

/// `nftablesBaseChains`: name, type, hook, priority (knftables writes the number).
const BASE_CHAINS: [(&str, &str, &str, i32); 8] = [
    ("filter-prerouting-pre-dnat", "filter", "prerouting", -110),
    ("filter-output-pre-dnat", "filter", "output", -110),
    ("filter-input", "filter", "input", 0),
    ("filter-forward", "filter", "forward", 0),
    ("filter-output", "filter", "output", 0),
    ("nat-prerouting", "nat", "prerouting", -100),
    ("nat-output", "nat", "output", -100),
    ("nat-postrouting", "nat", "postrouting", 100),
];

/// `nftablesJumpChains`: to, from, the match before `jump`.
const JUMPS: [(&str, &str, &str); 11] = [
    ("nodeport-endpoints-check", "filter-input", "ct state new"),
    ("service-endpoints-check", "filter-input", "ct state new"),
    ("service-endpoints-check", "filter-forward", "ct state new"),
    ("service-endpoints-check", "filter-output", "ct state new"),
    (
        "firewall-check",
        "filter-prerouting-pre-dnat",
        "ct state new",
    ),
    ("firewall-check", "filter-output-pre-dnat", "ct state new"),
    ("services", "nat-output", ""),
    ("services", "nat-prerouting", ""),
    ("masquerading", "nat-postrouting", ""),
    ("cluster-ips-check", "filter-forward", "ct state new"),
    ("cluster-ips-check", "filter-output", "ct state new"),
];

/// The `nftables` proxier.
pub(super) struct Nftables;

impl Proxier for Nftables {
    fn ruleset(&self, proxy: &Proxy, services: &[Service]) -> String {
        let mut tx = Transaction::default();
        tx.setup(proxy);
        for service in services {
            tx.add_service(proxy, service);
        }
        tx.text
    }

    fn apply(&self, proxy: &Proxy, services: &[Service]) {
        run_with_input(
            Command::new("nft").args(["-f", "-"]),
            &self.ruleset(proxy, services),
        );
    }

    fn remove(&self) {
        // CleanupLeftovers deletes the table if it is there.
        let listed = Command::new("nft")
            .args(["list", "table", "ip", "kube-proxy"])
            .output()
            .unwrap_or_else(|e| panic!("cannot start nft: {e}"));
        if listed.status.success() {
            run(Command::new("nft").args(["delete", "table", "ip", "kube-proxy"]));
        }
    }
}

/// A knftables transaction's text, with kube-proxy's `ensureChain` bookkeeping.
#[derive(Debug, Default)]
struct Transaction {
    text: String,
    chains: Vec<String>,
}

impl Transaction {
    /// One command on `table ip kube-proxy`.
    fn cmd(&mut self, verb: &str, object: &str, rest: &str) {
        writeln!(self.text, "{verb} {object} {TABLE} {rest}").expect("write to a String");
    }

    /// `add rule`.
    fn rule(&mut self, chain: &str, rule: &str) {
        self.cmd("add", "rule", &format!("{chain} {rule}"));
    }

    /// `add element`.
    fn element(&mut self, container: &str, element: &str) {
        self.cmd("add", "element", &format!("{container} {{ {element} }}"));
    }

    /// `ensureChain`: add and flush `chain` once per transaction.
    fn ensure_chain(&mut self, chain: &str) {
        if self.chains.iter().any(|c| c == chain) {
            return;
        }
        self.chains.push(chain.to_owned());
        self.cmd("add", "chain", chain);
        self.cmd("flush", "chain", chain);
    }

    /// `setupNFTables` of a new kube-proxy's first sync (its base chains re-created once).
    fn setup(&mut self, proxy: &Proxy) {
        let mark = MASQUERADE_MARK;
        self.text
            .push_str("add table ip kube-proxy { comment \"rules for kube-proxy\" ; }\n");
        for (name, ..) in BASE_CHAINS {
            self.cmd("add", "chain", name);
            self.cmd("delete", "chain", name);
        }
        for (name, kind, hook, priority) in BASE_CHAINS {
            self.cmd(
                "add",
                "chain",
                &format!("{name} {{ type {kind} hook {hook} priority {priority} ; }}"),
            );
            self.cmd("flush", "chain", name);
        }
        for (to, from, matches) in JUMPS {
            self.ensure_chain(to);
            let rule = if matches.is_empty() {
                format!("jump {to}")
            } else {
                format!("{matches} jump {to}")
            };
            self.rule(from, &rule);
        }
        for chain in [
            "services",
            "cluster-ips-check",
            "masquerading",
            "mark-for-masquerade",
        ] {
            self.ensure_chain(chain);
        }
        self.rule("mark-for-masquerade", &format!("mark set mark or {mark}"));
        self.rule("masquerading", &format!("mark and {mark} == 0 return"));
        self.rule("masquerading", &format!("mark set mark xor {mark}"));
        self.rule("masquerading", "masquerade fully-random");

        self.setup_containers(proxy);
    }

    /// The rest of `setupNFTables`: sets and verdict maps and the rules that consult them.
    fn setup_containers(&mut self, proxy: &Proxy) {
        self.cmd(
            "add",
            "set",
            "cluster-ips { type ipv4_addr ; comment \"Active ClusterIPs\" ; }",
        );
        self.rule(
            "cluster-ips-check",
            "ip daddr @cluster-ips reject comment \"Reject traffic to invalid ports of \
             ClusterIPs\"",
        );
        self.cmd(
            "add",
            "set",
            "nodeport-ips { type ipv4_addr ; comment \"IPs that accept NodePort traffic\" ; }",
        );
        let every_address = proxy.node_ips.is_empty();
        if every_address {
            self.cmd("delete", "set", "nodeport-ips");
        } else {
            self.cmd("flush", "set", "nodeport-ips");
            for ip in &proxy.node_ips {
                self.element("nodeport-ips", &ip.to_string());
            }
        }

        self.cmd(
            "add",
            "map",
            "no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; \
             comment \"vmap to drop or reject packets to services with no endpoints\" ; }",
        );
        self.cmd(
            "add",
            "map",
            "no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment \"vmap \
             to drop or reject packets to service nodeports with no endpoints\" ; }",
        );
        self.cmd(
            "add",
            "chain",
            "reject-chain { comment \"helper for @no-endpoint-services / @no-endpoint-nodeports\" \
             ; }",
        );
        self.cmd("flush", "chain", "reject-chain");
        self.rule("reject-chain", "reject");
        self.rule(
            "service-endpoints-check",
            "ip daddr . meta l4proto . th dport vmap @no-endpoint-services",
        );
        let nodeport_dst = if every_address {
            "ip daddr != 127.0.0.0/8"
        } else {
            "ip daddr @nodeport-ips"
        };
        self.rule(
            "nodeport-endpoints-check",
            &format!("{nodeport_dst} meta l4proto . th dport vmap @no-endpoint-nodeports"),
        );

        self.cmd(
            "add",
            "map",
            "firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment \
             \"destinations that are subject to LoadBalancerSourceRanges\" ; }",
        );
        self.ensure_chain("firewall-check");
        self.rule(
            "firewall-check",
            "ip daddr . meta l4proto . th dport vmap @firewall-ips",
        );

        self.cmd(
            "add",
            "map",
            "service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment \
             \"ClusterIP, ExternalIP and LoadBalancer IP traffic\" ; }",
        );
        self.cmd(
            "add",
            "map",
            "service-nodeports { type inet_proto . inet_service : verdict ; comment \"NodePort \
             traffic\" ; }",
        );
        self.rule(
            "services",
            "ip daddr . meta l4proto . th dport vmap @service-ips",
        );
        let nodeport_dst = if every_address {
            "fib daddr type local ip daddr != 127.0.0.0/8"
        } else {
            "ip daddr @nodeport-ips"
        };
        self.rule(
            "services",
            &format!("{nodeport_dst} meta l4proto . th dport vmap @service-nodeports"),
        );
    }

    /// One Service port's chains, sets and map elements, in `syncProxyRules`' order.
    fn add_service(&mut self, proxy: &Proxy, service: &Service) {
        let name = service.service_port_name();
        let proto = service.protocol;
        let (cluster_ip, port) = (service.cluster_ip, service.port);
        let endpoints = service.sorted_endpoints();
        let svc_chain = service_chain(service);
        let ext_chain = external_chain(service);
        let has_endpoints = !endpoints.is_empty();

        for endpoint in &endpoints {
            self.ensure_chain(&endpoint_chain(service, *endpoint));
        }
        if has_endpoints {
            self.ensure_chain(&svc_chain);
            if service.node_port.is_some() {
                self.ensure_chain(&ext_chain);
            }
        }

        self.element("cluster-ips", &cluster_ip.to_string());
        if has_endpoints {
            self.element(
                "service-ips",
                &format!("{cluster_ip} . {proto} . {port} : goto {svc_chain}"),
            );
        } else {
            self.element(
                "no-endpoint-services",
                &format!("{cluster_ip} . {proto} . {port} comment \"{name}\" : goto reject-chain"),
            );
        }
        if let Some(node_port) = service.node_port {
            if has_endpoints {
                self.element(
                    "service-nodeports",
                    &format!("{proto} . {node_port} : goto {ext_chain}"),
                );
            } else {
                self.element(
                    "no-endpoint-nodeports",
                    &format!("{proto} . {node_port} comment \"{name}\" : goto reject-chain"),
                );
            }
        }
        if has_endpoints {
            self.add_service_rules(proxy, service, &endpoints);
        }
    }

    /// The chains of a Service port that has endpoints.
    fn add_service_rules(&mut self, proxy: &Proxy, service: &Service, endpoints: &[SocketAddrV4]) {
        let proto = service.protocol;
        let svc_chain = service_chain(service);
        let ext_chain = external_chain(service);
        self.rule(
            &svc_chain,
            &format!(
                "ip daddr {} ip saddr != {} jump mark-for-masquerade",
                service.cluster_ip, proxy.cluster_cidr
            ),
        );
        if service.node_port.is_some() {
            self.rule(&ext_chain, "jump mark-for-masquerade");
            self.rule(&ext_chain, &format!("goto {svc_chain}"));
        }
        if let Some(timeout) = service.affinity_timeout {
            for endpoint in endpoints {
                self.cmd(
                    "add",
                    "set",
                    &format!(
                        "{} {{ type ipv4_addr ; flags dynamic,timeout ; timeout {timeout}s ; }}",
                        affinity_set(service, *endpoint)
                    ),
                );
            }
        }

        // writeServiceToEndpointRules: affinity first, then one numgen map over the endpoints.
        if service.affinity_timeout.is_some() {
            for endpoint in endpoints {
                self.rule(
                    &svc_chain,
                    &format!(
                        "ip saddr @{} goto {}",
                        affinity_set(service, *endpoint),
                        endpoint_chain(service, *endpoint)
                    ),
                );
            }
        }
        let targets: Vec<String> = endpoints
            .iter()
            .enumerate()
            .map(|(i, endpoint)| format!("{i} : goto {}", endpoint_chain(service, *endpoint)))
            .collect();
        self.rule(
            &svc_chain,
            &format!(
                "numgen random mod {} vmap {{ {} }}",
                endpoints.len(),
                targets.join(" , ")
            ),
        );

        for endpoint in endpoints {
            let chain = endpoint_chain(service, *endpoint);
            self.rule(
                &chain,
                &format!("ip saddr {} jump mark-for-masquerade", endpoint.ip()),
            );
            if service.affinity_timeout.is_some() {
                self.rule(
                    &chain,
                    &format!(
                        "update @{} {{ ip saddr }}",
                        affinity_set(service, *endpoint)
                    ),
                );
            }
            self.rule(&chain, &format!("meta l4proto {proto} dnat to {endpoint}"));
        }
    }
}

#[cfg(test)]
mod tests {
    //! Names and the transaction against upstream's `TestOverallNFTablesRules` (no root); the
    //! table as the kernel reads it back, and its removal (root).

    use super::*;
    use crate::{
        ThreadNetNs,
        kube_proxy::{
            Mode, apply, read_sysctl, remove, ruleset,
            tests::{ENDPOINT_IP, reference_proxy, svc3, svc4, svc5, svc6},
        },
        require_root,
    };

    /// Upstream's `baseRules` (less the unallocated-ClusterIP drop, which needs a known
    /// ServiceCIDR) and its lines for svc3 (ClusterIP 172.30.0.43:80, NodePort 3003, endpoint
    /// 10.180.0.3:80, node IP 192.168.0.2), with the mark its fake proxier sets directly
    /// ("0x4000").
    const REFERENCE_SVC3: &str = r#"
        add table ip kube-proxy { comment "rules for kube-proxy" ; }
        add set ip kube-proxy cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }
        add set ip kube-proxy nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }
        add map ip kube-proxy firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
        add map ip kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }
        add map ip kube-proxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }
        add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }
        add map ip kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }
        add chain ip kube-proxy cluster-ips-check
        add chain ip kube-proxy filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }
        add chain ip kube-proxy filter-output-pre-dnat { type filter hook output priority -110 ; }
        add chain ip kube-proxy filter-forward { type filter hook forward priority 0 ; }
        add chain ip kube-proxy filter-input { type filter hook input priority 0 ; }
        add chain ip kube-proxy filter-output { type filter hook output priority 0 ; }
        add chain ip kube-proxy firewall-check
        add chain ip kube-proxy mark-for-masquerade
        add chain ip kube-proxy masquerading
        add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
        add chain ip kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }
        add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
        add chain ip kube-proxy nodeport-endpoints-check
        add chain ip kube-proxy reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }
        add chain ip kube-proxy services
        add chain ip kube-proxy service-endpoints-check
        add rule ip kube-proxy cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
        add rule ip kube-proxy filter-prerouting-pre-dnat ct state new jump firewall-check
        add rule ip kube-proxy filter-forward ct state new jump service-endpoints-check
        add rule ip kube-proxy filter-forward ct state new jump cluster-ips-check
        add rule ip kube-proxy filter-input ct state new jump nodeport-endpoints-check
        add rule ip kube-proxy filter-input ct state new jump service-endpoints-check
        add rule ip kube-proxy filter-output ct state new jump service-endpoints-check
        add rule ip kube-proxy filter-output-pre-dnat ct state new jump firewall-check
        add rule ip kube-proxy filter-output ct state new jump cluster-ips-check
        add rule ip kube-proxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips
        add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000
        add rule ip kube-proxy masquerading mark and 0x4000 == 0 return
        add rule ip kube-proxy masquerading mark set mark xor 0x4000
        add rule ip kube-proxy masquerading masquerade fully-random
        add rule ip kube-proxy nat-output jump services
        add rule ip kube-proxy nat-postrouting jump masquerading
        add rule ip kube-proxy nat-prerouting jump services
        add rule ip kube-proxy nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
        add rule ip kube-proxy reject-chain reject
        add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
        add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
        add element ip kube-proxy nodeport-ips { 192.168.0.2 }
        add rule ip kube-proxy service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services

        add chain ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80
        add rule ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80 ip daddr 172.30.0.43 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
        add rule ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80 }
        add chain ip kube-proxy external-4AT6LBPK-ns3/svc3/tcp/p80
        add rule ip kube-proxy external-4AT6LBPK-ns3/svc3/tcp/p80 jump mark-for-masquerade
        add rule ip kube-proxy external-4AT6LBPK-ns3/svc3/tcp/p80 goto service-4AT6LBPK-ns3/svc3/tcp/p80
        add chain ip kube-proxy endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80
        add rule ip kube-proxy endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80 ip saddr 10.180.0.3 jump mark-for-masquerade
        add rule ip kube-proxy endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80 meta l4proto tcp dnat to 10.180.0.3:80
        add element ip kube-proxy cluster-ips { 172.30.0.43 }
        add element ip kube-proxy service-ips { 172.30.0.43 . tcp . 80 : goto service-4AT6LBPK-ns3/svc3/tcp/p80 }
        add element ip kube-proxy service-nodeports { tcp . 3003 : goto external-4AT6LBPK-ns3/svc3/tcp/p80 }
    "#;

    /// Upstream's lines for svc4 (two endpoints), svc5 (ClientIP affinity, NodePort 3002) and
    /// svc6 (no endpoints), less their external and load-balancer IPs.
    const REFERENCE_OTHERS: &str = r#"
        add rule ip kube-proxy service-LAUZTJTB-ns4/svc4/tcp/p80 ip daddr 172.30.0.44 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
        add rule ip kube-proxy service-LAUZTJTB-ns4/svc4/tcp/p80 numgen random mod 2 vmap { 0 : goto endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80 , 1 : goto endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80 }
        add rule ip kube-proxy endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80 meta l4proto tcp dnat to 10.180.0.5:80
        add element ip kube-proxy service-ips { 172.30.0.44 . tcp . 80 : goto service-LAUZTJTB-ns4/svc4/tcp/p80 }

        add set ip kube-proxy affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }
        add rule ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80 ip saddr @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80
        add rule ip kube-proxy service-HVFWP5L3-ns5/svc5/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 }
        add rule ip kube-proxy external-HVFWP5L3-ns5/svc5/tcp/p80 goto service-HVFWP5L3-ns5/svc5/tcp/p80
        add rule ip kube-proxy endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 update @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { ip saddr }
        add element ip kube-proxy service-nodeports { tcp . 3002 : goto external-HVFWP5L3-ns5/svc5/tcp/p80 }

        add element ip kube-proxy cluster-ips { 172.30.0.46 }
        add element ip kube-proxy no-endpoint-services { 172.30.0.46 . tcp . 80 comment "ns6/svc6:p80" : goto reject-chain }
    "#;

    #[test]
    fn chain_and_set_names_are_kube_proxys() {
        let endpoint = SocketAddrV4::new(ENDPOINT_IP, 80);
        assert_eq!(service_chain(&svc3()), "service-4AT6LBPK-ns3/svc3/tcp/p80");
        assert_eq!(
            external_chain(&svc3()),
            "external-4AT6LBPK-ns3/svc3/tcp/p80"
        );
        assert_eq!(
            endpoint_chain(&svc3(), endpoint),
            "endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80"
        );
        assert_eq!(
            affinity_set(&svc5(), endpoint),
            "affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80"
        );
        let long = "x".repeat(NAME_BASE_MAX);
        let truncated = hash_and_truncate(&long);
        assert_eq!(truncated.len(), NAME_BASE_MAX);
        assert!(truncated.ends_with("xx..."), "{truncated}");
    }

    /// Assert that `text`, with upstream's fake mark, has every line of `reference`.
    fn assert_has_reference_lines(text: &str, reference: &str) {
        let as_fake_writes = text.replace(MASQUERADE_MARK, "0x4000");
        for line in reference.lines().map(str::trim).filter(|l| !l.is_empty()) {
            assert!(
                as_fake_writes.lines().any(|l| l == line),
                "missing {line}:\n{text}"
            );
        }
    }

    #[test]
    fn ruleset_of_the_reference_service_has_every_reference_line() {
        let text = ruleset(Mode::Nftables, &reference_proxy(), &[svc3()]);
        assert!(text.contains(&format!("mark set mark or {MASQUERADE_MARK}")));
        assert_has_reference_lines(&text, REFERENCE_SVC3);
        // This version handles no conntrack-invalid packets (only iptables mode drops them).
        assert!(!text.contains("ct state invalid"), "{text}");
    }

    #[test]
    fn ruleset_of_the_other_reference_services_has_their_lines() {
        let services = [svc3(), svc4(), svc5(), svc6()];
        let text = ruleset(Mode::Nftables, &reference_proxy(), &services);
        assert_has_reference_lines(&text, REFERENCE_SVC3);
        assert_has_reference_lines(&text, REFERENCE_OTHERS);
    }

    #[test]
    fn a_nodeport_without_endpoints_is_rejected_and_every_address_takes_nodeports() {
        let service = Service {
            node_port: Some(3006),
            ..svc6()
        };
        let every_address = Proxy {
            node_ips: Vec::new(),
            ..reference_proxy()
        };
        let text = ruleset(
            Mode::Nftables,
            &every_address,
            std::slice::from_ref(&service),
        );
        for line in [
            "add element ip kube-proxy no-endpoint-nodeports { tcp . 3006 comment \"ns6/svc6:p80\" : goto reject-chain }",
            "delete set ip kube-proxy nodeport-ips",
            "add rule ip kube-proxy nodeport-endpoints-check ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports",
            "add rule ip kube-proxy services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
        assert!(!text.contains(&service_chain(&service)), "{text}");
    }

    /// `nft list table ip kube-proxy`, or None if there is none.
    fn list() -> Option<String> {
        let out = Command::new("nft")
            .args(["list", "table", "ip", "kube-proxy"])
            .output()
            .unwrap_or_else(|e| panic!("cannot start nft: {e}"));
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    #[test]
    fn applied_table_reads_back_and_remove_deletes_it() {
        require_root();
        let _node = ThreadNetNs::new();
        apply(
            Mode::Nftables,
            &reference_proxy(),
            &[svc3(), svc5(), svc6()],
        );
        let table = list().expect("table ip kube-proxy after apply");
        for line in [
            "chain filter-prerouting-pre-dnat {",
            "type filter hook prerouting priority dstnat - 10; policy accept;",
            "type filter hook forward priority filter; policy accept;",
            "chain service-4AT6LBPK-ns3/svc3/tcp/p80 {",
            "numgen random mod 1 vmap { 0 : goto endpoint-UEIP74TE-ns3/svc3/tcp/p80__10.180.0.3/80 }",
            "meta l4proto tcp dnat to 10.180.0.3:80",
            "tcp . 3003 : goto external-4AT6LBPK-ns3/svc3/tcp/p80",
            "172.30.0.46 . tcp . 80 comment \"ns6/svc6:p80\" : goto reject-chain",
            "set affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 {",
            "flags dynamic,timeout",
            "timeout 3h",
            "meta mark set meta mark | 0x00004000",
            "masquerade fully-random",
        ] {
            assert!(table.contains(line), "the table lacks {line}:\n{table}");
        }
        assert_eq!(
            read_sysctl("net/netfilter/nf_conntrack_tcp_timeout_close_wait"),
            "3600"
        );

        remove(Mode::Nftables);
        remove(Mode::Nftables);
        assert_eq!(list(), None);

        let every_address = Proxy {
            node_ips: Vec::new(),
            ..reference_proxy()
        };
        apply(Mode::Nftables, &every_address, &[svc3()]);
        let table = list().expect("table ip kube-proxy after apply");
        assert!(!table.contains("nodeport-ips"), "{table}");
        assert!(table.contains("fib daddr type local"), "{table}");
        remove(Mode::Nftables);
        assert_eq!(list(), None);
    }
}
