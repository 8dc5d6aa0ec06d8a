use serde_json::json;

use super::*;

#[test]
fn reads_what_the_allocators_need() {
    let view = NodeView::from_json(&json!({
        "metadata": {"name": "n1", "annotations": {"ipam.cilium.io/ignore": "TRUE"}},
        "spec": {"ipam": {
            "podCIDRs": ["10.0.1.0/24"],
            "pools": {
                "requested": [{"pool": "default", "needed": {"ipv4-addrs": 40}}],
                "allocated": [{"pool": "default", "cidrs": ["10.10.0.0/28"], "allowLastIP": true}]
            }
        }},
        "status": {"ipam": {"used": {"10.0.1.5": {"owner": "a/b"}}, "operator-status": {"error": "x"}}}
    }));
    assert_eq!(view.name, "n1");
    assert!(view.ignored);
    assert_eq!(view.pod_cidrs, ["10.0.1.0/24"]);
    assert_eq!(view.requested[0].ipv4_addrs, 40);
    assert_eq!(view.requested[0].ipv6_addrs, 0);
    assert!(view.allocated[0].allow_last_ip);
    assert_eq!((view.used, view.operator_error.as_str()), (1, "x"));
    assert!(view.invalid.is_empty(), "{:?}", view.invalid);
}

#[test]
fn garbage_names_the_field() {
    for (ipam, field) in [
        (json!({"podCIDRs": "10.0.0.0/24"}), "spec.ipam.podCIDRs"),
        (json!({"podCIDRs": [7]}), "spec.ipam.podCIDRs[0]"),
        (
            json!({"pools": {"requested": [{"needed": {}}]}}),
            "spec.ipam.pools.requested[0].pool",
        ),
        (
            json!({"pools": {"requested": [{"pool": "a", "needed": {"ipv4-addrs": -1}}]}}),
            "spec.ipam.pools.requested[0].needed.ipv4-addrs",
        ),
        (
            json!({"pools": {"allocated": [{"pool": "a", "cidrs": [{}]}]}}),
            "spec.ipam.pools.allocated[0].cidrs[0]",
        ),
    ] {
        let view = NodeView::from_json(&json!({"metadata": {"name": "n"}, "spec": {"ipam": ipam}}));
        assert_eq!(
            view.invalid.first().map(|e| e.path.as_str()),
            Some(field),
            "{ipam}"
        );
        assert!(view.invalid_text().expect("text").starts_with(field));
    }
    assert!(
        !NodeView::from_json(
            &json!({"metadata": {"name": "n", "annotations": {"ipam.cilium.io/ignore": "yes"}}})
        )
        .ignored
    );
}

#[test]
fn every_bad_field_is_reported_and_the_good_parts_are_kept() {
    let view = NodeView::from_json(&json!({
        "metadata": {"name": "n"},
        "spec": {"ipam": {
            "podCIDRs": "10.0.0.0/24",
            "pools": {
                "requested": [{"pool": "a", "needed": {"ipv4-addrs": 3}}, {"needed": {}}],
                "allocated": [{"pool": "a", "cidrs": ["banana"]}, {"pool": "b", "cidrs": ["10.1.0.0/28"]}]
            }
        }}
    }));
    let paths: Vec<&str> = view.invalid.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.ipam.podCIDRs",
            "spec.ipam.pools.requested[1].pool",
            "spec.ipam.pools.allocated[0].cidrs[0]"
        ]
    );
    assert_eq!(view.requested.len(), 1);
    assert_eq!(view.allocated.len(), 1);
    assert_eq!(view.allocated[0].cidrs, ["10.1.0.0/28"]);
    let text = view.invalid_text().expect("text");
    assert!(
        text.starts_with("spec.ipam.podCIDRs: invalid type"),
        "{text}"
    );
    assert!(
        text.contains("; spec.ipam.pools.requested[1].pool: missing; name the CiliumPodIPPool"),
        "{text}"
    );
}

#[test]
fn cloud_parts_read_typed_through_the_same_reader() {
    use weft_k8s::crd::azure::AzureSpec;
    let doc = json!({
        "metadata": {"name": "n"},
        "spec": {"azure": {"interface-name": "eth1"}, "ipam": {"pre-allocate": -1, "min-allocate": "x"}}
    });
    let mut read = NodeRead::new(&doc);
    let azure: Option<AzureSpec> = read.try_part(&["spec", "azure"]);
    assert!(azure.is_some());
    assert_eq!(read.part::<i64>(&["spec", "ipam", "pre-allocate"]), -1);
    assert_eq!(read.part::<i64>(&["spec", "ipam", "min-allocate"]), 0);
    assert_eq!(read.part::<String>(&["spec", "instance-id"]), "");
    let errors = read.finish();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, "spec.ipam.min-allocate");
}
