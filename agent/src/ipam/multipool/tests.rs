//! Multi-pool tests: shared helpers; one file per concern.

mod alloc;
mod demand;
mod update;
mod writeback;

use std::{
    net::IpAddr,
    time::{Duration, Instant},
};

use super::*;
use crate::ipam::testing::{Seq, seq};

fn zero() -> Seq {
    seq(&[])
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|s| net(s)).collect()
}

/// An allocated entry without first/last IP.
fn entry(pool: &str, cidrs: &[&str]) -> IpamPoolAllocation {
    IpamPoolAllocation {
        pool: pool.to_owned(),
        allow_first_ip: false,
        allow_last_ip: false,
        cidrs: nets(cidrs),
    }
}

fn config(ipv4: bool, ipv6: bool, pre: &[(&str, i32)]) -> MultiPoolConfig {
    MultiPoolConfig::multi_pool(
        ipv4,
        ipv6,
        pre.iter().map(|&(k, v)| (k.to_owned(), v)).collect(),
    )
}

/// A dual-stack manager with no pre-allocation.
fn manager() -> MultiPoolManager {
    MultiPoolManager::new(config(true, true, &[]))
}

/// Allocates from `pool` with no masquerade skip at `t0()`.
fn next(
    m: &mut MultiPoolManager,
    owner: &str,
    pool: &str,
    family: Family,
) -> Result<IpAddr, MultiPoolError> {
    m.allocate_next(
        owner,
        pool,
        family,
        &never_skip_masquerade,
        &mut zero(),
        t0(),
    )
    .map(|a| a.ip)
}

/// The CIDRs of `pool`/`family` in allocation order, with their removed mark.
fn order(m: &MultiPoolManager, pool: &str, family: Family) -> Vec<(IpNet, bool)> {
    m.cidr_pool(pool, family)
        .map(CidrPool::cidrs_in_order)
        .unwrap_or_default()
}

/// A fixed base instant; tests only add durations to it.
fn t0() -> Instant {
    use std::sync::OnceLock;
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn at(secs: u64) -> Instant {
    t0() + Duration::from_secs(secs)
}
