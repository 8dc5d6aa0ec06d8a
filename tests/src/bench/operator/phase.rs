//! One timed phase of the operator benchmark: the phase's writes run on a thread of their own
//! while a watch of the CiliumNodes follows what the operator does, event by event, checking
//! every state for blocks held twice or out of range ([`Holders`], [`check_in_pools`]) and
//! noting when each awaited node is served and each node to go is deleted; then a quiet time,
//! the write counters and the operator's memory and CPU time.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail, ensure};
use ipnet::IpNet;

use super::{
    SETTLE,
    blocks::{
        self, Blocks, Holders, Mode, ProcReading, all_blocks, blocks_of, check_disjoint,
        check_in_pools, read_proc,
    },
    http::Conn,
};
use crate::{
    kube::{Emulator, Verb},
    operator::Operator,
};

/// How long a read of the watch waits before the clock and the operator are looked at.
const WATCH_READ: Duration = Duration::from_millis(100);

/// What one phase saw, event by event.
#[derive(Debug, Default)]
pub struct Progress {
    /// When each awaited node was first seen served, from the start.
    pub served_at: Vec<Duration>,
    /// When the last CiliumNode to go was seen deleted.
    pub gone_at: Option<Duration>,
    /// How long storing the phase's objects took.
    pub stored: Duration,
    /// The blocks of every node, every state checked.
    pub holders: Holders,
}

/// A phase's watch: every CiliumNode event from the version before the phase's first write.
struct Follow<'a> {
    conn: Conn,
    mode: Mode,
    ranges: &'a [(&'a str, IpNet, u8)],
}

impl<'a> Follow<'a> {
    /// The state now, and a watch from here on.
    fn start(
        emu: &Emulator,
        mode: Mode,
        ranges: &'a [(&'a str, IpNet, u8)],
    ) -> Result<(Self, Holders)> {
        let rv = emu.resource_version();
        let holders = Holders::from_list(&emu.list("ciliumnodes"), mode);
        let mut conn = Conn::open(emu)?;
        conn.watch(
            &format!("/apis/cilium.io/v2/ciliumnodes?watch=true&resourceVersion={rv}"),
            WATCH_READ,
        )?;
        Ok((Self { conn, mode, ranges }, holders))
    }

    /// Follow events until every node in `want` is served and every one in `gone` deleted.
    fn until(
        &mut self,
        op: &mut Operator,
        mut holders: Holders,
        (want, gone): (&BTreeSet<String>, &BTreeSet<String>),
        (started, timeout): (Instant, Duration),
    ) -> Result<Progress> {
        let mut progress = Progress::default();
        let mut pending = want.clone();
        let mut to_go: BTreeSet<String> = gone.clone();
        loop {
            if let Some(event) = self.conn.next_event()? {
                let now = started.elapsed();
                let object = &event["object"];
                let name = object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                match event["type"].as_str() {
                    Some("ADDED" | "MODIFIED") => {
                        let blocks = blocks_of(object, self.mode);
                        let one = BTreeMap::from([(name.clone(), blocks.clone())]);
                        check_in_pools(&one, self.ranges)?;
                        if blocks::served(&blocks, self.mode) && pending.remove(&name) {
                            progress.served_at.push(now);
                        }
                        holders.set(&name, blocks);
                    }
                    Some("DELETED") => {
                        holders.remove(&name);
                        if to_go.remove(&name) && to_go.is_empty() {
                            progress.gone_at = Some(now);
                        }
                    }
                    _ => bail!("unexpected watch event: {event}"),
                }
            }
            if pending.is_empty() && to_go.is_empty() {
                progress.holders = holders;
                return Ok(progress);
            }
            if let Some(code) = op.exited() {
                bail!("weft-operator exited ({code}):\n{}", op.log());
            }
            ensure!(
                started.elapsed() < timeout,
                "after {timeout:?}: {} of {} nodes not served (e.g. {:?}), {} CiliumNodes to delete left",
                pending.len(),
                want.len(),
                pending.first(),
                to_go.len(),
            );
        }
    }
}

