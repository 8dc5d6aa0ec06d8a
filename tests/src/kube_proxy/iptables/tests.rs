//! Names and rule text against upstream's `TestOverallIPTablesRules` (no root); the rules
//! as the kernel reads them back, their removal, and a localhost NodePort (root).

use std::net::{Ipv4Addr, TcpStream};

use super::*;
use crate::{
    ThreadNetNs,
    kube_proxy::{
        Mode, apply, remove, ruleset,
        tests::{
            Backend, ENDPOINT_IP, NODE_IP, reference_proxy, round_trip, svc3, svc4, svc5, svc6,
        },
    },
    require_root,
};

/// Upstream's reference output for svc3 (ClusterIP 172.30.0.43:80, NodePort 3003, endpoint
/// 10.180.0.3:80) and the fixed chains, as its fake proxier writes them: mark "0x4000" (set
/// directly, not formatted) and no `--random-fully` (its fake iptables lacks it).
const REFERENCE_SVC3: &str = r#"
    :KUBE-EXT-X27LE4BHSL4DOUIK - [0:0]
    :KUBE-SEP-OYPFS5VJICHGATKP - [0:0]
    :KUBE-SVC-X27LE4BHSL4DOUIK - [0:0]
    -A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
    -A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
    -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    -A KUBE-NODEPORTS -m comment --comment ns3/svc3:p80 -m tcp -p tcp -d 127.0.0.0/8 --dport 3003 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j KUBE-EXT-X27LE4BHSL4DOUIK
    -A KUBE-NODEPORTS -m comment --comment ns3/svc3:p80 -m tcp -p tcp --dport 3003 -j KUBE-EXT-X27LE4BHSL4DOUIK
    -A KUBE-SERVICES -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j KUBE-SVC-X27LE4BHSL4DOUIK
    -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
    -A KUBE-EXT-X27LE4BHSL4DOUIK -m comment --comment "masquerade traffic for ns3/svc3:p80 external destinations" -j KUBE-MARK-MASQ
    -A KUBE-EXT-X27LE4BHSL4DOUIK -j KUBE-SVC-X27LE4BHSL4DOUIK
    -A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
    -A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
    -A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
    -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
    -A KUBE-SEP-OYPFS5VJICHGATKP -m comment --comment ns3/svc3:p80 -s 10.180.0.3 -j KUBE-MARK-MASQ
    -A KUBE-SEP-OYPFS5VJICHGATKP -m comment --comment ns3/svc3:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80
    -A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
    -A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment "ns3/svc3:p80 -> 10.180.0.3:80" -j KUBE-SEP-OYPFS5VJICHGATKP
"#;

/// Upstream's lines for svc4 (two endpoints), svc5 (ClientIP affinity, NodePort 3002) and
/// svc6 (no endpoints), less their external and load-balancer IPs.
const REFERENCE_OTHERS: &str = r#"
    :KUBE-SEP-C6EBXVWJJZMIWKLZ - [0:0]
    -A KUBE-SERVICES -m comment --comment "ns6/svc6:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.46 --dport 80 -j REJECT
    -A KUBE-NODEPORTS -m comment --comment ns5/svc5:p80 -m tcp -p tcp --dport 3002 -j KUBE-EXT-NUKIZ6OKUXPJNT4C
    -A KUBE-SEP-UKSFD7AGPMPPLUHC -m comment --comment ns4/svc4:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.4:80
    -A KUBE-SEP-I77PXRDZVX7PMWMN -m comment --comment ns5/svc5:p80 -m recent --name KUBE-SEP-I77PXRDZVX7PMWMN --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80
    -A KUBE-SVC-4SW47YFZTEDKD3PK -m comment --comment "ns4/svc4:p80 -> 10.180.0.4:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-UKSFD7AGPMPPLUHC
    -A KUBE-SVC-4SW47YFZTEDKD3PK -m comment --comment "ns4/svc4:p80 -> 10.180.0.5:80" -j KUBE-SEP-C6EBXVWJJZMIWKLZ
    -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 -> 10.180.0.3:80" -m recent --name KUBE-SEP-I77PXRDZVX7PMWMN --rcheck --seconds 10800 --reap -j KUBE-SEP-I77PXRDZVX7PMWMN
    -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 -> 10.180.0.3:80" -j KUBE-SEP-I77PXRDZVX7PMWMN
