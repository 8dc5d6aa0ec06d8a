//! The operator's allocators in-process on one host: the real `weft-agent run --store` (a child
//! process in a private node namespace) with pods added and deleted by the real `weft-cni`.
//! Cluster-pool: a CiliumNode without podCIDRs gets a block of `cluster-pool-ipv4-cidr` that
//! no other node document holds, and keeps it over a restart; a bad `cluster-pool-ipv4-cidr`
//! stops the agent with the key in the error. Multi-pool: a pool of /28 blocks grows by a block
//! when its pods need one and gives it back after their DELs; a v2 pool's reservedRanges never
//! become a block. The README's quick start, run as written, ends with `weft-agent cleanup` and
//! leaves nothing. ENI: the pool is the ENI addresses of the node's status, with no
//! CiliumPodIPPool. Each test runs as root and builds its own store.

mod cluster_pool;
mod eni;
mod multi_pool;
mod walkthrough;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use serde_json::Value;
use weft_tests::{
    agent::{Agent, CniCall},
    unique,
};

/// An agent whose store holds exactly `docs` (relative path, text); not started yet.
fn agent_with(docs: &[(&str, &str)], flags: &[&str]) -> Agent {
    let template = Template::new(docs);
    Agent::new(&template.0, flags)
}

/// A store directory to copy from, removed on drop.
struct Template(PathBuf);

impl Template {
    fn new(docs: &[(&str, &str)]) -> Self {
        let root = std::env::temp_dir().join(unique("weft-single-host-"));
        for (rel, text) in docs {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().expect("a document has a directory"))
                .expect("mkdir");
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        std::fs::create_dir_all(&root).expect("mkdir");
        Self(root)
    }
}

impl Drop for Template {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `RUST_LOG` that adds the in-process operator's "read acted on" lines to the info log.
const OPERATED_LOG: &str = "info,weft_agent::store::embedded=debug";

/// Marks the lines of the in-process operator's passes; `spec_ipam=` (last) is the own
/// node's `spec.ipam` as that pass read it.
const OPERATED_LINE: &str = "in-process allocator: read acted on";

/// Have the agent log the in-process operator's passes (before it starts).
fn log_operated(agent: &mut Agent) {
    agent
        .env
        .push(("RUST_LOG".to_owned(), OPERATED_LOG.to_owned()));
}

/// Wait (15 s at most) until the in-process operator, after the first `from` bytes of the
/// log, acted on a read in which node1's `spec.ipam` satisfies `want` (its write, if any,
/// is done by then). The agent must run with [`log_operated`].
fn wait_operated(agent: &Agent, from: usize, what: &str, want: impl Fn(&Value) -> bool) {
    weft_tests::wait_for(what, Duration::from_secs(15), || {
        let log = agent.log();
        let passes: Vec<Value> = log
            .get(from..)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(OPERATED_LINE))
            .filter_map(|l| l.split_once("spec_ipam=").map(|(_, json)| json))
            .map(|json| serde_json::from_str(json).unwrap_or(Value::Null))
            .collect();
        if passes.iter().any(&want) {
            Ok(())
        } else {
            Err(format!("passes read {passes:?}"))
        }
    });
}

/// A store document as it is on disk now.
fn doc(agent: &Agent, rel: &str) -> Value {
    let path = agent.store.join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Start the agent, expect it to exit non-zero on its own, and return its log.
fn refused_start(agent: &mut Agent) -> String {
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(30));
    let log = agent.log();
    assert!(
        matches!(code, Some(c) if c != 0),
        "the agent should have refused to start (exit {code:?}):\n{log}"
    );
    log
}

/// The IPv4 address of an ADD result.
fn v4_of(call: &CniCall) -> std::net::Ipv4Addr {
    (call.stdout["ips"].as_array().into_iter().flatten())
        .find_map(|ip| ip["address"].as_str()?.split('/').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no IPv4 address in {}", call.stdout))
}

/// The path of a store document.
fn store_path(agent: &Agent, rel: &str) -> PathBuf {
    Path::new(&agent.store).join(rel)
}