/// Run `writes` (the phase's creates and deletes) on a thread of its own while `follow` reads
/// what the operator does; the progress, with the time the writes took.
pub fn phase(
    emu: &Emulator,
    op: &mut Operator,
    (mode, ranges): (Mode, &[(&str, IpNet, u8)]),
    (want, gone): (&BTreeSet<String>, &BTreeSet<String>),
    timeout: Duration,
    writes: impl FnOnce() + Send,
) -> Result<Progress> {
    let (mut follow, holders) = Follow::start(emu, mode, ranges)?;
    let started = Instant::now();
    std::thread::scope(|scope| {
        let creating = scope.spawn(move || {
            writes();
            started.elapsed()
        });
        let progress = follow.until(op, holders, (want, gone), (started, timeout));
        let stored = creating
            .join()
            .map_err(|_| anyhow::anyhow!("the thread creating objects panicked"))?;
        progress.map(|p| Progress { stored, ..p })
    })
}

/// CiliumNode writes since the counters were reset: (spec, status).
fn writes(emu: &Emulator) -> (u64, u64) {
    let r = emu.requests();
    let count = |resource| r.count(Verb::Patch, resource) + r.count(Verb::Update, resource);
    (count("ciliumnodes"), count("ciliumnodes/status"))
}

/// One timed phase of one mode.
#[derive(Debug, Default)]
pub struct Phase {
    /// Nodes the phase waited for.
    pub nodes: usize,
    /// What the watch saw.
    pub progress: Progress,
    /// (spec, status) writes, counted after the quiet time.
    pub writes: (u64, u64),
    /// CiliumNode deletions.
    pub deletes: u64,
    /// Nodes whose blocks changed during the quiet time or, in churn, survivors whose blocks
    /// changed.
    pub moved: usize,
    /// The operator after the quiet time.
    pub proc_after: ProcReading,
    /// Its CPU time during the phase, seconds.
    pub cpu_s: f64,
}

impl Phase {
    /// When the last awaited node was served.
    pub fn all_served(&self) -> Duration {
        self.progress
            .served_at
            .iter()
            .max()
            .copied()
            .unwrap_or_default()
    }

    /// The `q` quantile of the times the nodes were served.
    pub fn quantile(&self, q: f64) -> Duration {
        let mut at = self.progress.served_at.clone();
        at.sort_unstable();
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "an index into a short list"
        )]
        let i = ((at.len().saturating_sub(1)) as f64 * q).round() as usize;
        at.get(i).copied().unwrap_or_default()
    }

    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    /// CiliumNode writes per awaited node.
    pub fn writes_per_node(&self) -> f64 {
        (self.writes.0 + self.writes.1) as f64 / self.nodes.max(1) as f64
    }
}

/// Nodes of `before` whose blocks differ in `after`.
pub fn moved(before: &BTreeMap<String, Blocks>, after: &BTreeMap<String, Blocks>) -> usize {
    before
        .iter()
        .filter(|(n, b)| after.get(*n).is_some_and(|a| a != *b))
        .count()
}

/// Settle, then read the counters and the process.
pub fn finish_phase(
    emu: &Emulator,
    pid: u32,
    mode: Mode,
    nodes: usize,
    progress: Progress,
    cpu_before: f64,
) -> Result<Phase> {
    std::thread::sleep(SETTLE);
    let after = all_blocks(&emu.list("ciliumnodes"), mode);
    check_disjoint(&after).context("a block is held by two nodes after the quiet time")?;
    let proc_after = read_proc(pid)?;
    Ok(Phase {
        nodes,
        moved: moved(progress.holders.nodes(), &after),
        writes: writes(emu),
        deletes: emu.requests().count(Verb::Delete, "ciliumnodes"),
        cpu_s: proc_after.cpu_s - cpu_before,
        proc_after,
        progress,
    })
}
