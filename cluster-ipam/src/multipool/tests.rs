mod carve;
mod pools;
mod reserved;

use ipnet::IpNet;

use super::{Allocated, FamilySpec, PoolAllocator, PoolSpec, Requested};

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

#[expect(
    clippy::unnecessary_wraps,
    reason = "reads as the spec's optional family at call sites"
)]
fn family(cidrs: &[&str], mask_size: u8) -> Option<FamilySpec> {
    Some(FamilySpec {
        cidrs: cidrs.iter().map(|c| net(c)).collect(),
        mask_size,
    })
}

fn spec(ipv4: Option<FamilySpec>, ipv6: Option<FamilySpec>) -> PoolSpec {
    PoolSpec {
        ipv4,
        ipv6,
        ..PoolSpec::default()
    }
}

fn req(pool: &str, ipv4_addrs: u64, ipv6_addrs: u64) -> Requested {
    Requested {
        pool: pool.to_owned(),
        ipv4_addrs,
        ipv6_addrs,
    }
}

fn alloc(pool: &str, cidrs: &[&str]) -> Allocated {
    Allocated {
        pool: pool.to_owned(),
        cidrs: cidrs.iter().map(|c| (*c).to_owned()).collect(),
        ..Allocated::default()
    }
}

/// `allocated_pools` as `(pool, cidrs)`, flags left out.
fn view(allocator: &PoolAllocator, node: &str) -> Vec<(String, Vec<String>)> {
    allocator
        .allocated_pools(node)
        .into_iter()
        .map(|a| (a.pool, a.cidrs))
        .collect()
}

fn expect(entries: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    entries
        .iter()
        .map(|(pool, cidrs)| {
            (
                (*pool).to_owned(),
                cidrs.iter().map(|c| (*c).to_owned()).collect(),
            )
        })
        .collect()
}

/// A ready dual-stack allocator with these pools.
fn ready_with(pools: &[(&str, PoolSpec)]) -> PoolAllocator {
    let mut allocator = PoolAllocator::new(true, true);
    for (name, spec) in pools {
        allocator.upsert_pool(name, spec).unwrap();
    }
    allocator.restore_finished();
    allocator
}

/// Error texts of a failed run.
fn texts(result: Result<(), super::AllocateFailure>) -> Vec<String> {
    result
        .unwrap_err()
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}
