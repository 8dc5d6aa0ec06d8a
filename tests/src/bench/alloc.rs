//! Allocator throughput behind `cargo xtask bench ipam alloc`: every address of a /16 handed
//! out and then released again, by the host-scope allocator, by the multi-pool manager, and by
//! the simplest correct allocator (a `Vec<bool>` with a linear first-free scan) as the baseline,
//! all in process; printed as ratios to the baseline.

use std::{
    hint::black_box,
    net::IpAddr,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, anyhow, ensure};
use weft_agent::{
    crd::ipam::IpamPoolAllocation,
    ipam::{
        Family, Random,
        hostscope::HostScopeAllocator,
        multipool::{MultiPoolConfig, MultiPoolManager, never_skip_masquerade},
        prealloc::PreAllocMap,
    },
};

/// The pool of the allocator benchmark.
const POOL: &str = "10.100.0.0/16";
/// Its network address, as an integer.
const POOL_BASE: u32 = 0x0a64_0000;
/// Usable addresses of the /16 (network and broadcast reserved).
const USABLE: u32 = 65_534;
/// Rounds of the allocator benchmark (medians are shown).
const ROUNDS: usize = 3;

/// Time to fill the pool and to drain it again.
#[derive(Debug, Clone, Copy)]
struct Phases {
    alloc: Duration,
    release: Duration,
}

/// One allocator benchmark: fill and drain the pool once.
type AllocBench = fn(&mut WyRand) -> Result<Phases>;

/// The allocators measured, baseline first.
const ALLOCATORS: [(&str, AllocBench); 3] = [
    ("Vec<bool> first-free (baseline)", baseline),
    ("hostscope (random free)", hostscope),
    ("multi-pool manager (random free)", multipool),
];

/// Fill a /16 and empty it again with each allocator, `ROUNDS` times (rotating the order),
/// and print allocations and releases per second, medians, against the baseline.
///
/// # Errors
/// An allocator that fails, hands out an address twice or outside the pool, or does not
/// end up full (then empty).
pub fn run_alloc() -> Result<()> {
    let mut rng = WyRand(0x7765_6674_6265_6e63);
    let mut samples: [Vec<Phases>; 3] = Default::default();
    for round in 0..ROUNDS {
        eprintln!("bench ipam: allocators, round {}/{ROUNDS}", round + 1);
        for k in 0..ALLOCATORS.len() {
            let a = (round + k) % ALLOCATORS.len();
            let (name, bench) = ALLOCATORS[a];
            samples[a].push(bench(&mut rng).with_context(|| name.to_owned())?);
        }
    }
    let medians = samples.map(|s| {
        let alloc = median(s.iter().map(|p| p.alloc));
        let release = median(s.iter().map(|p| p.release));
        Phases { alloc, release }
    });
    let rate = |d: Duration| f64::from(USABLE) / d.as_secs_f64();
    println!(
        "IPAM allocators: allocate all {USABLE} addresses of {POOL}, then release all; \
         median of {ROUNDS} rounds"
    );
    println!(
        "{:<34}{:>14}{:>14}{:>16}{:>18}",
        "allocator", "alloc/s", "release/s", "alloc vs base", "release vs base"
    );
    let base = medians[0];
    for ((name, _), m) in ALLOCATORS.iter().zip(medians) {
        println!(
            "{name:<34}{:>14.0}{:>14.0}{:>15.2}x{:>17.2}x",
            rate(m.alloc),
            rate(m.release),
            rate(m.alloc) / rate(base.alloc),
            rate(m.release) / rate(base.release)
        );
    }
    println!("ratios: allocator / baseline throughput; higher is better");
    println!(
        "each allocator handed out {USABLE} distinct addresses of {POOL}, was full, then empty"
    );
    Ok(())
}

fn median(values: impl Iterator<Item = Duration>) -> Duration {
    let mut v: Vec<Duration> = values.collect();
    v.sort_unstable();
    v[v.len() / 2]
}

/// The simplest correct allocator: one `bool` per address, first free one from the start.
fn baseline(_rng: &mut WyRand) -> Result<Phases> {
    let mut slots = vec![false; usize::try_from(USABLE)?];
    let mut got = Vec::with_capacity(slots.len());
    let start = Instant::now();
    for _ in 0..USABLE {
        let i = slots
            .iter()
            .position(|used| !used)
            .context("full too early")?;
        slots[i] = true;
        got.push(POOL_BASE + 1 + u32::try_from(i)?);
    }
    let alloc = start.elapsed();
    ensure!(slots.iter().all(|used| *used), "not full after {USABLE}");
    let start = Instant::now();
    for ip in &got {
        slots[usize::try_from(ip - POOL_BASE - 1)?] = false;
    }
    let release = start.elapsed();
    ensure!(!slots.iter().any(|used| *used), "not empty after release");
    check_all_distinct(black_box(got))?;
    Ok(Phases { alloc, release })
}

