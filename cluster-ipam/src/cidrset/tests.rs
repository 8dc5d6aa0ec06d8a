use std::net::IpAddr;

use ipnet::IpNet;

use super::{BlockStats, CidrSet, CidrSetError, Family, ReservedRange, build_sets};

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn set(cluster: &str, mask: u8) -> CidrSet {
    CidrSet::new(net(cluster), mask).unwrap()
}

fn range(start: &str, end: &str) -> ReservedRange {
    ReservedRange {
        start: addr(start),
        end: addr(end),
    }
}

fn take(set: &mut CidrSet, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| set.allocate_next().unwrap().to_string())
        .collect()
}

#[test]
fn new_checks_mask_limits() {
    let cases: &[(&str, u8, Result<u64, &str>)] = &[
        ("10.0.0.0/24", 32, Ok(256)),
        (
            "10.0.0.0/24",
            33,
            Err(
                "SubNetMask is invalid, should be lower or equal to 32 for IPv4 and to 128 for IPv6",
            ),
        ),
        ("2001:beef:1234:369b::/60", 64, Ok(16)),
        (
            "2001:beef:1234:369b::/60",
            130,
            Err(
                "SubNetMask is invalid, should be lower or equal to 32 for IPv4 and to 128 for IPv6",
            ),
        ),
        ("beef:1234::/32", 48, Ok(65536)),
        (
            "beef:1234::/32",
            49,
            Err("New CIDR set failed; the node CIDR size is too big"),
        ),
        (
            "10.0.0.0/16",
            8,
            Err(
                "New CIDR set failed; the node mask size 8 is shorter than the cluster CIDR 10.0.0.0/16: use a mask size of at least /16",
            ),
        ),
        ("0.0.0.0/0", 32, Ok(1 << 32)),
        ("127.0.0.0/8", 32, Ok(1 << 24)),
        ("10.0.0.0/24", 24, Ok(1)),
    ];
    for (cluster, mask, want) in cases {
        let got = CidrSet::new(net(cluster), *mask)
            .map(|s| s.capacity())
            .map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_owned), "{cluster} /{mask}");
    }
}

#[test]
fn new_masks_the_cluster_prefix() {
    let s = set("127.123.3.9/16", 24);
    assert_eq!(s.cluster(), net("127.123.0.0/16"));
    assert_eq!(s.to_string(), "clusterCIDR: 127.123.0.0/16, nodeMask: 24");
}

#[test]
fn block_at_index_matches_cilium() {
    let cases: &[(&str, u8, u64, &str)] = &[
        ("127.123.3.0/16", 24, 0, "127.123.0.0/24"),
        ("127.123.0.0/16", 24, 15, "127.123.15.0/24"),
        ("192.168.5.219/28", 32, 5, "192.168.5.213/32"),
        ("2001:0db8:1234:3::/48", 64, 0, "2001:db8:1234::/64"),
        ("2001:0db8:1234::/48", 64, 15, "2001:db8:1234:f::/64"),
        (
            "2001:0db8:85a3::8a2e:0370:7334/50",
            63,
            6425,
            "2001:db8:85a3:3232::/63",
        ),
        (
            "2001:0db8:85a3::8a2e:0370:7334/32",
            48,
            6425,
            "2001:db8:1919::/48",
        ),
        (
            "2001:0db8:1234:ff00::0370:7334/56",
            72,
            6425,
            "2001:db8:1234:ff19:1900::/72",
        ),
        (
            "2001:0db8:1234:ff00::0370:7334/80",
            96,
            6425,
            "2001:db8:1234:ff00:0:1919::/96",
        ),
    ];
    for (cluster, mask, index, want) in cases {
        let s = set(cluster, *mask);
        assert_eq!(
            s.block(*index).to_string(),
            *want,
            "{cluster} /{mask} #{index}"
        );
        assert_eq!(s.index_of(s.block(*index).addr()), *index);
    }
}

