use std::net::IpAddr;

use super::*;
use crate::ipam::testing::seq;

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// (cidr, allowed first/last IP: `F`, `L`, size, first allocatable, last allocatable (`""`:
/// none), addresses just outside)
type WindowCase = (
    &'static str,
    &'static str,
    u64,
    &'static str,
    &'static str,
    &'static [&'static str],
);

#[rustfmt::skip]
const WINDOWS: &[WindowCase] = &[
    ("10.0.0.0/24", "", 254, "10.0.0.1", "10.0.0.254", &["10.0.0.0", "10.0.0.255"]),
    ("10.0.0.77/24", "", 254, "10.0.0.1", "10.0.0.254", &["10.0.0.0", "10.0.1.0"]),
    ("10.0.0.0/24", "F", 255, "10.0.0.0", "10.0.0.254", &["10.0.0.255"]),
    ("10.0.0.0/24", "L", 255, "10.0.0.1", "10.0.0.255", &["10.0.0.0"]),
    ("10.0.0.0/24", "FL", 256, "10.0.0.0", "10.0.0.255", &["10.0.1.0"]),
    ("10.0.0.0/30", "", 2, "10.0.0.1", "10.0.0.2", &["10.0.0.0", "10.0.0.3"]),
    ("10.0.0.4/31", "", 2, "10.0.0.4", "10.0.0.5", &["10.0.0.6"]),
    ("10.0.0.4/31", "FL", 2, "10.0.0.4", "10.0.0.5", &["10.0.0.3"]),
    ("10.0.0.9/32", "", 1, "10.0.0.9", "10.0.0.9", &["10.0.0.8", "10.0.0.10"]),
    ("fd00::4/127", "", 2, "fd00::4", "fd00::5", &["fd00::6"]),
    ("fd00::9/128", "", 1, "fd00::9", "fd00::9", &["fd00::8"]),
    ("fd00::/64", "", 65534, "fd00::1", "fd00::fffe", &["fd00::", "fd00::ffff", "fd00::1:0"]),
    ("fd00::/112", "", 65534, "fd00::1", "fd00::fffe", &["fd00::ffff"]),
    ("fd00::/64", "FL", 65536, "fd00::", "fd00::ffff", &["fd00::1:0"]),
    ("fd00::/120", "", 254, "fd00::1", "fd00::fe", &["fd00::ff"]),
    ("0.0.0.0/1", "", 0, "", "", &["10.0.0.1"]),
    ("128.0.0.0/1", "FL", 0, "", "", &["128.0.0.1"]),
    ("::/1", "", 0, "", "", &["::1"]),
    ("0.0.0.0/2", "", (1 << 30) - 2, "0.0.0.1", "63.255.255.254", &["64.0.0.0"]),
];

#[test]
fn reserved_addresses_and_window() {
    for &(cidr, flags, size, lo, hi, outside) in WINDOWS {
        let masked = net(cidr).trunc();
        let mut range = CidrRange::new(net(cidr), flags.contains('F'), flags.contains('L'));
        assert_eq!(
            (range.size(), range.free(), range.cidr()),
            (size, size, masked),
            "{cidr}"
        );
        if lo.is_empty() {
            let err = range.allocate_next(&mut seq(&[])).unwrap_err();
            assert_eq!(err, HostScopeError::Full { cidr: masked }, "{cidr}");
        } else {
            assert_eq!(range.allocate_next(&mut seq(&[0])), Ok(ip(lo)), "{cidr}");
        }
        if hi != lo {
            assert_eq!(range.allocate(ip(hi)), Ok(()), "{cidr} {hi}");
        }
        for out in outside {
            let err = range.allocate(ip(out)).unwrap_err();
            let want = format!(
                "provided IP is not in the valid range. The range of valid IPs is {masked}"
            );
            assert_eq!(err.to_string(), want, "{cidr} {out}");
        }
    }
}

