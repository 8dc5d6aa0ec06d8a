//! `cargo xtask bench eni` (issue 27): the release `weft-operator --ipam eni` against the EC2
//! emulator and the Kubernetes API emulator when 100 and then 1000 nodes appear at once, each
//! needing `pre-allocate` 8: seconds until every node's `spec.ipam.pool` holds 8, the
//! rate-limited EC2 calls per node (each action's share), the peak request rate in any
//! one-second window against the configured qps and burst, and the operator's RSS and CPU.
//!
//! Two cases. **New ENI**: `first-interface-index: 1` on m5.large (3 ENIs × 10 addresses),
//! so the primary ENI is excluded and each node needs a new ENI: created, attached and marked
//! delete-on-termination, 3 calls. **Room on the primary**: `first-interface-index: 0`, so the
//! primary ENI (9 free slots) takes the 8 with one `AssignPrivateIpAddresses`. The floor is the
//! calls a node strictly needs at the operator's rate limit: `n` nodes of `k` calls take at least
//! `(k·n − burst) / qps` seconds. The ratio to it is printed; nothing is asserted on time. This
//! module owns the scenario, the run and the table; the request-log arithmetic is [`calls`].

mod calls;

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use serde_json::json;

use self::calls::Calls;
use super::{Kubeconfig, operator::blocks::read_proc};
use crate::{
    ec2::{Ec2Emulator, RateLimitSpec, Scenario, Tags},
    kube::Emulator,
    operator::Operator,
    unique,
};

/// What each node starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// `first-interface-index: 1`: every node needs a new ENI.
    NewEni,
    /// `first-interface-index: 0`: the primary ENI has room for the 8.
    PrimaryRoom,
}

impl Case {
    /// The name on the command line and in the table.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::NewEni => "new-eni",
            Self::PrimaryRoom => "primary-room",
        }
    }

    /// The case named `name`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        [Self::NewEni, Self::PrimaryRoom]
            .into_iter()
            .find(|c| c.name() == name)
    }

    const fn first_interface_index(self) -> u32 {
        match self {
            Self::NewEni => 1,
            Self::PrimaryRoom => 0,
        }
    }

    /// The rate-limited calls a node strictly needs, and which.
    const fn floor_calls(self) -> (u32, &'static str) {
        match self {
            Self::NewEni => (3, "create + attach + modify"),
            Self::PrimaryRoom => (1, "assign"),
        }
    }
}

/// Options of the ENI benchmark.
#[derive(Debug, Clone)]
pub struct EniOptions {
    /// Node counts, one run each per case.
    pub nodes: Vec<usize>,
    /// The cases.
    pub cases: Vec<Case>,
    /// `--limit-ipam-api-qps`.
    pub qps: f64,
    /// `--limit-ipam-api-burst`.
    pub burst: u32,
    /// EC2's own limit (the emulator answers `RequestLimitExceeded` above it); none: unlimited.
    pub ec2_limit: Option<(f64, u32)>,
    /// How long a run may take before it fails.
    pub timeout: Duration,
}

impl Default for EniOptions {
    fn default() -> Self {
        Self {
            nodes: vec![100, 1000],
            cases: vec![Case::NewEni, Case::PrimaryRoom],
            qps: 4.0,
            burst: 20,
            ec2_limit: None,
            timeout: Duration::from_mins(40),
        }
    }
}

const PRE_ALLOCATE: usize = 8;
const REGION: &str = "us-east-1";
const AZ: &str = "us-east-1a";
const VPC: &str = "vpc-0b0000000000000001";
const SUBNET: &str = "subnet-0b0000000000000001";
const SG: &str = "sg-0b0000000000000001";
const INSTANCE_TYPE: &str = "m5.large";

fn instance(i: usize) -> String {
    format!("i-{:017x}", i + 1)
}