#[test]
fn allocate_next_is_round_robin_and_wraps() {
    let mut s = set("10.0.0.0/30", 32);
    assert_eq!(
        take(&mut s, 4),
        ["10.0.0.0/32", "10.0.0.1/32", "10.0.0.2/32", "10.0.0.3/32"]
    );
    // The cursor wrapped to 0: a released block in the middle comes back first.
    s.release(&net("10.0.0.1/32")).unwrap();
    assert_eq!(take(&mut s, 1), ["10.0.0.1/32"]);
    // Cursor is now at 2: 2 comes before 0 even though 0 is lower.
    s.release(&net("10.0.0.0/32")).unwrap();
    s.release(&net("10.0.0.2/32")).unwrap();
    assert_eq!(take(&mut s, 2), ["10.0.0.2/32", "10.0.0.0/32"]);
}

#[test]
fn full_set_refuses_with_cilium_text() {
    for cluster in ["127.123.234.0/30", "beef:1234::/30"] {
        let mut s = set(cluster, 30);
        let first = s.allocate_next().unwrap();
        assert_eq!(first, net(cluster));
        assert!(s.is_full());
        let err = s.allocate_next().unwrap_err();
        assert_eq!(
            err.to_string(),
            "CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range"
        );
        s.release(&first).unwrap();
        assert!(!s.is_full());
        assert_eq!(s.allocate_next().unwrap(), first);
    }
}

#[test]
fn occupy_covers_the_indices_of_the_prefix() {
    // (cluster, mask, occupied prefix, first index, last index) — Cilium's TestOccupy.
    let cases: &[(&str, u8, &str, u64, u64)] = &[
        ("127.0.0.0/8", 16, "127.0.0.0/8", 0, 255),
        ("2001:beef:1200::/40", 48, "2001:beef:1200::/40", 0, 255),
        ("127.0.0.0/8", 16, "127.0.0.0/2", 0, 255),
        ("2001:beef:1200::/40", 48, "2001:beef:1234::/34", 0, 255),
        ("127.0.0.0/8", 16, "127.0.0.0/16", 0, 0),
        ("127.0.0.0/8", 32, "127.0.0.0/16", 0, 65535),
        ("127.0.0.0/7", 16, "127.0.0.0/15", 256, 257),
        ("2001:beef:7f00::/39", 48, "2001:beef:7f00::/47", 256, 257),
        ("127.0.0.0/7", 15, "127.0.0.0/15", 128, 128),
        ("127.0.0.0/7", 18, "127.0.0.0/15", 1024, 1031),
        // Smaller than a block: the block that holds it.
        ("10.0.0.0/16", 24, "10.0.5.7/32", 5, 5),
        ("10.0.0.0/16", 24, "10.0.5.128/25", 5, 5),
    ];
    for (cluster, mask, cidr, lo, hi) in cases {
        let mut s = set(cluster, *mask);
        s.occupy(&net(cidr)).unwrap();
        assert_eq!(s.used(), hi - lo + 1, "{cluster} /{mask} {cidr}");
        assert_eq!(s.used.iter().collect::<Vec<_>>(), [(*lo, *hi)], "{cidr}");
        assert!(s.is_allocated(&net(cidr)).unwrap());
    }
}

#[test]
fn occupy_twice_and_release_count_once() {
    let mut s = set("10.0.0.0/16", 24);
    s.occupy(&net("10.0.4.0/23")).unwrap();
    s.occupy(&net("10.0.5.0/24")).unwrap();
    assert_eq!(s.used(), 2);
    assert!(!s.is_allocated(&net("10.0.4.0/22")).unwrap());
    assert!(s.overlaps_allocated(&net("10.0.4.0/22")).unwrap());
    assert!(!s.overlaps_allocated(&net("10.0.6.0/23")).unwrap());
    assert!(s.is_allocated(&net("10.0.4.0/23")).unwrap());
    // Releasing a sub-block prefix frees its whole block.
    s.release(&net("10.0.5.128/25")).unwrap();
    assert_eq!(s.used(), 1);
    assert!(!s.is_allocated(&net("10.0.5.0/24")).unwrap());
    s.release(&net("10.0.5.0/24")).unwrap();
    assert_eq!(s.used(), 1);
    s.release(&net("10.0.0.0/8")).unwrap();
    assert_eq!(s.used(), 0);
}

