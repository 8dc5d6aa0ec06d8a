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
mod tests;
