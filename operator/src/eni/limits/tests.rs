//! Cilium's vectors (`pkg/aws/ipam` tests) for the formulas.

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

fn m4_large() -> Limits {
    Limits {
        adapters: 2,
        ipv4: 10,
        ipv6: 10,
        hypervisor: "xen".into(),
        bare_metal: false,
    }
}

fn m5_metal() -> Limits {
    Limits {
        adapters: 15,
        ipv4: 50,
        ipv6: 50,
        hypervisor: String::new(),
        bare_metal: true,
    }
}

#[test]
fn max_allocatable_by_first_interface_index() {
    let m5 = m5_large();
    for (index, want) in [(0, Some(27)), (1, Some(18)), (3, None), (4, None)] {
        assert_eq!(
            max_allocatable(Some(&m5), index, false),
            want,
            "index {index}"
        );
    }
    assert_eq!(max_allocatable(None, 0, false), None, "unknown type");
    assert_eq!(max_allocatable(Some(&m5), 1, true), Some(288), "prefixes");
}

#[test]
fn min_allocatable_is_eight_or_what_the_interfaces_hold() {
    let small = Limits {
        adapters: 2,
        ipv4: 4,
        ..m5_large()
    };
    for (limits, index, want) in [
        (Some(m5_large()), 0, 8),
        (Some(small.clone()), 1, 3),
        (Some(small), 2, 0),
        (None, 0, 8),
    ] {
        assert_eq!(
            min_allocatable(limits.as_ref(), index),
            want,
            "{limits:?} {index}"
        );
    }
}

#[test]
fn capacity_of_an_m5_large() {
    let m5 = m5_large();
    let plain = EniShape {
        addresses: 10,
        prefixes: 0,
        excluded: false,
    };
    let with_prefix = EniShape {
        addresses: 17,
        prefixes: 1,
        excluded: false,
    };
    for (use_primary, pd, enis, want) in [
        (false, false, vec![plain], 27),
        (true, false, vec![plain], 30),
        (true, true, vec![], 480),
        (false, true, vec![], 432),
        (false, false, vec![plain, with_prefix], 42),
    ] {
        assert_eq!(
            m5.capacity(use_primary, pd, &enis),
            want,
            "use-primary {use_primary}, pd {pd}, {enis:?}"
        );
    }
    let excluded = EniShape {
        excluded: true,
        ..plain
    };
    assert_eq!(
        m5.capacity(false, false, &[excluded]),
        18,
        "device 0 excluded"
    );
}

#[test]
fn prefix_delegation_needs_a_capable_type_and_no_secondary_addresses() {
    let only_primary = EniShape {
        addresses: 1,
        prefixes: 0,
        excluded: false,
    };
    let secondaries = EniShape {
        addresses: 5,
        ..only_primary
    };
    for (limits, enis, want) in [
        (m4_large(), vec![only_primary], false),
        (m5_metal(), vec![only_primary], true),
        (m5_large(), vec![only_primary], true),
        (m5_large(), vec![only_primary, secondaries], false),
    ] {
        assert_eq!(
            prefix_delegation(true, Some(&limits), false, &enis),
            want,
            "{limits:?} {enis:?}"
        );
    }
    let m5 = m5_large();
    assert!(!prefix_delegation(false, Some(&m5), false, &[]), "flag off");
    assert!(
        !prefix_delegation(true, Some(&m5), true, &[]),
        "disabled on the node"
    );
    assert!(!prefix_delegation(true, None, false, &[]), "unknown type");
}

#[test]
fn a_new_eni_holds_at_most_one_interface_of_addresses() {
    let m5 = m5_large();
    assert_eq!(m5.new_eni_size(false, 8), 8);
    assert_eq!(m5.new_eni_size(false, 40), 9);
    assert_eq!(m5.new_eni_size(true, 400), 144);
}
