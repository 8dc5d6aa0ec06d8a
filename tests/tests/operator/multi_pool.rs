//! Multi-pool mode: blocks carved as `requested` grows and released when the node stops
//! listing them, a pool CIDR removed under a node (orphan, warning, re-adoption), immutable
//! pool fields, an unknown pool, v2 `reservedRanges`, and auto-created pools.

use std::{collections::BTreeMap, time::Duration};

use serde_json::{Value, json};

use super::{Cluster, wait_for};

const FLAGS: [&str; 3] = ["--leader-election=false", "--ipam", "multi-pool"];

fn pool(cluster: &Cluster, name: &str, ipv4: &Value) {
    cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumPodIPPool",
        "metadata": {"name": name},
        "spec": {"ipv4": ipv4},
    }));
}

/// An agent's demand: `(pool, ipv4 addresses)`, keeping `allocated` as it is.
fn request(cluster: &Cluster, node: &str, demand: &[(&str, u64)]) {
    let mut cn = cluster.cilium_node(node).unwrap_or_else(|| {
        json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": node}, "spec": {"ipam": {}}})
    });
    cn["spec"]["ipam"]["pools"]["requested"] = demand
        .iter()
        .map(|(p, n)| json!({"pool": p, "needed": {"ipv4-addrs": n}}))
        .collect();
    cluster.emu.put(cn);
}

/// `allocated` of a node: pool → CIDRs.
fn allocated(cluster: &Cluster, node: &str) -> BTreeMap<String, Vec<String>> {
    cluster
        .cilium_node(node)
        .map(|n| n["spec"]["ipam"]["pools"]["allocated"].clone())
        .and_then(|a| a.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e["pool"].as_str().unwrap_or_default().to_owned(),
                e["cidrs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.as_str().map(str::to_owned))
                    .collect(),
            )
        })
        .collect()
}