"#;

/// Assert that `text`, written the way upstream's fake writes it, has every line of
/// `reference`.
fn assert_has_reference_lines(text: &str, reference: &str) {
    let as_fake_writes = text
        .replace(MASQUERADE_MARK, "0x4000")
        .replace(" --random-fully", "");
    for line in reference.lines().map(str::trim).filter(|l| !l.is_empty()) {
        assert!(
            as_fake_writes.lines().any(|l| l == line),
            "missing {line}:\n{text}"
        );
    }
}

#[test]
fn chain_names_are_kube_proxys() {
    let endpoint = SocketAddrV4::new(ENDPOINT_IP, 80);
    assert_eq!(service_chain(&svc3()), "KUBE-SVC-X27LE4BHSL4DOUIK");
    assert_eq!(external_chain(&svc3()), "KUBE-EXT-X27LE4BHSL4DOUIK");
    assert_eq!(
        endpoint_chain(&svc3(), endpoint),
        "KUBE-SEP-OYPFS5VJICHGATKP"
    );
    assert_eq!(
        endpoint_chain(&svc5(), endpoint),
        "KUBE-SEP-I77PXRDZVX7PMWMN"
    );
}

#[test]
fn ruleset_of_the_reference_service_has_every_reference_line() {
    let text = ruleset(Mode::Iptables, &reference_proxy(), &[svc3()]);
    // Where real kube-proxy differs from upstream's fake, checked as it writes it.
    for line in [
        "-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000",
        "-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
    }
    assert_has_reference_lines(&text, REFERENCE_SVC3);
    // One restore: the filter table, then the nat table.
    let tables: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with('*') || *l == "COMMIT")
        .collect();
    assert_eq!(tables, ["*filter", "COMMIT", "*nat", "COMMIT"]);
}

#[test]
fn ruleset_of_the_other_reference_services_has_their_lines() {
    let services = [svc3(), svc4(), svc5(), svc6()];
    let text = ruleset(Mode::Iptables, &reference_proxy(), &services);
    assert_has_reference_lines(&text, REFERENCE_SVC3);
    assert_has_reference_lines(&text, REFERENCE_OTHERS);
}

#[test]
fn a_service_without_endpoints_is_rejected_and_gets_no_nat_chain() {
    let service = Service {
        node_port: Some(3006),
        ..svc6()
    };
    let text = ruleset(
        Mode::Iptables,
        &reference_proxy(),
        std::slice::from_ref(&service),
    );
    assert!(text.lines().any(|l| l
        == "-A KUBE-EXTERNAL-SERVICES -m comment --comment \"ns6/svc6:p80 has no endpoints\" \
            -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 3006 -j REJECT"));
    assert!(!text.contains(&service_chain(&service)), "{text}");
}

#[test]
fn each_endpoint_takes_its_share_and_large_clusters_lose_comments() {
    let three = Service {
        endpoints: (3..6)
            .map(|i| SocketAddrV4::new(Ipv4Addr::new(10, 180, 0, i), 80))
            .collect(),
        ..svc3()
    };
    let text = ruleset(Mode::Iptables, &reference_proxy(), &[three]);
    let shares: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("-A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment \"ns3/svc3:p80 -> ")
        })
        .map(|l| l.split(" -j ").next().unwrap_or_default())
        .map(|l| l.rsplit("--probability ").next().unwrap_or_default())
        .collect();
    assert_eq!(shares.len(), 3, "{text}");
    assert_eq!(shares[..2], ["0.3333333333", "0.5000000000"]);

    let large = Service {
        endpoints: (0..=u16::try_from(LARGE_CLUSTER_ENDPOINTS).expect("small"))
            .map(|i| SocketAddrV4::new(Ipv4Addr::new(10, 180, 0, 3), 10000 + i))
            .collect(),
        ..svc3()
    };
    let text = ruleset(Mode::Iptables, &reference_proxy(), &[large]);
    let sep = |l: &&str| l.starts_with("-A KUBE-SEP-");
    assert!(text.lines().filter(sep).all(|l| !l.contains("--comment")));
    assert!(text.contains("\"ns3/svc3:p80 cluster IP\""), "{text}");
}