#[test]
fn in_range_either_way() {
    let s = set("10.1.0.0/16", 24);
    let cases = [
        ("10.1.2.0/24", true),
        ("10.0.0.0/8", true),
        ("10.1.0.0/16", true),
        ("10.2.0.0/16", false),
        ("10.0.255.0/24", false),
        ("::/0", false),
    ];
    for (cidr, want) in cases {
        assert_eq!(s.in_range(&net(cidr)), want, "{cidr}");
    }
    assert!(s.is_cluster_cidr(&net("10.1.7.7/16")));
    assert!(!s.is_cluster_cidr(&net("10.1.0.0/17")));
}

#[test]
fn out_of_range_prefix_is_refused() {
    let mut s = set("192.168.0.0/16", 24);
    let err = s.occupy(&net("127.168.224.0/24")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cidr 127.168.224.0/24 is out the range of cluster cidr 192.168.0.0/16"
    );
    assert!(s.is_allocated(&net("fd00::/64")).is_err());
    assert!(s.release(&net("10.0.0.0/24")).is_err());
    assert_eq!(s.used(), 0);
}

#[test]
fn huge_v4_set_stays_sparse() {
    let mut s = set("0.0.0.0/0", 32);
    assert_eq!(s.capacity(), 1 << 32);
    assert_eq!(s.allocate_next().unwrap(), net("0.0.0.0/32"));
    s.occupy(&net("0.0.0.0/8")).unwrap();
    assert_eq!(s.used(), 1 << 24);
    assert_eq!(s.allocate_next().unwrap(), net("1.0.0.0/32"));
    s.occupy(&net("0.0.0.0/1")).unwrap();
    assert_eq!(s.allocate_next().unwrap(), net("128.0.0.0/32"));
    assert_eq!(
        s.stats(),
        BlockStats {
            in_use: (1 << 31) + 1,
            reserved: 0,
            free: (1 << 31) - 1,
        }
    );
}

#[test]
fn reserved_ranges_are_skipped_and_can_be_cleared() {
    for (cluster, mask, start, end, first, other) in [
        (
            "10.0.0.0/30",
            31,
            "10.0.0.0",
            "10.0.0.1",
            "10.0.0.2/31",
            "10.0.0.0/31",
        ),
        (
            "fd00::/126",
            127,
            "fd00::",
            "fd00::1",
            "fd00::2/127",
            "fd00::/127",
        ),
    ] {
        let mut s = set(cluster, mask);
        s.set_reserved_ranges(&[range(start, end)]).unwrap();
        assert_eq!(
            s.stats(),
            BlockStats {
                in_use: 0,
                reserved: 1,
                free: 1
            }
        );
        assert_eq!(s.allocate_next().unwrap(), net(first));
        assert!(s.is_full());
        assert!(matches!(
            s.allocate_next(),
            Err(CidrSetError::NoCidrsRemaining { .. })
        ));
        s.set_reserved_ranges(&[]).unwrap();
        assert!(!s.is_full());
        assert_eq!(s.allocate_next().unwrap(), net(other));
    }
}

#[test]
fn reserved_range_blocks_every_block_it_touches() {
    let mut s = set("10.0.0.0/24", 28);
    s.set_reserved_ranges(&[range("10.0.0.10", "10.0.0.20")])
        .unwrap();
    assert_eq!(s.stats().reserved, 2);
    assert_eq!(take(&mut s, 2), ["10.0.0.32/28", "10.0.0.48/28"]);
}

#[test]
fn held_block_in_reserved_range_stays_until_released() {
    let mut s = set("10.0.0.0/30", 31);
    let held = s.allocate_next().unwrap();
    assert_eq!(held, net("10.0.0.0/31"));
    s.set_reserved_ranges(&[range("10.0.0.0", "10.0.0.1")])
        .unwrap();
    assert_eq!(
        s.stats(),
        BlockStats {
            in_use: 1,
            reserved: 0,
            free: 1
        }
    );
    assert!(s.is_allocated(&held).unwrap());
    s.release(&held).unwrap();
    assert_eq!(
        s.stats(),
        BlockStats {
            in_use: 0,
            reserved: 1,
            free: 1
        }
    );
    assert_eq!(s.allocate_next().unwrap(), net("10.0.0.2/31"));
    assert!(s.allocate_next().is_err());
    // Occupy still works on a reserved block (a node presenting it after a restart).
    s.occupy(&held).unwrap();
    assert_eq!(
        s.stats(),
        BlockStats {
            in_use: 2,
            reserved: 0,
            free: 0
        }
    );
}

