//! The agent's scrape under Cilium's names: the names, types, labels and label values a
//! Cilium dashboard queries, the weft metrics kept beside the derived ones, and weft's names
//! where Cilium has no metric of the same meaning.

use super::{super::tests::filled_as, *};
use crate::metrics::Naming;

fn has(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "missing line {line:?} in:\n{text}"
    );
}

#[test]
fn cilium_naming_serves_ciliums_names_types_and_labels() {
    let text = filled_as(Naming::Cilium).encode().expect("encode");
    // IPAM: summed over pools, by family (pools default 30+30, mars 14; 3+3+1 used).
    has(&text, "# TYPE cilium_ipam_capacity gauge");
    has(&text, r#"cilium_ipam_capacity{family="ipv4"} 44"#);
    has(&text, r#"cilium_ipam_capacity{family="ipv6"} 30"#);
    has(&text, "# TYPE cilium_ip_addresses gauge");
    has(&text, r#"cilium_ip_addresses{family="ipv4"} 4"#);
    has(&text, r#"cilium_ip_addresses{family="ipv6"} 3"#);
    has(&text, "# TYPE cilium_ipam_events_total counter");
    has(
        &text,
        r#"cilium_ipam_events_total{action="allocate",family="ipv4"} 1"#,
    );
    has(
        &text,
        r#"cilium_ipam_events_total{action="allocate",family="ipv6"} 1"#,
    );
    has(
        &text,
        r#"cilium_ipam_events_total{action="release",family="ipv4"} 1"#,
    );
    // Datapath: drops by Cilium's reason text and direction, everything else forwarded.
    has(&text, "# TYPE cilium_drop_count_total counter");
    has(
        &text,
        r#"cilium_drop_count_total{reason="Invalid source ip",direction="EGRESS"} 5"#,
    );
    has(
        &text,
        r#"cilium_drop_bytes_total{reason="Invalid source ip",direction="EGRESS"} 490"#,
    );
    has(&text, "# TYPE cilium_forward_count_total counter");
    has(
        &text,
        r#"cilium_forward_count_total{direction="EGRESS"} 10"#,
    );
    has(
        &text,
        r#"cilium_forward_bytes_total{direction="EGRESS"} 980"#,
    );
    // Endpoints.
    has(&text, "# TYPE cilium_endpoint_state gauge");
    has(&text, r#"cilium_endpoint_state{endpoint_state="ready"} 2"#);
    has(
        &text,
        r#"cilium_endpoint_state{endpoint_state="creating"} 1"#,
    );
    has(&text, "cilium_endpoint 3");
    has(&text, "# TYPE cilium_process_cpu_seconds_total counter");
    has(&text, "# TYPE cilium_process_resident_memory_bytes gauge");
    // Kept beside (per pool, per verdict), and weft's own where Cilium has no equivalent.
    has(
        &text,
        r#"weft_ipam_pool_used_ips{pool="default",family="ipv6"} 3"#,
    );
    has(
        &text,
        r#"weft_datapath_packets_total{reason="redirect_local",verdict="redirected"} 10"#,
    );
    has(&text, r#"weft_ipam_available_ips{target_node="node1"} 67"#);
    has(
        &text,
        "# TYPE weft_ipam_allocation_duration_seconds histogram",
    );
    assert!(!text.contains("cilium_operator_"), "{text}");
}

#[test]
fn weft_naming_serves_no_cilium_name() {
    let text = filled_as(Naming::Weft).encode().expect("encode");
    assert!(!text.contains("cilium_"), "{text}");
    has(&text, r#"weft_endpoints{state="ready"} 2"#);
}

#[test]
fn every_reason_has_a_direction_and_drops_keep_a_reason() {
    for why in 0..reason::COUNT {
        let name = reason::name(why);
        let direction = direction(name);
        assert!(
            ["EGRESS", "INGRESS", "UNKNOWN"].contains(&direction),
            "{name}: {direction}"
        );
        assert!(!drop_reason(name).is_empty(), "{name}");
    }
    assert_eq!(direction("netdev_to_pod"), "INGRESS");
    assert_eq!(direction("netdev_pass"), "UNKNOWN");
    assert_eq!(
        drop_reason("drop_nat_no_port"),
        "No mapping for NAT masquerade"
    );
    assert_eq!(drop_reason("drop_redirect_failed"), "drop_redirect_failed");
}