/// `iptables-save -t <table>` in the calling thread's namespace.
fn save(table: &str) -> String {
    let out = run(Command::new("iptables-save").args(["-t", table]));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn applied_rules_read_back_and_remove_takes_them_away() {
    require_root();
    let _node = ThreadNetNs::new();
    let services = [svc3(), svc5(), svc6()];
    apply(Mode::Iptables, &reference_proxy(), &services);
    // A second full sync changes nothing: the jumps are ensured, not added.
    apply(Mode::Iptables, &reference_proxy(), &services);

    let (filter, nat) = (save("filter"), save("nat"));
    for line in [
        "-A KUBE-SERVICES -d 172.30.0.43/32 -p tcp -m comment --comment \"ns3/svc3:p80 cluster IP\" -m tcp --dport 80 -j KUBE-SVC-X27LE4BHSL4DOUIK",
        "-A KUBE-NODEPORTS -p tcp -m comment --comment \"ns3/svc3:p80\" -m tcp --dport 3003 -j KUBE-EXT-X27LE4BHSL4DOUIK",
        "-A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment \"ns3/svc3:p80 -> 10.180.0.3:80\" -j KUBE-SEP-OYPFS5VJICHGATKP",
        "-A KUBE-SEP-OYPFS5VJICHGATKP -p tcp -m comment --comment \"ns3/svc3:p80\" -m tcp -j DNAT --to-destination 10.180.0.3:80",
        "-A KUBE-SEP-I77PXRDZVX7PMWMN -p tcp -m comment --comment \"ns5/svc5:p80\" -m recent --set --name KUBE-SEP-I77PXRDZVX7PMWMN --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.180.0.3:80",
        "-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully",
        "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
    ] {
        assert!(nat.lines().any(|l| l == line), "nat lacks {line}:\n{nat}");
    }
    for line in [
        "-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP",
        "-A KUBE-SERVICES -d 172.30.0.46/32 -p tcp -m comment --comment \"ns6/svc6:p80 has no endpoints\" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable",
    ] {
        assert!(
            filter.lines().any(|l| l == line),
            "filter lacks {line}:\n{filter}"
        );
    }
    // Each jump once, the built-in chains holding them in reverse order of ensuring.
    let input: Vec<&str> = filter
        .lines()
        .filter(|l| l.starts_with("-A INPUT "))
        .collect();
    assert_eq!(
        input,
        [
            "-A INPUT -j KUBE-FIREWALL",
            "-A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL",
            "-A INPUT -m comment --comment \"kubernetes health check service ports\" -j KUBE-NODEPORTS",
            "-A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES",
        ]
    );
    assert_eq!(nat.matches("-A OUTPUT ").count(), 1, "{nat}");
    assert!(save("mangle").contains(":KUBE-PROXY-CANARY"));
    assert_eq!(read_sysctl(ROUTE_LOCALNET), "1");
    assert_eq!(
        read_sysctl("net/netfilter/nf_conntrack_tcp_timeout_established"),
        "86400"
    );

    remove(Mode::Iptables);
    remove(Mode::Iptables);
    for table in ["filter", "nat", "mangle"] {
        let left = save(table);
        assert!(
            !left.contains("KUBE-"),
            "{table} keeps kube-proxy's:\n{left}"
        );
    }
}

#[test]
fn a_localhost_nodeport_reaches_the_endpoint_masqueraded() {
    require_root();
    let _node = ThreadNetNs::new();
    let backend = Backend::new();
    let listener = backend.listen(80);
    apply(Mode::Iptables, &reference_proxy(), &[svc3()]);
    let localhost = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 3003);
    let (client_saw, server_saw) = round_trip(&listener, localhost)
        .unwrap_or_else(|e| panic!("localhost NodePort {localhost}: {e}"));
    assert_eq!(client_saw, localhost.into());
    assert_eq!(
        server_saw.ip(),
        NODE_IP,
        "not masqueraded to the node's address"
    );
    remove(Mode::Iptables);
    assert!(TcpStream::connect(localhost).is_err());
}
