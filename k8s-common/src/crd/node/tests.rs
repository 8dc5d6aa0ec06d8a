//! Round-trips of hand-written `CiliumNode` documents (spec §1.7 and the CRD schema): decode,
//! encode, and compare as JSON values with the input.

use serde_json::{Value, json};

use super::*;
use crate::crd::ipam::IpamPoolAllocation;

fn round_trip(doc: &Value) -> CiliumNode {
    let node: CiliumNode = serde_json::from_value(doc.clone()).expect("decodes");
    assert_eq!(&serde_json::to_value(&node).expect("encodes"), doc);
    node
}

#[test]
fn crd_mode_node_round_trips() {
    let doc = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNode",
        "metadata": {
            "name": "node-a",
            "labels": {"kubernetes.io/hostname": "node-a"},
            "resourceVersion": "4711",
            "uid": "0b0f5c1e-7f43-4c33-9e33-6d3f1d2a8b11",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "u1"}
            ],
            "creationTimestamp": "2026-03-01T10:00:00Z",
            "managedFields": [{"manager": "cilium-agent", "operation": "Update"}]
        },
        "spec": {
            "instance-id": "i-0abc",
            "bootid": "4c7d3a5e",
            "addresses": [
                {"type": "InternalIP", "ip": "192.168.1.10"},
                {"type": "CiliumInternalIP", "ip": "10.1.1.1"}
            ],
            "health": {"ipv4": "10.1.1.2"},
            "ingress": {},
            "encryption": {},
            "eni": {},
            "azure": {},
            "alibaba-cloud": {},
            "ipam": {
                "pool": {
                    "10.1.1.226": {"owner": "default/pod-a", "resource": "eni-1"},
                    "10.1.1.227": {"resource": "eni-1"},
                    "10.1.1.229": {}
                },
                "pools": {},
                "min-allocate": 2,
                "pre-allocate": 8,
                "static-ip-tags": {"purpose": "egress"},
                "future-ipam-knob": {"x": [1, 2]}
            },
            "nodeidentity": 4242,
            "future-spec-field": "kept"
        },
        "status": {
            "eni": {},
            "azure": {},
            "alibaba-cloud": {},
            "ipam": {
                "used": {"10.1.1.226": {"owner": "default/pod-a", "resource": "eni-1"}},
                "operator-status": {},
                "release-ips": {
                    "10.1.1.229": "ready-for-release",
                    "10.1.1.230": "marked-for-release",
                    "10.1.1.231": "do-not-release",
                    "10.1.1.232": "released"
                },
                "assigned-static-ip": "3.3.3.3"
            }
        },
        "future-top-level": {"a": 1}
    });
    let node = round_trip(&doc);
    let ipam = node.ipam_spec();
    assert_eq!(ipam.pool.len(), 3);
    assert_eq!(ipam.pool["10.1.1.226"].owner, "default/pod-a");
    assert_eq!(
        (ipam.min_allocate, ipam.pre_allocate, ipam.max_allocate),
        (2, 8, 0)
    );
    assert!(ipam.extra.contains_key("future-ipam-knob"));
    assert!(node.spec.extra.contains_key("future-spec-field"));
    assert!(node.extra.contains_key("future-top-level"));
    assert!(node.metadata.extra.contains_key("managedFields"));
    assert_eq!(
        node.ipam_status().release_ips["10.1.1.229"],
        ReleaseState::ReadyForRelease
    );
    assert_eq!(
        node.ipam_status().release_ips["10.1.1.232"],
        ReleaseState::Released
    );
}

#[test]
fn multi_pool_node_round_trips() {
    // Spec §1.7's multi-pool example, plus a podCIDR written with host bits.
    let doc = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNode",
        "metadata": {"name": "node-b"},
        "spec": {"ipam": {
            "podCIDRs": ["10.0.22.7/24", "fd00:22::/96"],
            "pools": {
                "requested": [{"pool": "default", "needed": {"ipv4-addrs": 16, "ipv6-addrs": 16}}],
                "allocated": [
                    {"pool": "default", "cidrs": ["10.0.22.0/24", "fd00:22::/96"]},
                    {"pool": "mars", "allowLastIP": true,
                        "cidrs": ["10.0.11.0/27", "fd00:11::/123"]}
                ]
            }
        }}
    });
    let node = round_trip(&doc);
    let pools = node.ipam_spec().pools();
    assert_eq!(pools.requested[0].needed.ipv4_addrs, 16);
    assert_eq!(
        pools.allocated[1],
        IpamPoolAllocation {
            pool: "mars".into(),
            allow_first_ip: false,
            allow_last_ip: true,
            cidrs: vec![
                "10.0.11.0/27".parse().expect("cidr"),
                "fd00:11::/123".parse().expect("cidr")
            ],
        }
    );
    assert_eq!(node.ipam_spec().pod_cidrs[0].to_string(), "10.0.22.7/24");
    assert!(node.status.is_none());
}

