//! A restart that finds none of the old pins (bpffs cleared by a reboot with persistent state,
//! a private bpffs under `ip netns exec`, a pin layout change) rebuilds the datapath of every
//! recorded pod before the agent serves: `from_container` on its veth, its endpoint and IPCache
//! entries. A repeated ADD of an attachment whose datapath was lost repairs it.

use std::{
    collections::BTreeMap,
    net::IpAddr,
    path::Path,
    time::{Duration, Instant},
};

use weft_tests::{
    ThreadNetNs,
    agent::{Agent, Pod, add, example_store, ips_of, ping},
    containerd::{pinned_counters, pinned_endpoints},
};

/// Pings `from` → `to` until one is answered, for at most a second.
fn pings_within_a_second(from: &Pod, to: IpAddr) -> bool {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        if ping(from, to) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
    }
}

/// Both pods answer each other, and the pings went through this agent's `from_container`
/// (its counters under `pin_dir` moved).
fn assert_wired_by(pin_dir: &Path, a: &Pod, b: &Pod, when: &str, log: &dyn Fn() -> String) {
    let before = pinned_counters(pin_dir);
    assert!(
        pings_within_a_second(a, b.ips[0]) && pings_within_a_second(b, a.ips[0]),
        "{when}: the pods do not answer each other:\n{}",
        log()
    );
    let after = pinned_counters(pin_dir);
    assert!(
        after["redirect_local"] >= before["redirect_local"] + 4,
        "{when}: from_container did not forward the pings: {before:?} -> {after:?}"
    );
}

fn restart_without_pins(attach_mode: &str) {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &["--ipam", "multi-pool", "--attach-mode", attach_mode],
    );
    agent.start();
    let a = add(&agent, "default", "web");
    let b = add(&agent, "default", "db");
    assert_wired_by(&agent.pin_dir, &a, &b, "before the restart", &|| {
        agent.log()
    });
    let endpoints: BTreeMap<IpAddr, u32> = pinned_endpoints(&agent.pin_dir);

    agent.stop();
    // What a reboot with persistent state, or the end of a private bpffs mount, leaves: no pins.
    std::fs::remove_dir_all(&agent.pin_dir).expect("remove the pin dir");
    agent.start();
    assert_eq!(
        pinned_endpoints(&agent.pin_dir),
        endpoints,
        "the endpoints map after a restart without pins:\n{}",
        agent.log()
    );
    assert_wired_by(&agent.pin_dir, &a, &b, "after the restart", &|| agent.log());
}

#[test]
fn a_restart_without_the_old_pins_rewires_every_recorded_pod_tcx() {
    restart_without_pins("tcx");
}

#[test]
fn a_restart_without_the_old_pins_rewires_every_recorded_pod_netlink() {
    restart_without_pins("netlink");
}

#[test]
fn a_repeated_add_repairs_a_lost_attachment() {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &["--ipam", "multi-pool", "--attach-mode", "tcx"],
    );
    agent.start();
    let a = add(&agent, "default", "web");
    let b = add(&agent, "default", "db");
    // Lose a's program: unpinning its TCX link detaches `from_container` from its veth.
    let first = agent.cni(
        "ADD",
        &a.id,
        &a.netns.path().display().to_string(),
        (&a.ns, &a.name),
    );
    assert_eq!(first.code, 0, "repeated ADD: {}", first.stdout);
    let host = first.stdout["interfaces"][0]["name"]
        .as_str()
        .expect("host interface in the result")
        .to_owned();
    let link = agent.pin_dir.join("links/from_container").join(&host);
    std::fs::remove_file(&link).unwrap_or_else(|e| panic!("unpin {}: {e}", link.display()));
    let again = agent.cni(
        "ADD",
        &a.id,
        &a.netns.path().display().to_string(),
        (&a.ns, &a.name),
    );
    assert_eq!(again.code, 0, "repeated ADD: {}", again.stdout);
    assert_eq!(ips_of(&again), a.ips, "the repeated ADD kept the address");
    assert!(link.exists(), "the repeated ADD did not re-attach {host}");
    assert_wired_by(&agent.pin_dir, &a, &b, "after the repeated ADD", &|| {
        agent.log()
    });
}

#[test]
fn a_bpffs_that_goes_with_the_agent_is_named_with_the_fix() {
    weft_tests::require_root();
    // `ip netns exec` runs the agent in a mount namespace of its own with a fresh /sys, so the
    // agent mounts a bpffs that is gone when it exits.
    let node = weft_tests::NamedNetNs::new();
    let mut agent = Agent::new(&example_store(), &["--ipam", "multi-pool"]);
    agent.wrapper = ["ip", "netns", "exec", &node.name].map(String::from).into();
    agent.start();
    let log = agent.log();
    assert!(
        log.contains("pins will not survive a restart") && log.contains("nsenter --net"),
        "the agent must warn that its own bpffs goes with it, and name the fix:\n{log}"
    );
}

/// The default attach mode changed: pods' `from_container` is a netlink tc filter under
/// `auto`, where an agent in TCX mode pinned TCX links. A TCX program runs before any filter,
/// so a link left in place would keep the old program deciding: the new agent puts the filter
/// on each veth, then drops the link.
#[test]
fn an_agent_in_auto_mode_replaces_the_tcx_links_of_an_agent_in_tcx_mode() {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &["--ipam", "multi-pool", "--attach-mode", "tcx"],
    );
    agent.start();
    let a = add(&agent, "default", "web");
    let b = add(&agent, "default", "db");
    let links = agent.pin_dir.join("links/from_container");
    let pinned = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .map(|e| {
                        e.expect("dir entry")
                            .file_name()
                            .to_string_lossy()
                            .into_owned()
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let veths = pinned(&links);
    assert_eq!(veths.len(), 2, "TCX mode pins a link per pod");

    agent.stop();
    agent.flags.retain(|f| f != "--attach-mode" && f != "tcx");
    agent.start();
    assert_eq!(
        pinned(&links),
        Vec::<String>::new(),
        "TCX links left under {}:\n{}",
        links.display(),
        agent.log()
    );
    for veth in &veths {
        let out = weft_tests::run(
            std::process::Command::new("tc").args(["filter", "show", "dev", veth, "ingress"]),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("from_container"),
            "no from_container filter on {veth}: {text}"
        );
    }
    assert_wired_by(&agent.pin_dir, &a, &b, "after the switch", &|| agent.log());
}
