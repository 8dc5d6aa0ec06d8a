//! IPv6 for 1.20+ agents (§6.4): one /80 prefix per node, on a usable ENI, or on the new ENI
//! when there is none, only while the agent asks for IPv6 and the node has no prefix.

use std::collections::BTreeSet;

use super::*;

#[tokio::test]
async fn the_prefix_is_needed_only_for_ipv6_demand_on_a_node_without_one() {
    let fake = ec2();
    let p = provider(&fake, false).await;
    let s = spec(0);
    assert!(!p.ipv6_prefix_needed(node(&s), 0), "no IPv6 demand");
    assert!(p.ipv6_prefix_needed(node(&s), 4));
    let held = p.allocate_ipv6_prefix(node(&s), 0).await.expect("assigned");
    assert_eq!(held, 0, "no new ENI");
    assert_eq!(fake.calls(), ["assign_ipv6 eni-0"]);
    p.instance_sync("i-1").await.expect("sync");
    assert!(!p.ipv6_prefix_needed(node(&s), 4), "the node has its /80");
}

#[tokio::test]
async fn a_node_without_a_usable_eni_gets_its_prefix_on_the_new_one() {
    let fake = ec2();
    let p = provider(&fake, false).await;
    let s = spec(1);
    let held = p.allocate_ipv6_prefix(node(&s), 8).await.expect("created");
    assert_eq!(held, 8);
    assert_eq!(
        fake.calls(),
        [
            "create subnet-1 Addresses(8) [\"sg-node\"] +ipv6",
            "attach eni-new1 i-1 1",
            "delete_on_termination eni-new1",
        ]
    );
    assert!(!p.ipv6_prefix_needed(node(&s), 4));
}

#[tokio::test]
async fn a_refused_prefix_names_the_eni() {
    let fake = ec2();
    let p = provider(&fake, false).await;
    let s = spec(0);
    fake.inject("assign_ipv6", INDEX_TAKEN);
    let error = p
        .allocate_ipv6_prefix(node(&s), 0)
        .await
        .expect_err("refused");
    let text = crate::chain(&error);
    assert!(
        text.contains("assigning an IPv6 /80 prefix to eni-0"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_manager_gives_a_node_asking_for_ipv6_one_prefix() {
    let fake = ec2();
    let p = provider(&fake, false).await;
    let (manager, _rx) = manager(p, false, Duration::ZERO).await;
    manager.upsert(CloudNodeView {
        name: "n1".into(),
        instance_id: "i-1".into(),
        provider: spec(0),
        pre_allocate: 1,
        requested_default: Some(1),
        requested_default_v6: 1,
        allocated_v4: Some(BTreeSet::new()),
        ..CloudNodeView::default()
    });
    tokio::time::timeout(Duration::from_mins(1), async {
        while !fake.calls().iter().any(|c| c.starts_with("assign_ipv6")) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("a prefix was assigned");
    // Wait for the round after it (the node's IPv4 addresses), then count.
    tokio::time::timeout(Duration::from_mins(1), async {
        while !fake.calls().iter().any(|c| c.starts_with("assign eni-0")) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the IPv4 addresses followed");
    let prefixes = (fake.calls().iter())
        .filter(|c| c.starts_with("assign_ipv6"))
        .count();
    assert_eq!(prefixes, 1, "{:?}", fake.calls());
}
