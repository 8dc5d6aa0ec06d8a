//! The facade's own rules: family order and rollback, readiness per mode, the per-pool
//! masquerade decision, what each mode writes back, and exhaustion errors naming the pool.

use std::{borrow::Cow, time::Instant};

use super::*;
use crate::crd::{
    ipam::{AllocationIp, IpamPoolAllocation, IpamPoolSpec},
    meta::{Namespace, Pod},
    node::IpamSpec,
};

struct NoObjects;

impl ObjectLookup for NoObjects {
    fn pod(&self, _: &str, _: &str) -> Option<Cow<'_, Pod>> {
        None
    }
    fn namespace(&self, _: &str) -> Option<Cow<'_, Namespace>> {
        None
    }
}

fn config(mode: IpamMode, ipv6: bool) -> IpamConfig {
    IpamConfig {
        mode,
        default_pool: "default".into(),
        pre_allocation: String::new(),
        ipv4: true,
        ipv6,
        health_checking: false,
        only_masquerade_default_pool: false,
    }
}

fn multi_node(cidrs: &[&str]) -> CiliumNode {
    let mut node = CiliumNode::new("n1");
    node.spec.ipam = Some(IpamSpec {
        pools: Some(IpamPoolSpec {
            requested: Vec::new(),
            allocated: vec![IpamPoolAllocation {
                pool: "default".into(),
                cidrs: cidrs.iter().map(|c| c.parse().expect("cidr")).collect(),
                ..IpamPoolAllocation::default()
            }],
        }),
        ..IpamSpec::default()
    });
    node
}

fn crd_node(ips: &[&str]) -> CiliumNode {
    let mut node = CiliumNode::new("n1");
    node.spec.ipam = Some(IpamSpec {
        pool: ips
            .iter()
            .map(|ip| {
                (
                    (*ip).to_owned(),
                    AllocationIp {
                        owner: String::new(),
                        resource: "eni-1".into(),
                    },
                )
            })
            .collect(),
        ..IpamSpec::default()
    });
    node
}

fn pool(name: &str, skip: bool) -> CiliumPodIPPool {
    let annotations = if skip {
        "\n  annotations: {ipam.cilium.io/skip-masquerade: \"true\"}"
    } else {
        ""
    };
    serde_norway::from_str(&format!(
        "apiVersion: cilium.io/v2alpha1\nkind: CiliumPodIPPool\nmetadata:\n  name: {name}{annotations}\nspec: {{}}\n"
    ))
    .expect("pool")
}

#[test]
fn not_ready_until_the_node_is_seen() {
    let m = IpamManager::new(config(IpamMode::MultiPool, false)).expect("manager");
    let err = m.ready().expect_err("no node yet");
    assert!(matches!(err, IpamError::NotReady { .. }), "{err}");
}

#[test]
fn ipv6_first_and_a_failing_ipv4_rolls_the_ipv6_back() {
    let mut m = IpamManager::new(config(IpamMode::MultiPool, true)).expect("manager");
    // IPv6 has room for several addresses, IPv4 (a /32) exactly one.
    m.observe_node(Some(&multi_node(&["10.0.0.1/32", "fd00::/120"])));
    let mut rng = fastrand::Rng::with_seed(1);
    let now = Instant::now();
    let pools = [pool("default", false)];
    let first = m
        .allocate("router", &NoObjects, &pools, &mut rng, now)
        .expect("router");
    assert_eq!(
        first.iter().map(|a| a.ip.is_ipv6()).collect::<Vec<_>>(),
        [true, false],
        "IPv6 first"
    );
    let err = m
        .allocate("router2", &NoObjects, &pools, &mut rng, now)
        .expect_err("IPv4 exhausted");
    assert!(
        err.to_string()
            .contains("\"default\" (ipv4, 1 addresses) is exhausted"),
        "{err}"
    );
    // The IPv6 address taken for router2 was given back: the pool still has 255 free.
    let usage = match &m.backend {
        Backend::Multi(multi) => multi.usage("default", Family::V6).expect("usage"),
        _ => unreachable!("multi-pool backend"),
    };
    assert_eq!(usage.used, 1, "only router's IPv6 address is in use");
}

#[test]
fn masquerade_skip_follows_the_pool_annotation_and_only_default_flag() {
    let now = Instant::now();
    let mut rng = fastrand::Rng::with_seed(2);
    for (only_default, annotated, skip) in [
        (false, false, false),
        (false, true, true),
        (true, false, false),
    ] {
        let mut c = config(IpamMode::MultiPool, false);
        c.only_masquerade_default_pool = only_default;
        let mut m = IpamManager::new(c).expect("manager");
        m.observe_node(Some(&multi_node(&["10.0.0.0/28"])));
        let a = m
            .allocate(
                "router",
                &NoObjects,
                &[pool("default", annotated)],
                &mut rng,
                now,
            )
            .expect("allocate");
        assert_eq!(
            a[0].skip_masquerade, skip,
            "only_default={only_default} annotated={annotated}"
        );
    }
    // A pool that is not in the store is an allocation error (Cilium's statedb wording).
    let mut m = IpamManager::new(config(IpamMode::MultiPool, false)).expect("manager");
    m.observe_node(Some(&multi_node(&["10.0.0.0/28"])));
    let err = m
        .allocate("router", &NoObjects, &[], &mut rng, now)
        .expect_err("unknown pool");
    assert!(
        err.to_string()
            .contains("IP pool 'default' not found in stateDB table"),
        "{err}"
    );
}

#[test]
fn crd_mode_writes_used_and_multi_pool_writes_the_spec() {
    let now = Instant::now();
    let mut rng = fastrand::Rng::with_seed(3);
    let mut crd = IpamManager::new(config(IpamMode::Crd, false)).expect("manager");
    let node = crd_node(&["10.1.0.5", "10.1.0.6"]);
    crd.observe_node(Some(&node));
    crd.ready()
        .expect("1 address required without health checking");
    let a = crd
        .allocate("default/a", &NoObjects, &[], &mut rng, now)
        .expect("allocate");
    let write = crd.node_write(Some(&node), now);
    let used = write.used.expect("used");
    assert_eq!(
        used[&a[0].ip.to_string()],
        AllocationIp {
            owner: "default/a".into(),
            resource: "eni-1".into()
        }
    );
    assert!(write.pools.is_none());

    let mut multi = IpamManager::new(config(IpamMode::MultiPool, false)).expect("manager");
    let node = multi_node(&["10.0.0.0/28"]);
    multi.observe_node(Some(&node));
    multi.restore_finished();
    let write = multi.node_write(Some(&node), now);
    let pools = write.pools.expect("requested appears");
    assert_eq!(pools.requested[0].pool, "default");
    assert_eq!(
        pools.requested[0].needed.ipv4_addrs, 8,
        "pre-allocation default=8"
    );
    assert!(write.used.is_none());
}

#[test]
fn delegated_plugin_allocates_nothing() {
    let mut m = IpamManager::new(config(IpamMode::DelegatedPlugin, false)).expect("manager");
    m.observe_node(Some(&CiliumNode::new("n1")));
    let err = m
        .allocate(
            "default/a",
            &NoObjects,
            &[],
            &mut fastrand::Rng::new(),
            Instant::now(),
        )
        .expect_err("delegated");
    assert_eq!(err.to_string(), "Operation not supported");
}
