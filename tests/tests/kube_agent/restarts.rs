//! Reliability, measured (issue 7 §3): rolling restarts of both nodes' agents, alternately
//! SIGTERM and SIGKILL, while a pod pings a pod on its node and one on the other node every
//! 10 ms; every ping must be answered. Prints the counts.

use std::{
    net::IpAddr,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use weft_tests::{ThreadNetNs, containerd::pinned_counters, require_root};

use super::{Pod, add, ping, two_nodes::two_nodes, wait_for};

/// Pings per pair (20 s at 10 ms).
const COUNT: u32 = 2000;

/// A `ping` running in a pod, killed if the test fails before it finishes.
pub(super) struct Pinger(Option<Child>);

impl Pinger {
    pub(super) fn start(from: &Pod, to: IpAddr, count: u32) -> Self {
        let child = from
            .netns
            .command("ping")
            .args([
                "-n",
                "-q",
                "-i",
                "0.01",
                "-W",
                "1",
                "-c",
                &count.to_string(),
            ])
            .arg(to.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("ping");
        Self(Some(child))
    }

    pub(super) fn running(&mut self) -> bool {
        self.0
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Wait for the end; (transmitted, received) from ping's summary.
    pub(super) fn finish(mut self) -> (u64, u64) {
        let out = self
            .0
            .take()
            .expect("ping")
            .wait_with_output()
            .expect("ping");
        let text = String::from_utf8_lossy(&out.stdout);
        let summary = text
            .lines()
            .find(|l| l.contains("packets transmitted"))
            .unwrap_or_else(|| panic!("no summary from ping:\n{text}"));
        let number = |word: &str| -> u64 {
            summary
                .split(", ")
                .find(|part| part.contains(word))
                .and_then(|part| part.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no {word} count in {summary:?}"))
        };
        (number("transmitted"), number("received"))
    }
}

impl Drop for Pinger {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn rolling_agent_restarts_under_a_10ms_ping_lose_nothing() {
    require_root();
    let mut nodes = two_nodes();
    let pa = add(&nodes.a1, "web", "a");
    let pb = add(&nodes.a2, "web", "b");
    let pc = add(&nodes.a2, "web", "c");
    wait_for("pods to reach each other", Duration::from_secs(10), || {
        (ping(&pb, pc.ips[0]) && ping(&pb, pa.ips[0]))
            .then_some(())
            .ok_or_else(|| "no answer".to_owned())
    });
    let before = pinned_counters(&nodes.a2.pin_dir);
    let mut same_node = Pinger::start(&pb, pc.ips[0], COUNT);
    let mut other_node = Pinger::start(&pb, pa.ips[0], COUNT);
    // The pings are under way before the first restart (and still running after the last,
    // checked below): every restart falls inside them.
    wait_for("the pings to be under way", Duration::from_secs(10), || {
        let moved = pinned_counters(&nodes.a2.pin_dir)["redirect_local"] - before["redirect_local"];
        (moved >= 20)
            .then_some(())
            .ok_or_else(|| format!("{moved} packets redirected pod to pod"))
    });
    let started = Instant::now();
    let (mut terms, mut kills) = (0, 0);
    // Restart both agents, alternately SIGTERM and SIGKILL, for most of the ping's 20 s.
    let mut round = 0;
    while round < 6 || started.elapsed() < Duration::from_secs(12) {
        for which in [2, 1] {
            let (agent, ns) = if which == 2 {
                (&mut nodes.a2, &nodes.n2)
            } else {
                (&mut nodes.a1, &nodes.n1)
            };
            if round % 2 == 0 {
                agent.stop();
                terms += 1;
            } else {
                agent.kill();
                kills += 1;
            }
            {
                let _in = ThreadNetNs::enter(&ns.path());
                agent.spawn();
            }
            agent.wait_ready(Duration::from_secs(30));
        }
        round += 1;
    }
    let restarts = started.elapsed();
    assert!(
        same_node.running() && other_node.running(),
        "the pings ended before the restarts did ({restarts:.1?}): raise COUNT"
    );
    let same = same_node.finish();
    let other = other_node.finish();
    println!(
        "rolling restarts: {terms} SIGTERM + {kills} SIGKILL restarts of the two agents in \
         {restarts:.1?} under ping -i 0.01: same node {}/{} answered, other node {}/{} answered",
        same.1, same.0, other.1, other.0
    );
    assert_eq!(
        same,
        (u64::from(COUNT), u64::from(COUNT)),
        "pod to pod on node 2"
    );
    assert_eq!(
        other,
        (u64::from(COUNT), u64::from(COUNT)),
        "pod on node 2 to node 1"
    );
}
