//! The two setups `bench ipam` compares: weft (`weft-cni` against a real `weft-agent`) and
//! Debian's `bridge` plugin with `host-local` IPAM.

use std::{
    fs,
    net::Ipv4Addr,
    path::PathBuf,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};

use super::{CniOptions, Plugin, PodNs, first_ipv4};
use crate::{
    agent::{Agent, NODE1_WITH_A_24, example_store},
    unique,
};

/// `weft-agent run` flags: multi-pool IPAM, IPv4 only, a fast CiliumNode write-back.
const AGENT_FLAGS: [&str; 8] = [
    "--ipam",
    "multi-pool",
    "--ipam-multi-pool-pre-allocation",
    "default=64",
    "--enable-ipv6",
    "false",
    "--ipam-cilium-node-update-rate",
    "1s",
];

/// weft: a `weft-agent` in multi-pool mode (one /24 in the default pool), driven by
/// `weft-cni`. Dropping it stops the agent and removes its directories and pins.
pub(super) struct Weft {
    agent: Agent,
}

impl Weft {
    /// The agent as installed (`--attach-mode auto`: netlink tc filters on pod veths).
    pub(super) fn auto(opts: &CniOptions) -> Result<Self> {
        Self::new(opts, "auto")
    }

    /// The agent attaching pods by TCX links (`--attach-mode tcx`).
    pub(super) fn tcx(opts: &CniOptions) -> Result<Self> {
        Self::new(opts, "tcx")
    }

    /// Start the agent with the bigger node document and a Pod document for every pod name
    /// the scenarios use (in the store before start-up, so no watcher delay is involved).
    #[expect(
        clippy::unnecessary_wraps,
        reason = "a setup function; the agent harness panics instead of returning errors"
    )]
    fn new(opts: &CniOptions, attach_mode: &str) -> Result<Self> {
        let mut flags = AGENT_FLAGS.to_vec();
        flags.extend(["--attach-mode", attach_mode]);
        let mut agent = Agent::new(&example_store(), &flags);
        agent.put_doc("ciliumnodes/node1.yaml", NODE1_WITH_A_24);
        for name in super::pod_names(opts) {
            let doc = format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n\
                 spec:\n  nodeName: node1\n"
            );
            agent.put_doc(&format!("pods/default/{name}.yaml"), &doc);
        }
        agent.start();
        Ok(Self { agent })
    }
}

impl Plugin for Weft {
    fn add(&self, pod: &PodNs) -> Result<(Duration, Ipv4Addr)> {
        let netns = pod.netns_path();
        pod.added.store(true, Ordering::Relaxed);
        let start = Instant::now();
        let call = self
            .agent
            .cni("ADD", &pod.id, &netns, ("default", &pod.name));
        let elapsed = start.elapsed();
        if call.code != 0 {
            bail!(
                "weft ADD default/{} failed (exit {}): {}",
                pod.name,
                call.code,
                call.stdout
            );
        }
        Ok((elapsed, first_ipv4(&call.stdout)?))
    }

    fn del(&self, pod: &PodNs) -> Result<Duration> {
        let start = Instant::now();
        let call = self
            .agent
            .cni("DEL", &pod.id, &pod.netns_path(), ("default", &pod.name));
        let elapsed = start.elapsed();
        ensure!(
            call.code == 0,
            "weft DEL default/{} failed (exit {}): {}",
            pod.name,
            call.code,
            call.stdout
        );
        Ok(elapsed)
    }

    fn log(&self) -> Option<String> {
        Some(self.agent.log())
    }

    fn settle(&self) -> Result<()> {
        let records = self.agent.state.join("endpoints");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let marked = fs::read_dir(&records)
                .with_context(|| format!("reading {}", records.display()))?
                .filter_map(|e| fs::read(e.ok()?.path()).ok())
                .filter_map(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
                .filter(|record| record["deleting"] == true)
                .count();
            if marked == 0 {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "{marked} DELs still unfinished after 30 s; see the agent's log"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Debian's `bridge` plugin with `host-local` IPAM (10.78.0.0/24) on a bridge of its own.
/// Dropping it removes the host-local directory; the bridge goes with the node namespace.
pub(super) struct Bridge {
    config: String,
    ipam: PathBuf,
}

impl Bridge {
    pub(super) fn new(_opts: &CniOptions) -> Result<Self> {
        let ipam = std::env::temp_dir().join(unique("weft-bench-ipam-"));
        fs::create_dir_all(&ipam).with_context(|| format!("create {}", ipam.display()))?;
        let config = json!({
            "cniVersion": "1.0.0", "name": "benchbr", "type": "bridge",
            "bridge": unique("wbr"), "isGateway": true, "ipMasq": false,
            "ipam": {
                "type": "host-local", "ranges": [[{ "subnet": "10.78.0.0/24" }]],
                "dataDir": ipam,
            },
        })
        .to_string();
        Ok(Self { config, ipam })
    }

    /// Run the plugin as a runtime does; its stdout, and the time from spawn to exit.
    fn call(&self, command: &str, pod: &PodNs) -> Result<(Duration, Vec<u8>)> {
        let (stdout, elapsed) =
            crate::bench::bridge_cni(&self.config, command, &pod.netns.path(), &pod.id)
                .with_context(|| format!("pod {}", pod.name))?;
        Ok((elapsed, stdout))
    }
}

impl Plugin for Bridge {
    fn add(&self, pod: &PodNs) -> Result<(Duration, Ipv4Addr)> {
        pod.added.store(true, Ordering::Relaxed);
        let (elapsed, stdout) = self.call("ADD", pod)?;
        let result: Value = serde_json::from_slice(&stdout).context("bridge ADD: no JSON")?;
        Ok((elapsed, first_ipv4(&result)?))
    }

    fn del(&self, pod: &PodNs) -> Result<Duration> {
        self.call("DEL", pod).map(|(elapsed, _)| elapsed)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.ipam);
    }
}