fn wait_allocated(cluster: &Cluster, node: &str, pool: &str, want: &[&str]) {
    wait_for(
        &format!("{node}'s {pool} blocks {want:?}"),
        Duration::from_secs(20),
        || {
            let got = allocated(cluster, node);
            if got.get(pool).map(Vec::as_slice).unwrap_or_default() == want {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        },
    );
}

#[test]
fn blocks_follow_the_demand() {
    let cluster = Cluster::start();
    // /28 blocks: 14 usable addresses each (first and last reserved).
    pool(
        &cluster,
        "default",
        &json!({"cidrs": ["10.30.0.0/24"], "maskSize": 28}),
    );
    request(&cluster, "n1", &[("default", 40)]);
    let op = cluster.operator(&FLAGS);
    wait_allocated(
        &cluster,
        "n1",
        "default",
        &["10.30.0.0/28", "10.30.0.16/28", "10.30.0.32/28"],
    );
    // Growing demand carves one more block.
    request(&cluster, "n1", &[("default", 50)]);
    wait_allocated(
        &cluster,
        "n1",
        "default",
        &[
            "10.30.0.0/28",
            "10.30.0.16/28",
            "10.30.0.32/28",
            "10.30.0.48/28",
        ],
    );
    // The agent gives two blocks back (it lists them no more, with less demand).
    let mut cn = cluster.cilium_node("n1").expect("n1");
    cn["spec"]["ipam"]["pools"]["requested"] =
        json!([{"pool": "default", "needed": {"ipv4-addrs": 20}}]);
    cn["spec"]["ipam"]["pools"]["allocated"] =
        json!([{"pool": "default", "cidrs": ["10.30.0.0/28", "10.30.0.16/28"]}]);
    cluster.emu.put(cn);
    // Released blocks go to the next node (the round robin wraps to them only once the rest
    // is used, so check the free count instead).
    wait_for("two blocks free again", Duration::from_secs(20), || {
        let free = op.metric(
            "weft_operator_ipam_pool_blocks{pool=\"default\",family=\"ipv4\",state=\"free\"}",
        );
        if free == Some(14.0) {
            Ok(())
        } else {
            Err(format!("{free:?}"))
        }
    });
    assert_eq!(
        allocated(&cluster, "n1")["default"],
        ["10.30.0.0/28", "10.30.0.16/28"]
    );
    // An unknown pool is an error naming it; the known one is still served.
    request(&cluster, "n2", &[("default", 10), ("nosuch", 10)]);
    wait_allocated(&cluster, "n2", "default", &["10.30.0.64/28"]);
    wait_for("n2's error", Duration::from_secs(20), || {
        let e = cluster.operator_error("n2");
        if e.contains("nosuch") { Ok(()) } else { Err(e) }
    });
}

#[test]
fn a_removed_cidr_leaves_an_orphan_that_comes_back() {
    let cluster = Cluster::start();
    pool(
        &cluster,
        "mars",
        &json!({"cidrs": ["10.40.0.0/27", "10.41.0.0/24"], "maskSize": 27}),
    );
    request(&cluster, "n1", &[("mars", 20)]);
    let mut op = cluster.operator(&FLAGS);
    wait_allocated(&cluster, "n1", "mars", &["10.40.0.0/27"]);
    // The CIDR is removed from the pool while n1 holds a block of it.
    pool(
        &cluster,
        "mars",
        &json!({"cidrs": ["10.41.0.0/24"], "maskSize": 27}),
    );
    op.wait_log(
        "CIDR from pool still in use by node",
        Duration::from_secs(20),
    );
    assert!(
        op.log().contains("cidr=10.40.0.0/27 pool=mars node=n1"),
        "{}",
        op.log()
    );
    // n1 keeps it; new demand comes from what is left in the pool, and (unlike Cilium) the
    // orphan's 30 addresses count towards the pool's demand: 40 addresses, one more block.
    request(&cluster, "n1", &[("mars", 40)]);
    wait_allocated(&cluster, "n1", "mars", &["10.40.0.0/27", "10.41.0.0/27"]);
    // Nobody else gets the orphan, even when the CIDR comes back.
    pool(
        &cluster,
        "mars",
        &json!({"cidrs": ["10.40.0.0/27", "10.41.0.0/24"], "maskSize": 27}),
    );
    op.wait_log(
        "CIDR from pool already in use by node, marking it as allocated",
        Duration::from_secs(20),
    );
    request(&cluster, "n2", &[("mars", 20)]);
    wait_allocated(&cluster, "n2", "mars", &["10.41.0.32/27"]);
    // Immutable fields: the change is refused, carving goes on with the old mask.
    pool(
        &cluster,
        "mars",
        &json!({"cidrs": ["10.40.0.0/27", "10.41.0.0/24"], "maskSize": 28}),
    );
    op.wait_log(
        "cannot change IPv4 mask size in existing pool",
        Duration::from_secs(20),
    );
    request(&cluster, "n3", &[("mars", 20)]);
    wait_allocated(&cluster, "n3", "mars", &["10.41.0.64/27"]);
}

#[test]
fn reserved_ranges_keep_new_blocks_out() {
    let cluster = Cluster::start();
    // n1 holds a block of the old CIDR from before the migration.
    pool(
        &cluster,
        "default",
        &json!({"cidrs": ["10.50.0.0/24"], "maskSize": 26}),
    );
    request(&cluster, "n1", &[("default", 60)]);
    let op = cluster.operator(&FLAGS);
    wait_allocated(&cluster, "n1", "default", &["10.50.0.0/26"]);
    let free = "weft_operator_ipam_pool_blocks{pool=\"default\",family=\"ipv4\",state=\"free\"}";
    let before = op.metric(free);
    // Migration: the old CIDR reserved, a new one added.
    pool(
        &cluster,
        "default",
        &json!({
            "cidrs": ["10.50.0.0/24", "10.60.0.0/24"], "maskSize": 26,
            "pool": [{"cidr": "10.50.0.0/24", "reservedRanges": [{"start": "10.50.0.0", "end": "10.50.0.255"}]}],
        }),
    );
    // n2 asks only once the operator took in the migration (its free blocks changed).
    wait_for(
        "the operator to see the new pool spec",
        Duration::from_secs(20),
        || {
            let now = op.metric(free);
            (now != before).then_some(()).ok_or(format!("{now:?}"))
        },
    );
    request(&cluster, "n2", &[("default", 100)]);
    wait_allocated(
        &cluster,
        "n2",
        "default",
        &["10.60.0.0/26", "10.60.0.64/26"],
    );
    // n1 keeps its old block and grows into the new CIDR only.
    request(&cluster, "n1", &[("default", 120)]);
    wait_allocated(
        &cluster,
        "n1",
        "default",
        &["10.50.0.0/26", "10.60.0.128/26"],
    );
}

#[test]
fn auto_created_pools_in_ciliums_format() {
    let cluster = Cluster::start();
    // An existing pool of that name is left as it is.
    pool(
        &cluster,
        "kept",
        &json!({"cidrs": ["10.70.0.0/24"], "maskSize": 26}),
    );
    let _op = cluster.operator(&[
        "--leader-election=false",
        "--ipam",
        "multi-pool",
        "--auto-create-cilium-pod-ip-pools",
        "default=ipv4-cidrs:10.80.0.0/16,10.81.0.0/16;ipv4-mask-size:24",
        "--auto-create-cilium-pod-ip-pools",
        "kept=ipv4-cidrs:10.90.0.0/16;ipv4-mask-size:24",
    ]);
    wait_for("the default pool", Duration::from_secs(20), || {
        cluster
            .emu
            .get("ciliumpodippools", None, "default")
            .map(|_| ())
            .ok_or_else(|| "missing".into())
    });
    let created = cluster
        .emu
        .get("ciliumpodippools", None, "default")
        .expect("default");
    assert_eq!(
        created["spec"]["ipv4"],
        json!({"cidrs": ["10.80.0.0/16", "10.81.0.0/16"], "maskSize": 24})
    );
    let kept = cluster
        .emu
        .get("ciliumpodippools", None, "kept")
        .expect("kept");
    assert_eq!(kept["spec"]["ipv4"]["cidrs"], json!(["10.70.0.0/24"]));
    request(&cluster, "n1", &[("default", 8)]);
    wait_allocated(&cluster, "n1", "default", &["10.80.0.0/24"]);
}

#[test]
fn an_auto_created_pool_the_allocator_refuses_stops_the_operator_before_creating_anything() {
    let cluster = Cluster::start();
    let mut op = cluster.operator(&[
        "--leader-election=false",
        "--ipam",
        "multi-pool",
        "--auto-create-cilium-pod-ip-pools",
        "good=ipv4-cidrs:10.80.0.0/16;ipv4-mask-size:24",
        "--auto-create-cilium-pod-ip-pools",
        "mars=ipv4-cidrs:10.81.0.0/16;ipv4-mask-size:8",
    ]);
    let code = op.wait_exit(Duration::from_secs(30));
    assert!(
        code.is_some_and(|c| c != 0),
        "the operator must stop (exit code {code:?}):\n{}",
        op.log()
    );
    let log = op.log();
    assert!(
        log.contains("auto-create-cilium-pod-ip-pools: pool \"mars\", ipv4-mask-size")
            && log.contains("at least /16"),
        "{log}"
    );
    assert_eq!(
        cluster.emu.list("ciliumpodippools"),
        Vec::<Value>::new(),
        "no pool created, not even the good one"
    );
}

#[test]
fn an_overlapping_pool_is_refused_with_an_event() {
    let cluster = Cluster::start();
    pool(
        &cluster,
        "a",
        &json!({"cidrs": ["10.95.0.0/16"], "maskSize": 24}),
    );
    request(&cluster, "n1", &[("a", 8)]);
    let _op = cluster.operator(&FLAGS);
    wait_allocated(&cluster, "n1", "a", &["10.95.0.0/24"]);
    pool(
        &cluster,
        "b",
        &json!({"cidrs": ["10.95.0.0/24"], "maskSize": 26}),
    );
    wait_for("an Event on pool b", Duration::from_secs(20), || {
        let events = cluster.emu.list("events");
        events
            .iter()
            .find(|e| e["involvedObject"]["name"] == "b" && e["reason"] == "InvalidPool")
            .map(|e| {
                let m = e["message"].as_str().unwrap_or_default();
                assert!(m.contains("overlaps 10.95.0.0/16 of pool a"), "{m}");
                assert_eq!(e["involvedObject"]["kind"], "CiliumPodIPPool");
            })
            .ok_or_else(|| format!("{events:?}"))
    });
    // Nothing of a's is given out twice: b is unknown to the allocator.
    request(&cluster, "n2", &[("b", 8)]);
    wait_for("n2's error", Duration::from_secs(20), || {
        let e = cluster.operator_error("n2");
        if e.contains("\"b\"") || e.contains(" b ") || e.contains("pool b") {
            Ok(())
        } else {
            Err(e)
        }
    });
    assert!(allocated(&cluster, "n2").is_empty());
    assert_eq!(allocated(&cluster, "n1")["a"], ["10.95.0.0/24"]);
}

#[test]
fn bad_pools_are_refused_with_events_naming_the_fault() {
    let cluster = Cluster::start();
    pool(
        &cluster,
        "wide",
        &json!({"cidrs": ["10.96.0.0/24"], "maskSize": 16}),
    );
    pool(
        &cluster,
        "v6in4",
        &json!({"cidrs": ["fd00:96::/64"], "maskSize": 24}),
    );
    pool(
        &cluster,
        "garbage",
        &json!({"cidrs": ["10.97.0.0/24", "banana"], "maskSize": 26}),
    );
    let _op = cluster.operator(&FLAGS);
    let event_of = |name: &str| {
        cluster
            .emu
            .list("events")
            .into_iter()
            .find(|e| e["involvedObject"]["name"] == name && e["reason"] == "InvalidPool")
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
    };
    wait_for("an Event on each bad pool", Duration::from_secs(20), || {
        let got: Vec<Option<String>> = ["wide", "v6in4", "garbage"]
            .iter()
            .map(|p| event_of(p))
            .collect();
        if got.iter().all(Option::is_some) {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    });
    let wide = event_of("wide").expect("wide");
    assert!(
        wide.contains("wide") && wide.to_lowercase().contains("mask"),
        "{wide}"
    );
    let v6 = event_of("v6in4").expect("v6in4");
    assert!(v6.contains("v4"), "{v6}");
    let garbage = event_of("garbage").expect("garbage");
    assert!(
        garbage.contains("spec.ipv4.cidrs[1]") && garbage.contains("banana"),
        "{garbage}"
    );
    // None of them hands out anything.
    request(&cluster, "n1", &[("wide", 8), ("v6in4", 8), ("garbage", 8)]);
    wait_for("n1's errors", Duration::from_secs(20), || {
        let e = cluster.operator_error("n1");
        if e.contains("wide") && e.contains("garbage") {
            Ok(())
        } else {
            Err(e)
        }
    });
    assert!(allocated(&cluster, "n1").is_empty());
}
