//! The release for 1.20+ agents: what may be given back, how it is unassigned, and the cloud
//! manager releasing a CIDR the agent left out of `spec.ipam.pools.allocated` only after the
//! delay.

use std::collections::BTreeSet;

use super::*;

/// i-1 with its device-0 ENI and `eni-1` at index 1 holding a /28 prefix (its 16 addresses)
/// and two single addresses.
fn with_second_eni() -> Fake {
    let fake = ec2();
    {
        let mut ec2 = fake.0.lock().unwrap();
        let primary: IpAddr = "10.0.1.4".parse().unwrap();
        let prefix: IpNet = "10.0.2.16/28".parse().unwrap();
        let mut addresses = vec![
            primary,
            "10.0.1.5".parse().unwrap(),
            "10.0.1.6".parse().unwrap(),
        ];
        addresses.extend(prefix.hosts().chain([prefix.network(), prefix.broadcast()]));
        ec2.instances.get_mut("i-1").unwrap().insert(
            "eni-1".into(),
            Eni {
                id: "eni-1".into(),
                ip: Some(primary),
                number: 1,
                addresses,
                prefixes: vec![prefix],
                subnet: Some(subnet_of("subnet-1")),
                ..Eni::default()
            },
        );
    }
    fake
}

fn cidrs(list: &[&str]) -> BTreeSet<Ipv4Net> {
    list.iter().map(|c| c.parse().unwrap()).collect()
}

#[tokio::test]
async fn releasable_cidrs_are_prefixes_and_secondaries_of_usable_enis_never_a_primary() {
    let fake = with_second_eni();
    let p = provider(&fake, false).await;
    let s = spec(1);
    assert_eq!(
        p.releasable_cidrs(node(&s)),
        Some(cidrs(&["10.0.1.5/32", "10.0.1.6/32", "10.0.2.16/28"])),
        "eni-0 is excluded by first-interface-index 1; 10.0.1.4 is eni-1's primary"
    );
    let unknown = NodeRef {
        instance_id: "i-gone",
        ..node(&s)
    };
    assert_eq!(p.releasable_cidrs(unknown), None);
}

#[tokio::test]
async fn cidrs_are_unassigned_per_eni_prefixes_first_and_the_cache_follows() {
    let fake = with_second_eni();
    let p = provider(&fake, false).await;
    let s = spec(1);
    let asked: Vec<Ipv4Net> = ["10.0.1.6/32", "10.0.2.16/28", "10.0.1.4/32", "10.9.9.9/32"]
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
    let outcome = p.release_cidrs(node(&s), &asked).await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(
        fake.calls(),
        [
            "unassign eni-1 [] [10.0.2.16/28]",
            "unassign eni-1 [10.0.1.6] []",
        ]
    );
    assert_eq!(
        outcome.released["subnet-1"],
        [
            "10.0.2.16/28".parse::<Ipv4Net>().unwrap(),
            "10.0.1.6/32".parse().unwrap()
        ]
    );
    assert_eq!(
        outcome.gone,
        [
            "10.0.1.4/32".parse::<Ipv4Net>().unwrap(),
            "10.9.9.9/32".parse().unwrap()
        ],
        "a primary and an address on no ENI are not unassigned"
    );
    assert_eq!(
        p.releasable_cidrs(node(&s)),
        Some(cidrs(&["10.0.1.5/32"])),
        "the cache dropped what was unassigned"
    );
}

#[tokio::test]
async fn a_failed_unassign_is_reported_and_the_rest_is_kept() {
    let fake = with_second_eni();
    let p = provider(&fake, false).await;
    let s = spec(1);
    fake.inject("unassign", INDEX_TAKEN);
    let asked: Vec<Ipv4Net> = vec!["10.0.1.5/32".parse().unwrap()];
    let outcome = p.release_cidrs(node(&s), &asked).await;
    assert!(outcome.released.is_empty());
    let error = outcome.error.expect("the failure is reported");
    assert!(
        crate::chain(&error).contains("eni-1"),
        "{}",
        crate::chain(&error)
    );
    assert_eq!(
        p.releasable_cidrs(node(&s)),
        Some(cidrs(&["10.0.1.5/32", "10.0.1.6/32", "10.0.2.16/28"]))
    );
}

/// A 1.20 agent's node: it reports demand and keeps `kept` in `allocated`.
fn agent_1_20(kept: &[&str]) -> CloudNodeView<EniSpec, EniStatus> {
    CloudNodeView {
        name: "n1".into(),
        instance_id: "i-1".into(),
        provider: spec(1),
        pre_allocate: 2,
        requested_default: Some(2),
        allocated_v4: Some(cidrs(kept)),
        ..CloudNodeView::default()
    }
}

#[tokio::test(start_paused = true)]
async fn the_manager_releases_what_the_agent_gave_back_after_the_delay_only() {
    const DELAY: Duration = Duration::from_mins(3);
    let fake = with_second_eni();
    let p = provider(&fake, false).await;
    let (manager, _rx) = manager(p, true, DELAY).await;
    let all = ["10.0.1.5/32", "10.0.1.6/32", "10.0.2.16/28"];
    manager.upsert(agent_1_20(&all));
    // The agent gives back 10.0.1.6 and the prefix; then takes the prefix back.
    manager.upsert(agent_1_20(&["10.0.1.5/32"]));
    tokio::time::sleep(DELAY / 2).await;
    manager.upsert(agent_1_20(&["10.0.1.5/32", "10.0.2.16/28"]));
    let unassigns = |fake: &Fake| -> Vec<String> {
        (fake.calls().into_iter())
            .filter(|c| c.starts_with("unassign"))
            .collect()
    };
    assert!(unassigns(&fake).is_empty(), "nothing before the delay");
    tokio::time::timeout(DELAY, async {
        while unassigns(&fake).is_empty() {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
    .await
    .expect("released within the delay after the mark");
    assert_eq!(unassigns(&fake), ["unassign eni-1 [10.0.1.6] []"]);
    assert!(
        fake.0.lock().unwrap().instances["i-1"]["eni-1"]
            .prefixes
            .contains(&"10.0.2.16/28".parse().unwrap()),
        "the prefix the agent took back stays"
    );
}
