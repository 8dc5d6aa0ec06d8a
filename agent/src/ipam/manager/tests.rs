//! The facade's own rules: family order and rollback, readiness per mode, the per-pool
//! masquerade decision, what each mode writes back, and exhaustion errors naming the pool;
//! `errors`: every error keeps its typed cause.

use std::time::Instant;

use super::*;
use crate::crd::{
    ipam::{AllocationIp, IpamPoolAllocation, IpamPoolSpec},
    node::IpamSpec,
    pool::CiliumPodIPPool,
};
use crate::ipam::input::Labelled;

struct NoObjects;

impl ObjectLookup for NoObjects {
    fn pod(&self, _: &str, _: &str) -> Option<Labelled<'_>> {
        None
    }
    fn namespace(&self, _: &str) -> Option<Labelled<'_>> {
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
        bypass_ip_availability_upon_restore: false,
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

/// A node of a host-scope mode (cluster-pool, kubernetes) with one pod CIDR.
fn host_scope_node(cidr: &str) -> CiliumNode {
    let mut node = CiliumNode::new("n1");
    node.spec.ipam = Some(IpamSpec {
        pod_cidrs: vec![cidr.parse().expect("cidr")],
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

fn pool(name: &str, skip: bool) -> PoolInput {
    let annotations = if skip {
        "\n  annotations: {ipam.cilium.io/skip-masquerade: \"true\"}"
    } else {
        ""
    };
    let pool: CiliumPodIPPool = serde_norway::from_str(&format!(
        "apiVersion: cilium.io/v2alpha1\nkind: CiliumPodIPPool\nmetadata:\n  name: {name}{annotations}\nspec: {{}}\n"
    ))
    .expect("pool");
    PoolInput::from(&pool)
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
    let usage = m.usage(now);
    let v6 = usage
        .pools
        .iter()
        .find(|p| p.pool == "default" && p.family == Family::V6)
        .expect("usage");
    assert_eq!(v6.used, 1, "only router's IPv6 address is in use");
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

#[test]
fn usage_of_a_host_scope_node_reads_like_cilium_status() {
    let mut m = IpamManager::new(config(IpamMode::ClusterPool, false)).expect("manager");
    m.observe_node(Some(&host_scope_node("10.4.0.0/24")));
    let mut rng = fastrand::Rng::with_seed(5);
    let now = Instant::now();
    for owner in ["router", "default/a", "default/b"] {
        m.allocate(owner, &NoObjects, &[], &mut rng, now)
            .expect("allocate");
    }
    let usage = m.usage(now);
    assert_eq!(usage.status, "IPv4: 3/254 allocated from 10.4.0.0/24");
    assert_eq!(
        usage.pools,
        [PoolStat {
            pool: "default".into(),
            family: Family::V4,
            capacity: 254,
            used: 3,
            cidr: Some("10.4.0.0/24".parse().expect("cidr")),
            cidrs: 1,
        }]
    );
    assert_eq!(
        (usage.capacity(), usage.used(), usage.available()),
        (254, 3, 251)
    );
    assert_eq!(usage.needed, 0, "host-scope never asks for more");
}

#[test]
fn usage_of_multi_pool_counts_pools_and_what_the_node_still_needs() {
    let mut m = IpamManager::new(config(IpamMode::MultiPool, false)).expect("manager");
    // A /30 holds 2 usable addresses (network and broadcast are reserved); with 1 in use and
    // pre-allocation default=8 the node asks for neededIPCeil(1, 8) = 16: 14 more than it holds.
    m.observe_node(Some(&multi_node(&["10.0.0.0/30"])));
    let mut rng = fastrand::Rng::with_seed(6);
    let now = Instant::now();
    m.allocate(
        "router",
        &NoObjects,
        &[pool("default", false)],
        &mut rng,
        now,
    )
    .expect("allocate");
    let usage = m.usage(now);
    assert_eq!(usage.status, "1 IPAM pool(s) available");
    let default = &usage.pools[0];
    assert_eq!(
        (
            default.pool.as_str(),
            default.family,
            default.used,
            default.cidrs
        ),
        ("default", Family::V4, 1, 1)
    );
    assert_eq!(default.capacity, 2);
    assert_eq!(usage.needed, 14, "demand 16 against 2 held");
}

#[test]
fn usage_of_crd_mode_and_delegated_plugin() {
    let mut crd = IpamManager::new(config(IpamMode::Crd, false)).expect("manager");
    crd.observe_node(Some(&crd_node(&["10.1.0.5", "10.1.0.6"])));
    let usage = crd.usage(Instant::now());
    assert_eq!(usage.status, "IPv4: 0/2 allocated");
    assert_eq!((usage.capacity(), usage.used()), (2, 0));

    let mut none = IpamManager::new(config(IpamMode::DelegatedPlugin, false)).expect("manager");
    let usage = none.usage(Instant::now());
    assert_eq!(usage.status, "delegated to plugin");
    assert!(usage.pools.is_empty());
}

/// `node` asking for a static IP with `tags`, and the operator's answer `assigned` (empty: none
/// yet).
fn with_static_ip(mut node: CiliumNode, tags: &[(&str, &str)], assigned: &str) -> CiliumNode {
    let ipam = node.spec.ipam.get_or_insert_with(IpamSpec::default);
    ipam.static_ip_tags = tags
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    node.status
        .get_or_insert_with(Default::default)
        .ipam
        .get_or_insert_with(Default::default)
        .assigned_static_ip = assigned.to_owned();
    node
}

#[test]
fn a_requested_static_ip_holds_readiness_until_the_operator_assigns_it() {
    let now = Instant::now();
    let mut rng = fastrand::Rng::with_seed(7);
    let tags = [("pool", "egress"), ("env", "prod")];
    let pool = ["10.1.0.5", "10.1.0.6"];
    for mode in [IpamMode::Azure, IpamMode::Crd, IpamMode::AlibabaCloud] {
        let mut m = IpamManager::new(config(mode, false)).expect("manager");
        m.observe_node(Some(&with_static_ip(crd_node(&pool), &tags, "")));
        let err = m.ready().expect_err("static IP not assigned yet");
        assert!(matches!(err, IpamError::NotReady { .. }), "{mode}: {err}");
        assert_eq!(
            err.to_string(),
            "Waiting for the operator to assign a static IP (static-ip-tags env=prod,pool=egress): \
             status.ipam.assigned-static-ip is empty",
            "{mode}"
        );
        let err = m
            .allocate("default/a", &NoObjects, &[], &mut rng, now)
            .expect_err("no pod is served meanwhile");
        assert!(matches!(err, IpamError::NotReady { .. }), "{mode}: {err}");

        m.observe_node(Some(&with_static_ip(crd_node(&pool), &tags, "20.1.2.3")));
        m.ready().expect("assigned");
        m.allocate("default/a", &NoObjects, &[], &mut rng, now)
            .expect("served once assigned");
    }
}

#[test]
fn the_static_ip_wait_applies_to_the_multi_pool_manager_too() {
    let tags = [("pool", "egress")];
    for mode in [IpamMode::MultiPool, IpamMode::Eni] {
        let mut m = IpamManager::new(config(mode, false)).expect("manager");
        m.observe_node(Some(&with_static_ip(
            multi_node(&["10.0.0.0/28"]),
            &tags,
            "",
        )));
        let err = m.ready().expect_err("static IP not assigned yet");
        assert!(
            err.to_string().contains("assign a static IP"),
            "{mode}: {err}"
        );
        m.observe_node(Some(&with_static_ip(
            multi_node(&["10.0.0.0/28"]),
            &tags,
            "2001:db8::7",
        )));
        m.ready().expect("assigned (IPv6 is an IP too)");
    }
}

#[test]
fn without_static_ip_tags_an_assigned_value_or_none_changes_nothing() {
    for assigned in ["", "20.1.2.3"] {
        let mut m = IpamManager::new(config(IpamMode::Azure, false)).expect("manager");
        m.observe_node(Some(&with_static_ip(
            crd_node(&["10.1.0.5"]),
            &[],
            assigned,
        )));
        m.ready().expect("no static IP requested");
    }
    // Host-scope modes never wait for one (Cilium checks in the CRD and multi-pool allocators).
    let mut m = IpamManager::new(config(IpamMode::ClusterPool, false)).expect("manager");
    let mut node = with_static_ip(CiliumNode::new("n1"), &[("pool", "egress")], "");
    node.spec
        .ipam
        .get_or_insert_with(IpamSpec::default)
        .pod_cidrs = vec!["10.2.0.0/24".parse().expect("cidr")];
    m.observe_node(Some(&node));
    m.ready().expect("cluster-pool ignores static-ip-tags");
}

#[test]
fn a_legacy_resource_id_ends_the_wait_as_in_cilium() {
    // Cilium's agent waits for a non-empty value only; an Azure 1.19 operator wrote the public
    // IP's resource ID, which today's operator later resolves to the address.
    let id =
        "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/publicIPAddresses/ip-1";
    let mut m = IpamManager::new(config(IpamMode::Azure, false)).expect("manager");
    m.observe_node(Some(&with_static_ip(
        crd_node(&["10.1.0.5"]),
        &[("pool", "egress")],
        id,
    )));
    m.ready().expect("a non-empty value is an assignment");
}

#[test]
fn not_ready_names_the_pool_and_family_it_waits_for() {
    // Issue 16, finding 5: "Waiting for cidr pool to become available" named neither.
    let mut cfg = config(IpamMode::MultiPool, true);
    cfg.pre_allocation = "default=8,blue=4".into();
    let mut m = IpamManager::new(cfg).expect("manager");
    let mut node = multi_node(&["10.0.0.0/24", "fd00::/120"]);
    node.spec
        .ipam
        .as_mut()
        .expect("ipam")
        .pools_mut()
        .allocated
        .push(IpamPoolAllocation {
            pool: "blue".into(),
            cidrs: vec!["10.1.0.0/24".parse().expect("cidr")],
            ..IpamPoolAllocation::default()
        });
    m.observe_node(Some(&node));
    let reason = m
        .ready()
        .expect_err("pool blue has no IPv6 CIDR")
        .to_string();
    assert!(
        reason.starts_with("Waiting for cidr pool to become available"),
        "Cilium's text stays first: {reason}"
    );
    assert!(
        reason.contains("pool blue has no IPv6 CIDR"),
        "the pool and family are named: {reason}"
    );
    assert!(
        !reason.contains("pool default"),
        "default is ready: {reason}"
    );
}

#[test]
fn a_failed_restore_says_whether_to_wait_or_give_up() {
    let now = Instant::now();
    let ip = |s: &str| -> IpAddr { s.parse().expect("ip") };
    let waits = |e: &IpamError| matches!(e, IpamError::NotReady { .. });
    let lost = |e: &IpamError| matches!(e, IpamError::Unrestorable { .. });

    // cluster-pool: no pod CIDR yet waits; an address outside the pod CIDR is lost.
    let mut m = IpamManager::new(config(IpamMode::ClusterPool, false)).expect("manager");
    let err = m
        .restore(ip("10.2.0.5"), "a", "default", now)
        .expect_err("no CIDR");
    assert!(waits(&err), "{err}");
    m.observe_node(Some(&host_scope_node("10.3.0.0/24")));
    let err = m
        .restore(ip("10.2.0.5"), "a", "default", now)
        .expect_err("moved");
    assert!(lost(&err), "{err}");

    // crd: no spec.ipam.pool yet waits; an address that left it is lost …
    let mut m = IpamManager::new(config(IpamMode::Crd, false)).expect("manager");
    m.observe_node(Some(&CiliumNode::new("n1")));
    let err = m
        .restore(ip("10.0.0.9"), "a", "default", now)
        .expect_err("no pool");
    assert!(waits(&err), "{err}");
    m.observe_node(Some(&crd_node(&["10.0.0.1"])));
    let err = m
        .restore_endpoint(ip("10.0.0.9"), "a", "default", now)
        .expect_err("left");
    assert!(lost(&err), "{err}");

    // … unless bypass-ip-availability-upon-restore holds it anyway (and reports it used).
    let mut m = IpamManager::new(IpamConfig {
        bypass_ip_availability_upon_restore: true,
        ..config(IpamMode::Crd, false)
    })
    .expect("manager");
    m.observe_node(Some(&crd_node(&["10.0.0.1"])));
    assert_eq!(
        m.restore_endpoint(ip("10.0.0.1"), "a", "default", now).ok(),
        Some(false)
    );
    assert_eq!(
        m.restore_endpoint(ip("10.0.0.9"), "b", "default", now).ok(),
        Some(true)
    );
    let used = m.node_write(None, now).used.expect("crd writes used");
    assert_eq!(used["10.0.0.9"].owner, "b", "{used:?}");
    let err = m
        .restore(ip("10.0.0.8"), "router", "default", now)
        .expect_err("no bypass");
    assert!(lost(&err), "the router is never bypassed: {err}");

    // multi-pool: a pool not known locally waits (the daemon tells a deleted one apart).
    let mut m = IpamManager::new(config(IpamMode::MultiPool, false)).expect("manager");
    m.observe_node(Some(&multi_node(&["10.0.0.0/28"])));
    let err = m
        .restore(ip("10.9.0.1"), "a", "mars", now)
        .expect_err("unknown pool");
    assert!(waits(&err), "{err}");
    let err = m
        .restore(ip("10.9.0.1"), "a", "default", now)
        .expect_err("outside");
    assert!(lost(&err), "{err}");
}

mod errors;

/// A node of `eni` mode whose status lists ENI 0 (excluded by `first-interface-index` 1) and
/// ENI 1 with two secondary addresses (the operator lists an ENI's primary address as `ip`
/// only, unless `use-primary-address`).
fn eni_node() -> CiliumNode {
    use crate::crd::eni::{AwsSubnet, Eni, EniSpec, EniStatus};
    let eni = |id: &str, number: i64, addresses: &[&str]| Eni {
        id: id.into(),
        number,
        ip: addresses.first().map(|a| a.parse().expect("ip")),
        addresses: addresses[1..]
            .iter()
            .map(|a| a.parse().expect("ip"))
            .collect(),
        subnet: Some(AwsSubnet {
            id: "subnet-1".into(),
            cidr: Some("10.5.0.0/24".parse().expect("cidr")),
            ..AwsSubnet::default()
        }),
        ..Eni::default()
    };
    let mut node = CiliumNode::new("n1");
    node.spec.eni = Some(EniSpec {
        first_interface_index: Some(1),
        ..EniSpec::default()
    });
    node.status.get_or_insert_with(Default::default).eni = Some(EniStatus {
        enis: [
            eni("eni-0", 0, &["10.5.0.10"]),
            eni("eni-1", 1, &["10.5.0.20", "10.5.0.21", "10.5.0.22"]),
        ]
        .into_iter()
        .map(|e| (e.id.clone(), e))
        .collect(),
        ..EniStatus::default()
    });
    node
}

#[test]
fn eni_mode_allocates_with_no_ciliumpodippool_and_never_skips_masquerade() {
    let now = Instant::now();
    let mut rng = fastrand::Rng::with_seed(4);
    // Cilium's ENI mode has no CiliumPodIPPool: its one pool comes from the ENIs, and
    // skip-masquerade is always false, even where a pool of that name is annotated.
    for pools in [Vec::new(), vec![pool("default", true)]] {
        let mut m = IpamManager::new(config(IpamMode::Eni, false)).expect("manager");
        m.observe_node(Some(&eni_node()));
        m.ready().expect("the ENI addresses are the pool");
        let a = m
            .allocate("default/a", &NoObjects, &pools, &mut rng, now)
            .expect("an address of ENI 1");
        let ip = a[0].ip.to_string();
        assert!(
            ["10.5.0.21", "10.5.0.22"].contains(&ip.as_str()),
            "{ip}: a secondary address of ENI 1"
        );
        assert!(!a[0].skip_masquerade, "{pools:?}");
    }
}
