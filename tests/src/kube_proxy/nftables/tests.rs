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
