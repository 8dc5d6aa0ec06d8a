//! The agent under a misbehaving API server: churn with 500s, conflict storms and dropped
//! watches; and a restart while the API server is unavailable.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use weft_tests::{
    ThreadNetNs,
    kube::{Answer, Verb},
    require_root,
};

use super::{Cluster, DEBOUNCE, Pod, add, crd_pool, del, ping, used, wait_for};

/// What `status.ipam.used` must become: the live pods' addresses and one router.
pub(super) fn expected_used(live: &[Pod]) -> BTreeMap<String, String> {
    live.iter()
        .map(|p| (p.ips[0].to_string(), format!("{}/{}", p.ns, p.name)))
        .collect()
}

pub(super) fn converged(cluster: &Cluster, node: &str, live: &[Pod]) -> Result<(), String> {
    let doc = cluster.cilium_node(node).ok_or("no CiliumNode")?;
    // Restored addresses carry Cilium's " [restored]" owner suffix.
    let mut used: BTreeMap<String, String> = used(&doc)
        .into_iter()
        .map(|(ip, owner)| (ip, owner.trim_end_matches(" [restored]").to_owned()))
        .collect();
    let routers = used.iter().filter(|(_, o)| *o == "router").count();
    used.retain(|_, o| o != "router");
    if used == expected_used(live) && routers == 1 {
        Ok(())
    } else {
        Err(format!(
            "used {used:?} (routers {routers}), live {:?}",
            expected_used(live)
        ))
    }
}

#[test]
fn churn_under_faults_converges_without_losing_a_used_entry() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-f", "", None);
    let mut agent = cluster.agent(
        "node-f",
        &["--ipam", "crd", "--enable-health-checking", "false"],
    );
    agent.spawn();
    wait_for("the CiliumNode", Duration::from_secs(20), || {
        cluster
            .cilium_node("node-f")
            .map(|_| ())
            .ok_or_else(|| "absent".into())
    });
    cluster.operator_edit("node-f", |n| n["spec"]["ipam"]["pool"] = crd_pool(40));
    agent.wait_ready(Duration::from_secs(30));

    let faults = cluster.emu.faults();
    let requests = cluster.emu.requests();
    let writes_before = requests.count_code(Verb::Update, "ciliumnodes/status", 200);
    faults.inject_ratio(None, "*", 20, Answer::Internal);
    let started = Instant::now();
    let mut rng = fastrand::Rng::with_seed(7);
    let mut live: Vec<Pod> = Vec::new();
    let mut storms = 0;
    let mut drops = 0;
    let mut last_storm = Instant::now();
    for op in 0..100 {
        if last_storm.elapsed() >= Duration::from_secs(2) {
            faults.conflict_next("ciliumnodes/status", 5);
            faults.drop_watches();
            storms += 1;
            drops += 1;
            last_storm = Instant::now();
        }
        let grow = live.len() < 10 || (live.len() < 30 && rng.f32() < 0.6);
        if grow {
            live.push(add(&agent, "web", &format!("churn-{op}")));
        } else {
            let pod = live.swap_remove(rng.usize(..live.len()));
            del(&agent, &pod);
        }
    }
    let churn = started.elapsed();
    faults.clear();
    wait_for(
        "status.ipam.used to equal the live pods",
        DEBOUNCE * 10,
        || converged(&cluster, "node-f", &live),
    );
    let elapsed = started.elapsed();
    let writes = requests.count_code(Verb::Update, "ciliumnodes/status", 200) - writes_before;
    let failed = requests.count_code(Verb::Update, "ciliumnodes/status", 500);
    let conflicts = requests.count_code(Verb::Update, "ciliumnodes/status", 409);
    let intervals = elapsed.as_secs_f64() / DEBOUNCE.as_secs_f64();
    let writes_f = f64::from(u32::try_from(writes).expect("a small count"));
    let per_interval = writes_f / intervals;
    println!(
        "churn: 100 ADD/DEL in {churn:.1?} with 20% of requests failing, {storms} conflict storms, \
         {drops} watch drops; converged after {elapsed:.1?}; {} live pods; status writes {writes} \
         ({per_interval:.2} per {DEBOUNCE:?} interval), answered 500: {failed}, 409: {conflicts}",
        live.len()
    );
    assert!(
        writes_f <= intervals.ceil() + 1.0,
        "{writes} status writes in {intervals:.1} debounce intervals"
    );
}

#[test]
fn a_restart_while_the_api_server_is_down_keeps_pods_networking_and_catches_up() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-g", "", None);
    let mut agent = cluster.agent(
        "node-g",
        &["--ipam", "crd", "--enable-health-checking", "false"],
    );
    agent.spawn();
    wait_for("the CiliumNode", Duration::from_secs(20), || {
        cluster
            .cilium_node("node-g")
            .map(|_| ())
            .ok_or_else(|| "absent".into())
    });
    cluster.operator_edit("node-g", |n| n["spec"]["ipam"]["pool"] = crd_pool(8));
    agent.wait_ready(Duration::from_secs(30));
    let mut live = vec![add(&agent, "web", "a"), add(&agent, "web", "b")];
    assert!(
        ping(&live[0], live[1].ips[0]),
        "pods ping before the restart"
    );

    // The API server goes away (every request fails) and the agent dies with it.
    cluster
        .emu
        .faults()
        .inject(None, "*", u32::MAX, Answer::Internal);
    cluster.emu.faults().drop_watches();
    agent.kill();
    let retries = |log: &str| log.matches("node discovery; retrying").count();
    let before = retries(&agent.log());
    agent.spawn();
    wait_for(
        "the restarted agent to retry the API server twice",
        Duration::from_secs(30),
        || {
            let now = retries(&agent.log());
            (now >= before + 2)
                .then_some(())
                .ok_or_else(|| format!("{} retries", now - before))
        },
    );
    assert!(
        agent.running(),
        "the agent waits for the API server:\n{}",
        agent.log()
    );
    assert!(
        std::os::unix::net::UnixStream::connect(&agent.socket).is_err(),
        "not serving CNI before it has caught up"
    );
    for _ in 0..5 {
        assert!(
            ping(&live[0], live[1].ips[0]) && ping(&live[1], live[0].ips[0]),
            "pods keep networking while the agent and the API server are down"
        );
    }

    // The API server returns: the agent catches up, restores both pods and serves new ones.
    cluster.emu.faults().clear();
    agent.wait_ready(Duration::from_secs(30));
    live.push(add(&agent, "web", "c"));
    assert!(ping(&live[2], live[0].ips[0]));
    wait_for(
        "status.ipam.used to equal the live pods",
        DEBOUNCE * 10,
        || converged(&cluster, "node-g", &live),
    );
}