#[test]
fn bad_reserved_ranges_leave_the_set_unchanged() {
    let mut s = set("10.0.0.0/24", 28);
    s.set_reserved_ranges(&[range("10.0.0.0", "10.0.0.15")])
        .unwrap();
    for bad in [
        range("10.0.0.20", "10.0.0.10"),
        range("10.0.0.200", "10.0.1.5"),
        range("fd00::", "fd00::1"),
    ] {
        let err = s.set_reserved_ranges(&[bad]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("reserved range {bad} is not an ordered range inside CIDR 10.0.0.0/24")
        );
        assert_eq!(s.stats().reserved, 1);
    }
}

#[test]
fn build_sets_checks_collisions_then_family() {
    type Case<'a> = (Family, &'a [&'a str], u8, Result<usize, &'a str>);
    let cases: &[Case] = &[
        (Family::V4, &["10.0.0.0/16"], 24, Ok(1)),
        (
            Family::V4,
            &["10.0.0.0/16", "10.0.0.0/8"],
            24,
            Err("requested CIDR 10.0.0.0/8 collides with clusterCIDR: 10.0.0.0/16, nodeMask: 24"),
        ),
        (
            Family::V6,
            &["fd00::/100", "fd00::/96"],
            112,
            Err("requested CIDR fd00::/96 collides with clusterCIDR: fd00::/100, nodeMask: 112"),
        ),
        (
            Family::V6,
            &["fd00::/100", "fd00::1:0000:0000/96"],
            112,
            Ok(2),
        ),
        (
            Family::V4,
            &["10.0.0.0/16", "fd00::/64"],
            24,
            Err("CIDR is not v4 family: fd00::/64"),
        ),
        (
            Family::V6,
            &["10.0.0.0/16"],
            112,
            Err("CIDR is not v6 family: 10.0.0.0/16"),
        ),
        (
            Family::V4,
            &["10.0.0.0/16"],
            33,
            Err(
                "SubNetMask is invalid, should be lower or equal to 32 for IPv4 and to 128 for IPv6",
            ),
        ),
    ];
    for (family, cidrs, mask, want) in cases {
        let cidrs: Vec<IpNet> = cidrs.iter().map(|c| net(c)).collect();
        let got = build_sets(&[], *family, &cidrs, *mask)
            .map(|sets| sets.len())
            .map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_owned), "{cidrs:?}");
    }
}

#[test]
fn build_sets_checks_against_existing_sets() {
    let existing = [set("10.0.0.0/16", 24)];
    let err = build_sets(&existing, Family::V4, &[net("10.0.128.0/17")], 24).unwrap_err();
    assert_eq!(
        err.to_string(),
        "requested CIDR 10.0.128.0/17 collides with clusterCIDR: 10.0.0.0/16, nodeMask: 24"
    );
    let built = build_sets(&existing, Family::V4, &[net("10.1.0.0/16")], 24).unwrap();
    assert_eq!(built[0].cluster(), net("10.1.0.0/16"));
}

#[test]
fn intervals_merge_and_split() {
    let mut i = super::Intervals::default();
    assert_eq!(i.insert(5, 9), 5);
    assert_eq!(i.insert(10, 12), 3);
    assert_eq!(i.insert(0, 3), 4);
    assert_eq!(i.iter().collect::<Vec<_>>(), [(0, 3), (5, 12)]);
    assert_eq!(i.insert(2, 6), 1);
    assert_eq!(i.iter().collect::<Vec<_>>(), [(0, 12)]);
    assert_eq!(i.remove(4, 6), 3);
    assert_eq!(i.iter().collect::<Vec<_>>(), [(0, 3), (7, 12)]);
    assert_eq!(i.count_in(2, 8), 4);
    assert_eq!(i.len(), 10);
    assert_eq!(i.skip(1), 4);
    assert_eq!(i.skip(5), 5);
    assert!(i.covers(7, 12));
    assert!(!i.covers(3, 7));
}