/// One VPC with one /16 subnet (room for 1000 nodes' primaries and new ENIs), a security group
/// tagged `weft: nodes`, and `nodes` running m5.large instances.
fn scenario(nodes: usize, ec2_limit: Option<(f64, u32)>) -> Scenario {
    let tag = Tags::from([("weft".to_owned(), "nodes".to_owned())]);
    let mut s = Scenario::new(REGION)
        .vpc(VPC, "10.0.0.0/16", &[])
        .subnet(SUBNET, VPC, "10.0.0.0/16", AZ, tag.clone())
        .route_table("rtb-0b0000000000000001", VPC, &[SUBNET])
        .security_group(SG, VPC, tag);
    for i in 0..nodes {
        s = s.instance(&instance(i), INSTANCE_TYPE, SUBNET, Tags::new());
    }
    s.rate_limit = ec2_limit.map(|(per_second, burst)| RateLimitSpec { per_second, burst });
    s
}

/// What one run measured.
#[derive(Debug)]
struct RunResult {
    case: Case,
    nodes: usize,
    seconds: f64,
    floor: f64,
    calls: Calls,
    created: u64,
    hwm_mib: f64,
    rss_mib: f64,
    cpu_s: f64,
}

/// The release operator against `ec2` and the cluster of `kubeconfig`, done with its first
/// full resync.
fn start_operator(opts: &EniOptions, ec2: &Ec2Emulator, kubeconfig: &Kubeconfig) -> Operator {
    let url = ec2.url();
    let (qps, burst) = (opts.qps.to_string(), opts.burst.to_string());
    let mut op = Operator::new(
        &kubeconfig.0,
        &[
            "--ipam=eni",
            "--leader-election=false",
            "--ec2-api-endpoint",
            &url,
            "--aws-imds-endpoint",
            &url,
            "--aws-region",
            REGION,
            "--aws-vpc-id",
            VPC,
            "--limit-ipam-api-qps",
            &qps,
            "--limit-ipam-api-burst",
            &burst,
        ],
    );
    op.env = vec![
        ("AWS_ACCESS_KEY_ID".into(), "AKIDWEFTBENCH".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "weft-bench-secret".into()),
    ];
    op.spawn();
    op.wait_log(
        "initial synchronization with instances API done",
        opts.timeout,
    );
    op
}

/// Wait until every one of `nodes` CiliumNodes' `spec.ipam.pool` holds [`PRE_ALLOCATE`].
fn wait_served(
    emu: &Emulator,
    op: &mut Operator,
    nodes: usize,
    started: Instant,
    timeout: Duration,
) -> Result<()> {
    loop {
        let served = emu
            .list("ciliumnodes")
            .iter()
            .filter(|n| {
                n["spec"]["ipam"]["pool"]
                    .as_object()
                    .map_or(0, serde_json::Map::len)
                    >= PRE_ALLOCATE
            })
            .count();
        if served == nodes {
            return Ok(());
        }
        ensure!(
            started.elapsed() < timeout,
            "{served} of {nodes} nodes served after {timeout:?}"
        );
        if op.exited().is_some() {
            anyhow::bail!("the operator exited:\n{}", op.log());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One run: fresh emulators, `nodes` instances and Nodes, the operator, then `nodes`
/// CiliumNodes of `case` at once.
fn run_one(opts: &EniOptions, case: Case, nodes: usize) -> Result<RunResult> {
    let ec2 = Ec2Emulator::start(scenario(nodes, opts.ec2_limit));
    let emu = Emulator::start();
    let kubeconfig = Kubeconfig(std::env::temp_dir().join(unique("weft-bench-eni-kubeconfig-")));
    emu.write_kubeconfig(&kubeconfig.0);
    for i in 0..nodes {
        emu.put(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{i}")},
            "spec": {"providerID": format!("aws:///{AZ}/{}", instance(i))},
        }));
    }
    let mut op = start_operator(opts, &ec2, &kubeconfig);
    let pid = op.pid().context("the operator exited")?;
    let idle = read_proc(pid)?;
    // The first resync's calls are not part of the nodes' rounds.
    let skip = ec2.requests().len();
    let started = Instant::now();
    for i in 0..nodes {
        emu.put(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": format!("node-{i}")},
            "spec": {
                "instance-id": instance(i),
                "eni": {
                    "instance-type": INSTANCE_TYPE, "vpc-id": VPC,
                    "availability-zone": AZ, "node-subnet-id": SUBNET,
                    "first-interface-index": case.first_interface_index(),
                    "security-group-tags": {"weft": "nodes"},
                },
                "ipam": {},
            },
        }));
    }
    wait_served(&emu, &mut op, nodes, started, opts.timeout)?;
    let seconds = started.elapsed().as_secs_f64();
    let end = read_proc(pid)?;
    let calls = Calls::from_log(&ec2.requests()[skip..]);
    let (per_node, _) = case.floor_calls();
    #[expect(clippy::cast_precision_loss, reason = "node and call counts")]
    let floor =
        ((u64::from(per_node) * nodes as u64) as f64 - f64::from(opts.burst)).max(0.0) / opts.qps;
    #[expect(clippy::cast_precision_loss, reason = "KiB to MiB")]
    let mib = |kib: u64| kib as f64 / 1024.0;
    Ok(RunResult {
        case,
        nodes,
        seconds,
        floor,
        created: ec2.count("CreateNetworkInterface"),
        calls,
        hwm_mib: mib(end.hwm_kib),
        rss_mib: mib(end.rss_kib),
        cpu_s: end.cpu_s - idle.cpu_s,
    })
}

