//! Autodetection from the VPC (eni) and the subnet (azure), and Cilium's texts when a
//! configured CIDR does not fit.

use serde_json::json;

use super::*;
use crate::crd::node::CiliumNode;

fn input(status: &serde_json::Value) -> NodeInput {
    let node: CiliumNode = serde_json::from_value(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": "n1"},
        "status": status,
    }))
    .expect("CiliumNode");
    NodeInput::from(&node)
}

fn eni_node() -> NodeInput {
    input(&json!({"eni": {"enis": {
        "eni-a": {"id": "eni-a", "vpc": {"id": "vpc-1"}},
        "eni-b": {"id": "eni-b", "vpc": {"id": "vpc-1", "primary-cidr": "10.6.3.4/16",
                                          "cidrs": ["100.64.0.0/16"]}},
    }}}))
}

fn azure_node() -> NodeInput {
    input(&json!({"azure": {"interfaces": [
        {"id": "nic-0", "gateway": ""},
        {"id": "nic-1", "gateway": "", "cidr": "10.9.0.7/24"},
    ]}}))
}

fn net(text: &str) -> Ipv4Net {
    text.parse().expect("CIDR")
}

#[test]
fn unset_is_detected_from_the_vpc_or_the_subnet() {
    assert_eq!(
        ipv4(IpamMode::Eni, None, &eni_node()),
        (NativeRouting::Detected(net("10.6.0.0/16")), None),
        "the first ENI with a primary CIDR, masked"
    );
    assert_eq!(
        ipv4(IpamMode::Azure, None, &azure_node()),
        (NativeRouting::Detected(net("10.9.0.0/24")), None),
        "the legacy cidr when subnet.cidr is missing, masked"
    );
    assert_eq!(
        ipv4(IpamMode::Eni, None, &NodeInput::default()),
        (NativeRouting::None, None),
        "nothing reported yet"
    );
    assert_eq!(
        ipv4(IpamMode::MultiPool, None, &eni_node()),
        (NativeRouting::None, None),
        "other modes detect nothing"
    );
}

#[test]
fn a_configured_cidr_wins_and_must_fit_with_cilium_s_text() {
    let fits = net("10.0.0.0/8");
    assert_eq!(
        ipv4(IpamMode::Eni, Some(fits), &eni_node()),
        (NativeRouting::Configured(fits), None)
    );
    let narrow = net("10.6.1.0/24");
    let (routing, error) = ipv4(IpamMode::Eni, Some(narrow), &eni_node());
    assert_eq!(
        routing,
        NativeRouting::Configured(narrow),
        "it stays in force"
    );
    let text = error.expect("does not contain the VPC").to_string();
    assert!(
        text.starts_with("Configured native routing CIDR does not contain VPC CIDR"),
        "{text}"
    );
    assert!(
        text.contains("10.6.1.0/24") && text.contains("10.6.0.0/16"),
        "{text}"
    );

    // Azure: the subnet and the configured CIDR must make one range: one holds the other,
    // or they are the two halves of one prefix.
    for ok in ["10.9.0.0/16", "10.9.0.0/25", "10.9.1.0/24"] {
        assert_eq!(
            ipv4(IpamMode::Azure, Some(net(ok)), &azure_node()).1,
            None,
            "{ok}"
        );
    }
    let apart = net("10.9.2.0/24");
    let (routing, error) = ipv4(IpamMode::Azure, Some(apart), &azure_node());
    assert_eq!(routing, NativeRouting::Configured(apart));
    let text = error.expect("does not coalesce").to_string();
    assert!(
        text.starts_with("None of the VPC CIDRs contains the specified native routing CIDR"),
        "{text}"
    );
    // Nothing reported yet: the configured CIDR, unchecked.
    assert_eq!(
        ipv4(IpamMode::Eni, Some(narrow), &NodeInput::default()),
        (NativeRouting::Configured(narrow), None)
    );
}
