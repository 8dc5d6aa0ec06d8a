//! What the operator benchmark reads back: the blocks each CiliumNode holds (cluster-pool
//! `spec.ipam.podCIDRs`, multi-pool `spec.ipam.pools.allocated`), the check that no two nodes
//! hold overlapping blocks, and the operator process's memory and CPU time from `/proc`. Reads
//! only; nothing here writes to the emulator.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::{Context as _, Result, bail};
use ipnet::IpNet;
use serde_json::Value;

/// Which part of `spec.ipam` the operator fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `spec.ipam.podCIDRs`: one block per node.
    ClusterPool,
    /// `spec.ipam.pools.allocated`: blocks in each of these pools.
    MultiPool(&'static [&'static str]),
}

impl Mode {
    /// The operator's `--ipam` value.
    pub const fn name(self) -> &'static str {
        match self {
            Self::ClusterPool => "cluster-pool",
            Self::MultiPool(_) => "multi-pool",
        }
    }
}

/// One node's blocks, each with its pool (`cluster-pool` in cluster-pool mode).
pub type Blocks = Vec<(String, IpNet)>;

fn cidrs(value: &Value) -> impl Iterator<Item = IpNet> + '_ {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str()?.parse().ok())
}

/// The blocks a CiliumNode holds in `mode`.
pub fn blocks_of(node: &Value, mode: Mode) -> Blocks {
    let ipam = &node["spec"]["ipam"];
    match mode {
        Mode::ClusterPool => cidrs(&ipam["podCIDRs"])
            .map(|c| ("cluster-pool".to_owned(), c))
            .collect(),
        Mode::MultiPool(_) => ipam["pools"]["allocated"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|entry| {
                let pool = entry["pool"].as_str().unwrap_or_default().to_owned();
                cidrs(&entry["cidrs"]).map(move |c| (pool.clone(), c))
            })
            .collect(),
    }
}

/// Whether `blocks` serve a node in `mode`: one block (cluster-pool), or at least one block in
/// every pool (multi-pool).
pub fn served(blocks: &Blocks, mode: Mode) -> bool {
    match mode {
        Mode::ClusterPool => blocks.len() == 1,
        Mode::MultiPool(pools) => pools
            .iter()
            .all(|p| blocks.iter().any(|(pool, _)| pool == p)),
    }
}

/// The blocks of every CiliumNode in `nodes`, by name.
pub fn all_blocks(nodes: &[Value], mode: Mode) -> BTreeMap<String, Blocks> {
    nodes
        .iter()
        .map(|n| {
            let name = n["metadata"]["name"].as_str().unwrap_or_default();
            (name.to_owned(), blocks_of(n, mode))
        })
        .collect()
}

/// Fails, naming both nodes, when two nodes hold the same or overlapping blocks (in any
/// pool). Returns the number of blocks held.
pub fn check_disjoint(all: &BTreeMap<String, Blocks>) -> Result<usize> {
    let mut held: Vec<(IpNet, &str)> = all
        .iter()
        .flat_map(|(node, blocks)| blocks.iter().map(move |(_, c)| (*c, node.as_str())))
        .collect();
    held.sort_unstable();
    for pair in held.windows(2) {
        let ((a, na), (b, nb)) = (pair[0], pair[1]);
        if a.contains(&b.network()) {
            bail!("block {b} of {nb} overlaps block {a} of {na}");
        }
    }
    Ok(held.len())
}

/// Fails when a multi-pool block lies outside its pool's CIDR or is not of the pool's size.
pub fn check_in_pools(all: &BTreeMap<String, Blocks>, pools: &[(&str, IpNet, u8)]) -> Result<()> {
    for (node, blocks) in all {
        for (pool, cidr) in blocks {
            let Some((_, range, mask)) = pools.iter().find(|(p, ..)| p == pool) else {
                bail!("{node} holds {cidr} of unknown pool {pool:?}");
            };
            if !range.contains(cidr) || cidr.prefix_len() != *mask {
                bail!("{node} holds {cidr} in pool {pool}, which hands out /{mask}s of {range}");
            }
        }
    }
    Ok(())
}

/// Which node holds each block, kept event by event from a watch, so that every state the API
/// went through is checked, not only the ones a poll happens to see. Blocks are compared whole:
/// [`check_in_pools`] makes sure every block has its range's size, and the ranges are disjoint,
/// so two blocks overlap only when they are the same block.
#[derive(Debug, Default)]
pub struct Holders {
    by_node: BTreeMap<String, Blocks>,
    by_block: HashMap<IpNet, BTreeSet<String>>,
    /// States checked (one per event).
    pub states: usize,
    /// Times a node took a block another node held.
    pub doubles: usize,
    /// The first of them.
    pub first_double: Option<String>,
}