fn print_row(opts: &EniOptions, r: &RunResult) {
    #[expect(clippy::cast_precision_loss, reason = "call counts")]
    let per_node = |n: u64| n as f64 / r.nodes as f64;
    let (floor_calls, _) = r.case.floor_calls();
    println!(
        "| {} | {} | {:.1} | {:.1} ({floor_calls}/node) | {:.2} | {:.2} | {} (burst {}, then {}/s) | {} | {:.1} / {:.1} MiB | {:.1} s |",
        r.case.name(),
        r.nodes,
        r.seconds,
        r.floor,
        if r.floor > 0.0 {
            r.seconds / r.floor
        } else {
            0.0
        },
        per_node(r.calls.limited),
        r.calls.peak_per_second,
        opts.burst,
        opts.qps,
        r.calls.throttled,
        r.rss_mib,
        r.hwm_mib,
        r.cpu_s,
    );
}

fn print_breakdown(r: &RunResult) {
    #[expect(clippy::cast_precision_loss, reason = "call counts")]
    let per_node = |n: u64| n as f64 / r.nodes as f64;
    let actions: Vec<String> = (r.calls.by_action.iter())
        .map(|(action, n)| format!("{action} {:.2}", per_node(*n)))
        .collect();
    println!(
        "  {} × {}: EC2 calls per node: {} (ENIs created: {})",
        r.case.name(),
        r.nodes,
        actions.join(", "),
        r.created
    );
}

/// Run the benchmark and print its table, then each run's calls per node by action.
///
/// # Errors
/// A run did not finish in time, the operator exited, or a process could not be read.
pub fn run(opts: &EniOptions) -> Result<()> {
    println!(
        "weft-operator --ipam eni: {INSTANCE_TYPE} nodes created at once, pre-allocate \
         {PRE_ALLOCATE}, qps {} burst {}{}",
        opts.qps,
        opts.burst,
        opts.ec2_limit.map_or(String::new(), |(q, b)| format!(
            ", EC2 throttling above {q}/s burst {b}"
        ))
    );
    for case in &opts.cases {
        let (n, which) = case.floor_calls();
        println!(
            "floor of {}: {n} call(s)/node ({which}): (n·{n} − burst) / qps",
            case.name()
        );
    }
    println!(
        "| case | nodes | seconds | floor | ratio | EC2 calls/node | peak req/s (1 s window) | throttled | RSS end / peak | CPU |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut results = Vec::new();
    for &case in &opts.cases {
        for &nodes in &opts.nodes {
            let r = run_one(opts, case, nodes)?;
            print_row(opts, &r);
            results.push(r);
        }
    }
    println!();
    for r in &results {
        print_breakdown(r);
    }
    Ok(())
}
