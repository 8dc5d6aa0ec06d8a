use serde_json::json;

use super::*;

fn node(name: &str, pod_cidrs: &[&str]) -> NodeView {
    NodeView::from_json(&json!({
        "metadata": {"name": name},
        "spec": {"ipam": {"podCIDRs": pod_cidrs}},
    }))
}

fn pool(v4: Option<(&str, u8)>, v6: Option<(&str, u8)>) -> PoolState {
    let family = |f: Option<(&str, u8)>| {
        f.map(|(cidr, mask_size)| FamilySpec {
            cidrs: vec![cidr.parse().expect("cidr")],
            mask_size,
        })
    };
    PoolState::Spec(PoolSpec {
        ipv4: family(v4),
        ipv6: family(v6),
        ..PoolSpec::default()
    })
}

fn dual() -> PoolState {
    pool(Some(("10.0.0.0/8", 24)), Some(("fd00::/104", 120)))
}

fn moved(plan: &NodePlan) -> Vec<String> {
    match plan {
        NodePlan::Move { cidrs } => cidrs.iter().map(ToString::to_string).collect(),
        other => panic!("not a move: {other:?}"),
    }
}

fn refused(planned: &Planned) -> String {
    assert!(
        matches!(planned.plan, NodePlan::Refuse(_)),
        "not refused: {planned}"
    );
    planned.error_text().expect("a refusal has a text")
}

fn one(nodes: &[NodeView], pool_state: &PoolState) -> Planned {
    let mut planned = plan(nodes, "default", pool_state);
    assert_eq!(planned.len(), 1);
    planned.remove(0)
}

#[test]
fn v4_v6_and_dual_stack_blocks_move() {
    for (cidrs, pool_state) in [
        (&["10.0.1.0/24"][..], pool(Some(("10.0.0.0/8", 24)), None)),
        (
            &["fd00::100/120"][..],
            pool(None, Some(("fd00::/104", 120))),
        ),
        (&["10.0.1.0/24", "fd00::100/120"][..], dual()),
    ] {
        let planned = one(&[node("n1", cidrs)], &pool_state);
        assert_eq!(moved(&planned.plan), cidrs, "{planned}");
        assert_eq!(planned.error_text(), None);
    }
}

#[test]
fn a_node_without_pod_cidrs_has_nothing_to_move() {
    let planned = one(&[node("n1", &[])], &dual());
    assert!(matches!(planned.plan, NodePlan::Nothing), "{planned}");
    assert_eq!(
        planned.to_string(),
        "n1: no spec.ipam.podCIDRs; nothing to move"
    );
}

#[test]
fn a_block_outside_the_pool_is_refused_naming_the_cidr_to_add() {
    let text = refused(&one(
        &[node("n1", &["10.1.0.0/24"])],
        &pool(Some(("10.0.0.0/16", 24)), None),
    ));
    assert_eq!(
        text,
        "migration to multi-pool IPAM failed: 10.1.0.0/24 is outside spec.ipv4.cidrs of \
         CiliumPodIPPool default (10.0.0.0/16); add a CIDR covering 10.1.0.0/24 to \
         spec.ipv4.cidrs"
    );
}

#[test]
fn a_block_of_another_size_is_refused_naming_the_mask_size() {
    let text = refused(&one(&[node("n1", &["10.0.1.0/26"])], &dual()));
    assert!(
        text.contains(
            "10.0.1.0/26 is a /26 block but CiliumPodIPPool default hands out /24 \
                       blocks; its spec.ipv4.maskSize must be 26"
        ),
        "{text}"
    );
}

#[test]
fn a_missing_pool_or_family_is_refused_naming_what_to_create() {
    let text = refused(&one(&[node("n1", &["10.0.1.0/24"])], &PoolState::Missing));
    assert!(
        text.ends_with(
            "CiliumPodIPPool default does not exist; create it with spec.ipv4.cidrs \
                        covering 10.0.1.0/24 and spec.ipv4.maskSize 24"
        ),
        "{text}"
    );
    let text = refused(&one(
        &[node("n1", &["10.0.1.0/24", "fd00::100/120"])],
        &pool(Some(("10.0.0.0/8", 24)), None),
    ));
    assert!(
        text.ends_with(
            "CiliumPodIPPool default has no spec.ipv6; add spec.ipv6 with cidrs \
                        covering fd00::100/120 and maskSize 120"
        ),
        "{text}"
    );
}

#[test]
fn garbage_is_refused_and_the_node_keeps_everything() {
    let text = refused(&one(&[node("n1", &["10.0.1.0/24", "banana"])], &dual()));
    assert!(
        text.contains("spec.ipam.podCIDRs \"banana\" is not a CIDR; correct or remove it"),
        "{text}"
    );
}

#[test]
fn a_block_two_nodes_would_hold_is_refused_for_the_second() {
    let mut holder = node("n0", &[]);
    holder.allocated = vec![crate::multipool::Allocated {
        pool: "default".to_owned(),
        cidrs: vec!["10.0.9.0/24".to_owned()],
        ..Default::default()
    }];
    let planned = plan(
        &[
            node("n2", &["10.0.1.0/24"]),
            node("n1", &["10.0.1.0/24"]),
            node("n3", &["10.0.9.0/24"]),
            holder,
        ],
        "default",
        &dual(),
    );
    let names: Vec<&str> = planned.iter().map(|p| p.node.as_str()).collect();
    assert_eq!(names, ["n0", "n1", "n2", "n3"]);
    assert_eq!(moved(&planned[1].plan), ["10.0.1.0/24"]);
    assert!(refused(&planned[2]).contains("10.0.1.0/24 overlaps 10.0.1.0/24 of CiliumNode n1"));
    assert!(refused(&planned[3]).contains("10.0.9.0/24 overlaps 10.0.9.0/24 of CiliumNode n0"));
}

#[test]
fn the_move_keeps_requested_and_other_pools_and_lists_each_block_once() {
    let doc = json!({
        "metadata": {"name": "n1", "resourceVersion": "7"},
        "spec": {"ipam": {
            "podCIDRs": ["10.0.1.0/24", "fd00::100/120"],
            "pools": {
                "requested": [{"pool": "default", "needed": {"ipv4-addrs": 16}}],
                "allocated": [
                    {"pool": "other", "cidrs": ["192.168.0.0/28"]},
                    {"pool": "default", "cidrs": ["10.0.1.0/24"]},
                ],
            },
        }, "eni": {"x": 1}},
    });
    let cidrs = [
        "10.0.1.0/24".parse().expect("cidr"),
        "fd00::100/120".parse().expect("cidr"),
    ];
    let after = migrated(&doc, "default", &cidrs);
    assert_eq!(
        after,
        json!({
            "metadata": {"name": "n1", "resourceVersion": "7"},
            "spec": {"ipam": {
                "pools": {
                    "requested": [{"pool": "default", "needed": {"ipv4-addrs": 16}}],
                    "allocated": [
                        {"pool": "other", "cidrs": ["192.168.0.0/28"]},
                        {"pool": "default", "cidrs": ["10.0.1.0/24", "fd00::100/120"]},
                    ],
                },
            }, "eni": {"x": 1}},
        })
    );
    let bare = migrated(&json!({"metadata": {"name": "n2"}}), "custom", &cidrs[..1]);
    assert_eq!(
        bare["spec"],
        json!({"ipam": {"pools": {"allocated": [{"pool": "custom", "cidrs": ["10.0.1.0/24"]}]}}})
    );
}