#[test]
fn eni_node_round_trips() {
    let doc = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNode",
        "metadata": {"name": "ip-192-168-1-10.ec2.internal"},
        "spec": {
            "instance-id": "i-0abc",
            "eni": {
                "instance-type": "m5.large",
                "first-interface-index": 0,
                "security-group-tags": {"team": "net"},
                "subnet-ids": ["subnet-1", "subnet-2"],
                "node-subnet-id": "subnet-1",
                "vpc-id": "vpc-1",
                "availability-zone": "us-east-1a",
                "exclude-interface-tags": {"cilium.io/no-pods": "true"},
                "delete-on-termination": true,
                "use-primary-address": false,
                "disable-prefix-delegation": false,
                "min-allocate": 3
            },
            "ipam": {"pools": {"allocated": [{"pool": "default", "allowFirstIP": true,
                "allowLastIP": true, "cidrs": ["192.168.1.11/32", "192.168.2.16/28"]}]},
                "pre-allocate": 8}
        },
        "status": {"eni": {"enis": {
            "eni-1": {
                "id": "eni-1", "ip": "192.168.1.10", "mac": "0a:00:00:00:00:01",
                "availability-zone": "us-east-1a", "description": "primary",
                "subnet": {"id": "subnet-1", "cidr": "192.168.1.0/24"},
                "vpc": {"id": "vpc-1", "primary-cidr": "192.168.0.0/16",
                    "cidrs": ["100.64.0.0/16"]},
                "addresses": ["192.168.1.11", "192.168.1.12"],
                "security-groups": ["sg-1"],
                "tags": {"team": "net"},
                "public-ip": "3.3.3.3"
            },
            "eni-2": {
                "id": "eni-2", "ip": "192.168.2.10", "mac": "0a:00:00:00:00:02", "number": 1,
                "subnet": {"id": "subnet-2", "cidr": "192.168.2.0/24"},
                "vpc": {"id": "vpc-1", "primary-cidr": "192.168.0.0/16"},
                "addresses": ["192.168.2.16", "192.168.2.17"],
                "prefixes": ["192.168.2.16/28"],
                "ipv6-prefixes": ["2600:1f18::/80"],
                "future-eni-field": 1
            }
        }}}
    });
    let node = round_trip(&doc);
    let spec = node.spec.eni.as_ref().expect("spec.eni");
    assert_eq!(spec.first_interface_index, Some(0));
    assert!(
        spec.extra.contains_key("min-allocate"),
        "A's obsolete fields survive"
    );
    let enis = &node
        .status
        .as_ref()
        .and_then(|s| s.eni.as_ref())
        .expect("status.eni")
        .enis;
    assert_eq!(enis["eni-2"].number, 1);
    assert_eq!(enis["eni-1"].number, 0);
    assert_eq!(enis["eni-1"].ip, Some("192.168.1.10".parse().expect("ip")));
}

#[test]
fn azure_node_round_trips() {
    let doc = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNode",
        "metadata": {"name": "aks-nodepool1-0"},
        "spec": {
            "instance-id": "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/vm0",
            "azure": {"interface-name": "eth0"},
            "ipam": {"pool": {"10.240.0.5": {"resource": "/subscriptions/s/nic0"}},
                "min-allocate": 10, "max-allocate": 30, "pre-allocate": 10}
        },
        "status": {"azure": {"interfaces": [
            {
                "id": "/subscriptions/s/nic0", "ip": "10.240.0.4", "name": "nic0",
                "mac": "00-0D-3A-00-00-01", "state": "succeeded",
                "addresses": [
                    {"ip": "10.240.0.5", "subnet": "/subscriptions/s/subnets/s1",
                        "state": "succeeded"},
                    {"ip": "10.240.0.6", "state": "creating"}
                ],
                "security-group": "/subscriptions/s/nsg",
                "subnet": {"id": "/subscriptions/s/subnets/s1", "cidr": "10.240.0.0/16"},
                "gateway": "10.240.0.1",
                "cidr": "10.240.0.0/16",
                "GatewayIP": "10.240.0.1"
            },
            {"id": "/subscriptions/s/nic1", "gateway": ""}
        ]}}
    });
    let node = round_trip(&doc);
    let status = node
        .status
        .as_ref()
        .and_then(|s| s.azure.as_ref())
        .expect("status.azure");
    let nic0 = &status.interfaces[0];
    assert_eq!(nic0.gateway, Some("10.240.0.1".parse().expect("ip")));
    assert_eq!(
        nic0.subnet_cidr(),
        Some("10.240.0.0/16".parse().expect("cidr"))
    );
    assert_eq!(
        nic0.addresses[0].addr(),
        Some("10.240.0.5".parse().expect("ip"))
    );
    assert_eq!(status.interfaces[1].gateway, None);
    assert_eq!(status.interfaces[1].subnet_cidr(), None);

    // Go writes `gateway` even when unset.
    let fresh = crate::crd::azure::AzureInterface::default();
    assert_eq!(
        serde_json::to_value(&fresh).expect("encodes"),
        json!({"gateway": ""})
    );
}