#[test]
fn allocate_errors_verbatim() {
    let mut a = HostScopeAllocator::new(net("10.1.0.0/30"), "default");
    a.allocate(ip("10.1.0.1")).unwrap();
    let cases = [
        ("10.1.0.1", "provided IP is already allocated"),
        (
            "10.1.0.0",
            "provided IP is not in the valid range. The range of valid IPs is 10.1.0.0/30",
        ),
        (
            "fd00::1",
            "provided IP is not in the valid range. The range of valid IPs is 10.1.0.0/30",
        ),
    ];
    for (addr, want) in cases {
        assert_eq!(
            a.allocate(ip(addr)).unwrap_err().to_string(),
            want,
            "{addr}"
        );
    }
    assert_eq!(a.allocate_next(&mut seq(&[0])).unwrap().ip, ip("10.1.0.2"));
    assert_eq!(
        a.allocate_next(&mut seq(&[0])).unwrap_err().to_string(),
        "range is full"
    );
}

#[test]
fn random_offset_then_scan_forward_with_wrap_around() {
    // 10.2.0.0/29: offsets 0..6 are 10.2.0.1 ..= 10.2.0.6.
    let mut a = HostScopeAllocator::new(net("10.2.0.0/29"), "default");
    let mut rng = seq(&[3, 3, 5, 5, 0]);
    let got: Vec<_> = (0..5)
        .map(|_| a.allocate_next(&mut rng).unwrap().ip)
        .collect();
    let want: Vec<_> = ["10.2.0.4", "10.2.0.5", "10.2.0.6", "10.2.0.1", "10.2.0.2"]
        .map(ip)
        .to_vec();
    assert_eq!(got, want);
    assert_eq!(a.used(), 5);
}

#[test]
fn release_always_succeeds_and_frees() {
    let mut a = HostScopeAllocator::new(net("10.3.0.0/30"), "default");
    let first = a.allocate_next(&mut seq(&[0])).unwrap().ip;
    a.release(ip("10.3.0.2")); // never allocated
    a.release(ip("192.168.0.1")); // out of range
    a.release(ip("fd00::1")); // other family
    assert!(a.is_allocated(first));
    a.release(first);
    assert!(!a.is_allocated(first));
    assert_eq!(a.used(), 0);
    assert_eq!(a.allocate(first).unwrap().ip, first);
}

#[test]
fn results_report_the_default_pool() {
    let mut a = HostScopeAllocator::new(net("10.4.0.0/24"), "blue");
    assert_eq!(a.allocate_next(&mut seq(&[0])).unwrap().pool, "blue");
    assert_eq!(a.allocate(ip("10.4.0.9")).unwrap().pool, "blue");
}

#[test]
fn capacity_and_status() {
    let cases = [
        ("10.0.0.0/24", 254u128, "1/254 allocated from 10.0.0.0/24"),
        ("10.0.0.0/30", 2, "1/2 allocated from 10.0.0.0/30"),
        ("10.0.0.0/31", 0, "1/0 allocated from 10.0.0.0/31"),
        ("10.0.0.0/32", 0, "1/0 allocated from 10.0.0.0/32"),
        (
            "fd00::/64",
            (1 << 64) - 2,
            "1/18446744073709551614 allocated from fd00::/64",
        ),
        ("fd00::/128", 0, "1/0 allocated from fd00::/128"),
    ];
    for (cidr, cap, status) in cases {
        let mut a = HostScopeAllocator::new(net(cidr), "default");
        assert_eq!(a.capacity(), cap, "{cidr}");
        a.allocate_next(&mut seq(&[0])).unwrap();
        assert_eq!(a.status(), status, "{cidr}");
        assert_eq!(a.allocated().count(), 1, "{cidr}");
    }
}

#[test]
fn fills_a_65k_window_exactly_once_each() {
    let mut a = HostScopeAllocator::new(net("fd00:1::/64"), "default");
    let mut rng = fastrand::Rng::with_seed(7);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..65534 {
        let got = a.allocate_next(&mut rng).unwrap().ip;
        assert!(seen.insert(got), "{got} handed out twice");
    }
    assert_eq!(
        a.allocate_next(&mut rng).unwrap_err().to_string(),
        "range is full"
    );
    assert_eq!(seen.first(), Some(&ip("fd00:1::1")));
    assert_eq!(seen.last(), Some(&ip("fd00:1::fffe")));
    assert_eq!(a.allocated().count(), 65534);
}