impl Holders {
    /// Start from a listing.
    pub fn from_list(nodes: &[Value], mode: Mode) -> Self {
        let mut holders = Self::default();
        for (name, blocks) in all_blocks(nodes, mode) {
            holders.set(&name, blocks);
        }
        holders.states = 0;
        holders
    }

    /// `node` now holds `blocks`.
    pub fn set(&mut self, node: &str, blocks: Blocks) {
        self.release(node);
        self.states += 1;
        for (_, cidr) in &blocks {
            let holders = self.by_block.entry(*cidr).or_default();
            holders.insert(node.to_owned());
            if holders.len() > 1 {
                self.doubles += 1;
                if self.first_double.is_none() {
                    let all: Vec<&str> = holders.iter().map(String::as_str).collect();
                    self.first_double = Some(format!("{cidr} held by {}", all.join(" and ")));
                }
            }
        }
        self.by_node.insert(node.to_owned(), blocks);
    }

    /// `node` is gone.
    pub fn remove(&mut self, node: &str) {
        self.states += 1;
        self.release(node);
    }

    fn release(&mut self, node: &str) {
        for (_, cidr) in self.by_node.remove(node).unwrap_or_default() {
            if let Some(holders) = self.by_block.get_mut(&cidr) {
                holders.remove(node);
                if holders.is_empty() {
                    self.by_block.remove(&cidr);
                }
            }
        }
    }

    /// The blocks of every node.
    pub const fn nodes(&self) -> &BTreeMap<String, Blocks> {
        &self.by_node
    }
}

/// One reading of a process: resident memory now and at its peak (KiB), CPU time (seconds).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcReading {
    /// `VmRSS`, KiB.
    pub rss_kib: u64,
    /// `VmHWM`, KiB.
    pub hwm_kib: u64,
    /// `utime + stime`, seconds.
    pub cpu_s: f64,
}

/// Read `/proc/<pid>/status` and `/proc/<pid>/stat`.
///
/// # Errors
/// The process is gone or the files have an unexpected shape.
pub fn read_proc(pid: u32) -> Result<ProcReading> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let field = |name: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {name} in {path}"))
    };
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // Fields after the command name (which may hold spaces) in parentheses; utime and stime
    // are fields 14 and 15 of the line, 12 and 13 after it.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .with_context(|| format!("{path}: no command name"))?;
    let ticks: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    if ticks.len() != 2 {
        bail!("{path}: no utime and stime");
    }
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let per_second = u32::try_from(per_second).unwrap_or(100);
    let ticks = u32::try_from(ticks[0] + ticks[1]).context("CPU ticks overflow")?;
    Ok(ProcReading {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
        cpu_s: f64::from(ticks) / f64::from(per_second),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn overlapping_blocks_name_both_nodes() {
        let nodes = [
            json!({"metadata": {"name": "a"}, "spec": {"ipam": {"podCIDRs": ["10.0.0.0/24"]}}}),
            json!({"metadata": {"name": "b"}, "spec": {"ipam": {"podCIDRs": ["10.0.1.0/24"]}}}),
        ];
        let all = all_blocks(&nodes, Mode::ClusterPool);
        assert_eq!(check_disjoint(&all).expect("disjoint"), 2);
        let nodes = [
            json!({"metadata": {"name": "a"}, "spec": {"ipam": {"pools": {"allocated": [
                {"pool": "blue", "cidrs": ["10.0.0.0/24"]}]}}}}),
            json!({"metadata": {"name": "b"}, "spec": {"ipam": {"pools": {"allocated": [
                {"pool": "green", "cidrs": ["10.0.0.32/27"]}]}}}}),
        ];
        let mode = Mode::MultiPool(&["blue", "green"]);
        let all = all_blocks(&nodes, mode);
        let error = check_disjoint(&all).expect_err("overlap").to_string();
        assert!(error.contains(" a") && error.contains(" b"), "{error}");
        assert!(all.values().all(|b| !served(b, mode)));
    }

    #[test]
    fn holders_count_every_moment_a_block_has_two() {
        let block = |c: &str| vec![("p".to_owned(), c.parse().expect("cidr"))];
        let mut h = Holders::default();
        h.set("a", block("10.0.0.0/24"));
        h.set("b", block("10.0.0.0/24"));
        assert_eq!(h.doubles, 1);
        assert_eq!(
            h.first_double.as_deref(),
            Some("10.0.0.0/24 held by a and b")
        );
        h.remove("a");
        h.set("c", block("10.0.1.0/24"));
        h.set("b", block("10.0.2.0/24"));
        h.set("d", block("10.0.0.0/24"));
        assert_eq!(h.doubles, 1, "a released, b moved: no second holder");
        assert_eq!(h.nodes().len(), 3);
    }

    #[test]
    fn own_process_reads() {
        let r = read_proc(std::process::id()).expect("reads");
        assert!(r.rss_kib > 0 && r.hwm_kib >= r.rss_kib);
    }
}