#[test]
fn fresh_node_is_minimal_and_accessors_create_sections() {
    let mut node = CiliumNode::new("n1");
    assert!(node.ipam_spec().pool.is_empty());
    assert!(node.ipam_status().used.is_empty());
    assert_eq!(
        serde_json::to_value(&node).expect("encodes"),
        json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": "n1"},
            "spec": {}})
    );
    node.ipam_spec_mut().pools_mut();
    node.ipam_status_mut()
        .release_ips
        .insert("10.0.0.1".into(), ReleaseState::DoNotRelease);
    assert_eq!(
        serde_json::to_value(&node).expect("encodes"),
        json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": "n1"},
            "spec": {"ipam": {"pools": {}}},
            "status": {"ipam": {"release-ips": {"10.0.0.1": "do-not-release"}}}})
    );
}

#[test]
fn typed_fields_reject_garbage() {
    let allocated = |cidr: &str| json!({"spec": {"ipam": {"pools": {"allocated": [{"pool": "p", "cidrs": [cidr]}]}}}});
    let bad_docs = [
        allocated("10.0.0.0/33"),
        allocated("not-a-cidr"),
        allocated("10.0.0.1"),
        json!({"spec": {"ipam": {"podCIDRs": ["10.0.0.0"]}}}),
        json!({"spec": {}, "status": {"eni": {"enis": {"e": {"addresses": ["10.0.0.300"]}}}}}),
        json!({"spec": {}, "status": {"eni": {"enis": {"e": {"prefixes": ["10.0.0.0"]}}}}}),
        json!({"spec": {}, "status": {"eni": {"enis": {"e": {"subnet": {"cidr": "x"}}}}}}),
        json!({"spec": {}, "status": {"azure": {"interfaces": [{"gateway": "10.0.0"}]}}}),
        json!({"spec": {}, "status": {"ipam": {"release-ips": {"10.0.0.1": "bogus"}}}}),
    ];
    for doc in bad_docs {
        let err = serde_json::from_value::<CiliumNode>(doc.clone()).expect_err("must fail");
        assert!(err.is_data(), "{doc}: {err}");
    }
    let err = serde_json::from_str::<CiliumNode>(
        r#"{"spec":{"ipam":{"pools":{"allocated":[{"pool":"p","cidrs":["10.0.0.0/33"]}]}}}}"#,
    )
    .expect_err("must fail");
    assert!(err.is_data(), "{err}");
    assert!(
        err.to_string().contains("invalid IP address syntax"),
        "{err}"
    );
}

#[test]
fn empty_text_addresses_decode_as_unset() {
    // Go's UnmarshalText accepts "" as the zero address; omitzero then drops it.
    let doc = json!({"spec": {}, "status": {"eni": {"enis": {"e": {"id": "e", "ip": "",
        "subnet": {"cidr": ""}}}}}});
    let node: CiliumNode = serde_json::from_value(doc).expect("decodes");
    let eni = &node
        .status
        .as_ref()
        .and_then(|s| s.eni.as_ref())
        .expect("eni")
        .enis["e"];
    assert_eq!(eni.ip, None);
    assert_eq!(eni.subnet.as_ref().and_then(|s| s.cidr), None);
}

#[test]
fn api_version_and_kind_are_the_type_meta_not_unmodelled_fields() {
    let node: CiliumNode = serde_json::from_value(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": "n1"},
        "spec": {}, "future": 1
    }))
    .expect("decodes");
    assert_eq!(node.types, TypeMeta::of::<CiliumNode>());
    assert_eq!(node.extra.keys().collect::<Vec<_>>(), ["future"]);
    let err = serde_json::from_value::<CiliumNode>(json!({"kind": 5, "spec": {}}))
        .expect_err("a kind that is not a string");
    assert!(
        err.to_string().contains("invalid type: integer `5`"),
        "{err}"
    );
    // An object read without them is written back without them.
    let bare: CiliumNode =
        serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {}})).expect("decodes");
    assert_eq!(
        serde_json::to_value(&bare).expect("encodes"),
        json!({"metadata": {"name": "n1"}, "spec": {}})
    );
}