/// `weft_agent::ipam::hostscope::HostScopeAllocator` over the /16.
fn hostscope(rng: &mut WyRand) -> Result<Phases> {
    let mut allocator = HostScopeAllocator::new(POOL.parse()?, "default");
    let mut got = Vec::with_capacity(usize::try_from(USABLE)?);
    let start = Instant::now();
    for _ in 0..USABLE {
        got.push(allocator.allocate_next(rng)?.ip);
    }
    let alloc = start.elapsed();
    ensure!(
        allocator.allocate_next(rng).is_err(),
        "not full after {USABLE}"
    );
    let start = Instant::now();
    for ip in &got {
        allocator.release(*ip);
    }
    let release = start.elapsed();
    ensure!(allocator.used() == 0, "{} still used", allocator.used());
    check_all_distinct(to_u32(&got)?)?;
    Ok(Phases { alloc, release })
}

/// `weft_agent::ipam::multipool::MultiPoolManager` with one pool `default` holding the /16.
fn multipool(rng: &mut WyRand) -> Result<Phases> {
    let pre_alloc = PreAllocMap::from([("default".to_owned(), 8)]);
    let mut manager = MultiPoolManager::new(MultiPoolConfig::multi_pool(true, false, pre_alloc));
    let pool = IpamPoolAllocation {
        pool: "default".to_owned(),
        cidrs: vec![POOL.parse()?],
        ..IpamPoolAllocation::default()
    };
    manager.upsert_node(&[pool], 0);
    let mut got = Vec::with_capacity(usize::try_from(USABLE)?);
    let now = Instant::now();
    let start = Instant::now();
    for _ in 0..USABLE {
        let a = manager.allocate_next(
            "bench",
            "default",
            Family::V4,
            &never_skip_masquerade,
            rng,
            now,
        )?;
        got.push(a.ip);
    }
    let alloc = start.elapsed();
    let more = manager.allocate_next(
        "bench",
        "default",
        Family::V4,
        &never_skip_masquerade,
        rng,
        now,
    );
    ensure!(more.is_err(), "not full after {USABLE}");
    let start = Instant::now();
    for ip in &got {
        manager.release_ip(*ip, "default")?;
    }
    let release = start.elapsed();
    let used = manager.usage("default", Family::V4).map_or(0, |u| u.used);
    ensure!(used == 0, "{used} still used");
    check_all_distinct(to_u32(&got)?)?;
    Ok(Phases { alloc, release })
}

fn to_u32(ips: &[IpAddr]) -> Result<Vec<u32>> {
    ips.iter()
        .map(|ip| match ip {
            IpAddr::V4(v4) => Ok(u32::from(*v4)),
            IpAddr::V6(v6) => Err(anyhow!("IPv6 address {v6} from an IPv4 pool")),
        })
        .collect()
}

/// That `addrs` are exactly the usable addresses of the pool (distinct, all inside).
fn check_all_distinct(mut addrs: Vec<u32>) -> Result<()> {
    addrs.sort_unstable();
    addrs.dedup();
    let range = POOL_BASE + 1..=POOL_BASE + USABLE;
    ensure!(
        u32::try_from(addrs.len()) == Ok(USABLE),
        "{} distinct addresses, expected {USABLE}",
        addrs.len()
    );
    ensure!(
        addrs.first().is_some_and(|a| range.contains(a))
            && addrs.last().is_some_and(|a| range.contains(a)),
        "addresses outside the usable part of {POOL}"
    );
    Ok(())
}

/// wyrand, the generator behind `fastrand::Rng` (which implements [`Random`] in the agent;
/// this crate does not depend on fastrand), seeded for repeatable runs.
#[derive(Debug)]
struct WyRand(u64);

impl Random for WyRand {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "taking the low and high halves of a 128-bit product"
    )]
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        let x = (t >> 64) as u64 ^ t as u64;
        // Lemire's multiply-high reduction (the bias for n = 65534 is ~2^-48).
        ((u128::from(x) * u128::from(n)) >> 64) as u64
    }
}
