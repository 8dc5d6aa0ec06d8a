//! The facade's errors keep their cause: the allocator's (or the pool selection's) typed error
//! is the source, and the error chain reads as Cilium's text always did.

use std::error::Error as _;

use super::*;
use crate::{
    error::chain,
    ipam::{
        crdalloc::CrdError, hostscope::HostScopeError, multipool::MultiPoolError,
        selection::SelectionError,
    },
};

/// Allocate for `owner` until it fails; the error.
fn exhaust(m: &mut IpamManager, pools: &[PoolInput]) -> IpamError {
    let mut rng = fastrand::Rng::with_seed(7);
    let now = Instant::now();
    for n in 0..1024 {
        if let Err(e) = m.allocate(&format!("owner-{n}"), &NoObjects, pools, &mut rng, now) {
            return e;
        }
    }
    panic!("never exhausted");
}

/// The allocator's error behind `error`, found through [`std::error::Error::source`].
fn allocator_source(error: &IpamError) -> &AllocatorError {
    let source = error.source().expect("a source");
    source
        .downcast_ref::<AllocatorError>()
        .unwrap_or_else(|| panic!("the source is not the allocator's error: {source:?}"))
}

#[test]
fn an_exhausted_multi_pool_keeps_the_allocators_error() {
    let mut m = IpamManager::new(config(IpamMode::MultiPool, false)).expect("manager");
    m.observe_node(Some(&multi_node(&["10.0.0.1/32"])));
    let err = exhaust(&mut m, &[pool("default", false)]);
    assert!(
        matches!(
            allocator_source(&err),
            AllocatorError::MultiPool(MultiPoolError::Exhausted)
        ),
        "{err:?}"
    );
    assert_eq!(
        chain(&err),
        "pool \"default\" (ipv4, 1 addresses) is exhausted: all CIDR ranges are exhausted"
    );
}

#[test]
fn an_exhausted_crd_pool_keeps_the_allocators_error() {
    let mut m = IpamManager::new(config(IpamMode::Crd, false)).expect("manager");
    m.observe_node(Some(&crd_node(&["10.0.0.5"])));
    let err = exhaust(&mut m, &[]);
    let AllocatorError::Crd(crd @ (CrdError::Exhausted { .. } | CrdError::ExhaustedCrd { .. })) =
        allocator_source(&err)
    else {
        panic!("not the CRD allocator's exhaustion: {err:?}");
    };
    assert_eq!(
        chain(&err),
        format!("pool \"spec.ipam.pool\" (ipv4, 1 addresses) is exhausted: {crd}")
    );
}

#[test]
fn an_exhausted_host_scope_range_keeps_the_allocators_error() {
    let mut m = IpamManager::new(config(IpamMode::ClusterPool, false)).expect("manager");
    m.observe_node(Some(&host_scope_node("10.4.0.0/30")));
    let err = exhaust(&mut m, &[]);
    let AllocatorError::HostScope(range @ HostScopeError::Full { .. }) = allocator_source(&err)
    else {
        panic!("not the range's exhaustion: {err:?}");
    };
    assert!(
        chain(&err).starts_with("pool \"default\" (ipv4, ")
            && chain(&err).ends_with(&format!("addresses) is exhausted: {range}")),
        "{}",
        chain(&err)
    );
}

#[test]
fn a_failed_pool_selection_keeps_the_selection_error() {
    let mut m = IpamManager::new(config(IpamMode::MultiPool, false)).expect("manager");
    m.observe_node(Some(&multi_node(&["10.0.0.0/24"])));
    let mut rng = fastrand::Rng::with_seed(7);
    let err = m
        .allocate(
            "web/a",
            &NoObjects,
            &[pool("default", false)],
            &mut rng,
            Instant::now(),
        )
        .expect_err("no such pod");
    let source = err.source().expect("a source");
    assert!(
        matches!(
            source.downcast_ref::<SelectionError>(),
            Some(SelectionError::PodNotFound { .. })
        ),
        "{source:?}"
    );
    assert_eq!(
        chain(&err),
        "unable to determine IPAM pool for owner \"web/a\": resource Pod \"web/a\" not found"
    );
}

#[test]
fn an_unrestorable_address_keeps_the_allocators_refusal() {
    let mut m = IpamManager::new(config(IpamMode::ClusterPool, false)).expect("manager");
    m.observe_node(Some(&host_scope_node("10.4.0.0/24")));
    let err = m
        .restore(
            "10.9.0.1".parse().expect("ip"),
            "web/a",
            "default",
            Instant::now(),
        )
        .expect_err("out of range");
    assert!(
        matches!(
            &err,
            IpamError::Unrestorable {
                source: AllocatorError::HostScope(_)
            }
        ),
        "{err:?}"
    );
}
