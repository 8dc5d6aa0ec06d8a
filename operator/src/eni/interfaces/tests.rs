//! A node's ENIs: what it holds, where the next addresses go, what a 1.19 agent gives back.

use weft_k8s::crd::eni::AwsSubnet;

use super::*;

fn m5_large() -> Limits {
    Limits {
        adapters: 3,
        ipv4: 10,
        ipv6: 10,
        hypervisor: "nitro".into(),
        bare_metal: false,
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

fn eni(id: &str, number: i64, subnet: &str, addresses: &[&str]) -> (String, Eni) {
    let addresses: Vec<IpAddr> = addresses.iter().map(|a| ip(a)).collect();
    (
        id.to_owned(),
        Eni {
            id: id.into(),
            number,
            ip: addresses.first().copied(),
            addresses,
            subnet: Some(AwsSubnet {
                id: subnet.into(),
                ..AwsSubnet::default()
            }),
            ..Eni::default()
        },
    )
}

fn subnet(id: &str, available: u64) -> (String, Subnet) {
    (
        id.to_owned(),
        Subnet {
            id: id.into(),
            available,
            ..Subnet::default()
        },
    )
}

fn spec(first: i64) -> EniSpec {
    EniSpec {
        instance_type: "m5.large".into(),
        first_interface_index: Some(first),
        ..EniSpec::default()
    }
}

fn node<'a>(
    spec: &'a EniSpec,
    enis: &'a BTreeMap<String, Eni>,
    limits: Option<&'a Limits>,
) -> NodeEnis<'a> {
    NodeEnis {
        instance: "i-1",
        spec,
        enis,
        limits,
        pd_enabled: false,
    }
}

#[test]
fn the_excluded_primary_eni_and_primary_addresses_are_not_handed_out() {
    let limits = m5_large();
    let enis = BTreeMap::from([
        eni("eni-0", 0, "s-a", &["10.0.0.10", "10.0.0.11"]),
        eni("eni-1", 1, "s-a", &["10.0.0.20", "10.0.0.21"]),
    ]);
    let s = spec(1);
    let (available, stats) = node(&s, &enis, Some(&limits))
        .resync()
        .expect("limits known");
    assert_eq!(
        available,
        Available::from([("10.0.0.21".to_owned(), "eni-1".to_owned())])
    );
    assert_eq!(
        stats,
        InterfaceStats {
            node_capacity: 18,
            remaining_interfaces: 2,
        }
    );
    let mut with_primary = spec(0);
    with_primary.use_primary_address = Some(true);
    let (available, _) = node(&with_primary, &enis, Some(&limits))
        .resync()
        .expect("known");
    assert_eq!(available.len(), 4, "{available:?}");
}

#[test]
fn unknown_limits_and_no_enis_are_errors_naming_the_fix() {
    let enis = BTreeMap::new();
    let s = spec(0);
    let err = node(&s, &enis, None).resync().expect_err("no limits");
    assert!(err.to_string().contains("spec.eni.instance-type"), "{err}");
    let limits = m5_large();
    assert_eq!(
        node(&s, &enis, Some(&limits)).resync(),
        Err(InterfacesError::NoEnis {
            instance: "i-1".into()
        })
    );
}

#[test]
fn the_next_addresses_go_to_the_first_eni_with_room_in_a_subnet_with_room() {
    let limits = m5_large();
    let enis = BTreeMap::from([
        eni("eni-0", 0, "s-a", &["10.0.0.10"]),
        eni("eni-2", 2, "s-b", &["10.0.1.20"]),
        eni("eni-1", 1, "s-full", &["10.0.2.20"]),
    ]);
    let subnets = BTreeMap::from([subnet("s-a", 100), subnet("s-b", 4), subnet("s-full", 0)]);
    let s = spec(1);
    let action = node(&s, &enis, Some(&limits))
        .allocation(&subnets)
        .expect("known");
    assert_eq!(
        action,
        AllocationAction {
            interface_id: "eni-2".into(),
            pool_id: "s-b".into(),
            available_for_allocation: 4,
            max_to_allocate: 0,
            interface_candidates: 2,
            empty_interface_slots: 0,
        }
    );
}

#[test]
fn a_full_node_with_an_empty_slot_asks_for_a_new_eni() {
    let limits = m5_large();
    let enis = BTreeMap::from([eni("eni-0", 0, "s-a", &["10.0.0.10"])]);
    let subnets = BTreeMap::from([subnet("s-a", 100)]);
    let s = spec(1);
    let action = node(&s, &enis, Some(&limits))
        .allocation(&subnets)
        .expect("known");
    assert_eq!(action.interface_id, "");
    assert_eq!(action.empty_interface_slots, 2);
}

#[test]
fn a_1_19_release_never_gives_back_a_used_or_primary_address() {
    let limits = m5_large();
    let enis = BTreeMap::from([
        eni(
            "eni-1",
            1,
            "s-a",
            &["10.0.0.20", "10.0.0.21", "10.0.0.22", "10.0.0.23"],
        ),
        eni("eni-2", 2, "s-b", &["10.0.1.20", "10.0.1.21"]),
    ]);
    let s = spec(1);
    let used = BTreeSet::from(["10.0.0.21".to_owned()]);
    let release = node(&s, &enis, Some(&limits)).release(5, &used);
    assert_eq!(
        release.action,
        ReleaseAction {
            interface_id: "eni-1".into(),
            pool_id: "s-a".into(),
            ips: vec!["10.0.0.22".into(), "10.0.0.23".into()],
        }
    );
    assert!(release.prefixes.is_empty());
    assert_eq!(
        node(&s, &enis, Some(&limits)).release(0, &used),
        Release::default()
    );
}

#[test]
fn a_1_19_release_gives_back_whole_unused_prefixes_first() {
    let limits = m5_large();
    let mut addresses = vec!["10.0.0.5".to_owned()];
    addresses.extend((16..32).map(|i| format!("10.0.0.{i}")));
    addresses.extend((32..48).map(|i| format!("10.0.0.{i}")));
    let refs: Vec<&str> = addresses.iter().map(String::as_str).collect();
    let (id, mut with_prefixes) = eni("eni-1", 1, "s-a", &refs);
    with_prefixes.prefixes = vec![
        "10.0.0.16/28".parse().expect("cidr"),
        "10.0.0.32/28".parse().expect("cidr"),
    ];
    let enis = BTreeMap::from([(id, with_prefixes)]);
    let s = spec(1);
    let used = BTreeSet::from(["10.0.0.33".to_owned()]);
    let release = node(&s, &enis, Some(&limits)).release(20, &used);
    assert_eq!(release.prefixes, ["10.0.0.16/28"]);
    assert_eq!(release.action.ips.len(), 16, "{:?}", release.action.ips);
    assert!(
        !release.action.ips.contains(&"10.0.0.5".to_owned()),
        "the primary stays"
    );
}
