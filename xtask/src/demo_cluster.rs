//! `cargo xtask demo-cluster`: weft's cluster mode on one machine. Two nodes are two network
//! namespaces joined by a veth; the API server is weft's Kubernetes API *emulator* (the
//! `kube-emulator` program of the tests crate — not a real kube-apiserver) on node-a, reached
//! over loopback there and over the link from node-b. `weft-operator` (multi-pool, elected
//! leader through a Lease) hands out blocks of two CiliumPodIPPools created with kubectl, a
//! `weft-agent` on each node asks for them, and four pods — one per node and pool — are wired
//! by `weft-cni` as a container runtime wires them. They ping each other across nodes and
//! pools; then the CiliumNodes are shown through kubectl as a user reads them, with Cilium's
//! troubleshooting command. Every command is echoed (`+ cmd`) before it runs; everything is
//! torn down afterwards, also when a step fails, unless `--keep` is given.
//!
//! This file owns the flow, the names and the background programs; kubectl is in `kubectl`,
//! the pods and `weft-cni` in `pods`, what was created and its teardown in `teardown`.

mod aws;
mod azure;
mod kubectl;
mod pods;
mod teardown;

use std::{
    ffi::OsStr,
    fs,
    io::{Read as _, Write as _},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, ensure};
use clap::Args;

use self::{
    azure::{ARM_PORT, nic_addresses, start_arm},
    kubectl::{kubectl, kubectl_alias, kubectl_create, kubectl_shown, show_cilium_nodes},
    pods::{add_pods, netconf, ping_pods},
    teardown::{Created, Daemon, cleanup, print_steps, remove_stale},
};
use crate::{run, setup, target_dir, workspace_root};

/// Arguments of `cargo xtask demo-cluster` and `cargo xtask demo-azure`.
#[derive(Debug, Args)]
pub struct DemoClusterArgs {
    /// Leave the cluster running (also after a failure) and print how to use and remove it.
    #[arg(long)]
    pub keep: bool,
}

/// Which IPAM the demo runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Multi-pool blocks of two CiliumPodIPPools.
    MultiPool,
    /// Azure IPAM: the nodes are VMSS instances in the ARM *emulator*, their pods take
    /// addresses of the instances' NICs.
    Azure,
    /// ENI IPAM: the nodes are instances in the EC2 *emulator*, their pods take addresses of
    /// the ENIs the operator creates, which the demo plugs into the nodes.
    Aws,
}

impl Mode {
    const fn ipam(self) -> &'static str {
        match self {
            Self::MultiPool => "multi-pool",
            Self::Azure => "azure",
            Self::Aws => "eni",
        }
    }
}

/// Everything the demo writes lives here: kubeconfigs, logs, pid files, each node's state.
const DIR: &str = "/var/run/weft-demo-cluster";
/// Where the API server listens, on node-a.
const API_PORT: u16 = 6443;
/// The annotation (on a pod or its namespace) that picks the pod's pool.
const POOL_ANNOTATION: &str = "ipam.cilium.io/ip-pool";

/// A node: a network namespace with one end of the veth.
#[derive(Debug)]
struct Node {
    name: &'static str,
    netns: &'static str,
    dev: &'static str,
    ip: &'static str,
}

const NODES: [Node; 2] = [
    Node {
        name: "node-a",
        netns: "weft-dc-node-a",
        dev: "wdc-a",
        ip: "192.0.2.11",
    },
    Node {
        name: "node-b",
        netns: "weft-dc-node-b",
        dev: "wdc-b",
        ip: "192.0.2.12",
    },
];

impl Node {
    fn netns_path(&self) -> String {
        format!("/var/run/netns/{}", self.netns)
    }
    fn pin_dir(&self) -> String {
        format!("/sys/fs/bpf/weft-demo-cluster-{}", self.name)
    }
    fn dir(&self) -> PathBuf {
        path(self.name)
    }
    /// node-a reaches the API server over loopback, node-b over the link.
    fn kubeconfig(&self) -> PathBuf {
        path(&format!("kubeconfig-{}", self.name))
    }
    /// `nsenter --net=<node> <program>`: only the network namespace changes (so bpffs and
    /// every path stay the host's).
    fn enter(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net={}", self.netns_path())).arg(program);
        cmd
    }
}

fn node(name: &str) -> &'static Node {
    NODES
        .iter()
        .find(|n| n.name == name)
        .expect("pods name known nodes")
}

/// A pod: (namespace, name, node); its pool comes from its namespace's annotation.
#[derive(Debug)]
struct Pod {
    ns: &'static str,
    name: &'static str,
    node: &'static str,
}

const PODS: [Pod; 4] = [
    Pod {
        ns: "default",
        name: "web-a",
        node: "node-a",
    },
    Pod {
        ns: "default",
        name: "web-b",
        node: "node-b",
    },
    Pod {
        ns: "mars",
        name: "rover-a",
        node: "node-a",
    },
    Pod {
        ns: "mars",
        name: "rover-b",
        node: "node-b",
    },
];

impl Pod {
    fn netns(&self) -> String {
        format!("weft-dc-{}", self.name)
    }
    fn netns_path(&self) -> String {
        format!("/var/run/netns/{}", self.netns())
    }
    fn id(&self) -> String {
        format!("demo-cluster-{}", self.name)
    }
}

fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

fn bin(name: &str) -> PathBuf {
    target_dir().join("release").join(name)
}

fn section(title: &str) {
    println!("\n==> {title}");
}

/// Runs setup, builds the release binaries and runs the demo, cleaning up unless `keep`.
pub fn demo_cluster(args: &DemoClusterArgs, mode: Mode) -> Result<()> {
    run::require_root("the demo loads eBPF and creates network namespaces")?;
    setup::setup()?;
    section("build the release agent, CNI plugin and operator, and the API server emulator");
    // One invocation: the packages share dependencies, which then get one feature set.
    let mut build = Command::new("cargo");
    build.current_dir(workspace_root()).args([
        "build",
        "--release",
        "-p",
        "weft-agent",
        "-p",
        "weft-operator",
        "-p",
        "weft-tests",
    ]);
    for name in [
        "weft-agent",
        "weft-cni",
        "weft-operator",
        "kube-emulator",
        "arm-emulator",
        "ec2-emulator",
    ] {
        build.args(["--bin", name]);
    }
    run::echo_run(&mut build)?;
    remove_stale()?;

    let mut created = Created::default();
    let result = run_demo(&mut created, mode);
    if result.is_err() {
        for daemon in &created.daemons {
            let log = path(&format!("{}.log", daemon.file));
            let text = fs::read_to_string(&log).unwrap_or_default();
            eprintln!(
                "\n--- {} ---\n{text}--- end of {} ---",
                log.display(),
                daemon.file
            );
        }
    }
    if args.keep {
        section("--keep: the cluster stays up");
        println!("the API server is the emulator on node-a; talk to it with");
        println!("  {}", kubectl_alias());
        println!("  kubectl get ciliumnodes -o yaml");
        println!("logs are in {DIR}/*.log. To clean up, run (or rerun the demo):");
        print_steps(&created);
        return result;
    }
    section("clean up");
    let cleaned = cleanup(&created);
    if let (Err(_), Err(err)) = (&result, &cleaned) {
        eprintln!("warning: cleanup after the failure also failed: {err:#}");
    }
    result.and(cleaned)
}

fn run_demo(created: &mut Created, mode: Mode) -> Result<()> {
    created.dir = true;
    for node in &NODES {
        fs::create_dir_all(node.dir())
            .with_context(|| format!("creating {}", node.dir().display()))?;
    }
    make_nodes(created)?;
    start_api_server(created)?;
    match mode {
        Mode::MultiPool => {}
        Mode::Azure => start_arm(created)?,
        Mode::Aws => {
            aws::make_vpc(created)?;
            aws::start_ec2(created)?;
        }
    }
    register(created, mode)?;
    start_agents(created, mode)?;
    let addrs = add_pods(created)?;
    ping_pods(&addrs, mode)?;
    show_cilium_nodes(mode)
}

/// Two node namespaces that forward IPv4, joined by a veth.
fn make_nodes(created: &mut Created) -> Result<()> {
    section("the nodes: two network namespaces joined by a veth");
    for (i, node) in NODES.iter().enumerate() {
        run::echo_run(Command::new("ip").args(["netns", "add", node.netns]))?;
        created.nodes.push(i);
        run::echo_run(Command::new("ip").args(["-n", node.netns, "link", "set", "lo", "up"]))?;
        run::echo_run(node.enter("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]))?;
    }
    let [a, b] = &NODES;
    run::echo_run(Command::new("ip").args([
        "link", "add", a.dev, "netns", a.netns, "type", "veth", "peer", "name", b.dev, "netns",
        b.netns,
    ]))?;
    for node in &NODES {
        let addr = format!("{}/25", node.ip);
        run::echo_run(
            Command::new("ip").args(["-n", node.netns, "addr", "add", &addr, "dev", node.dev]),
        )?;
        run::echo_run(Command::new("ip").args(["-n", node.netns, "link", "set", node.dev, "up"]))?;
    }
    Ok(())
}

/// Start a program in the background with its output in `<file>.log` and its pid in
/// `<file>.pid`.
fn start_daemon(
    created: &mut Created,
    comm: &'static str,
    file: &'static str,
    cmd: &mut Command,
) -> Result<Daemon> {
    let log = path(&format!("{file}.log"));
    println!("+ {} >{} 2>&1 &", run::display(cmd), log.display());
    let out = fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("cannot run `{}`", run::display(cmd)))?;
    let daemon = Daemon {
        comm,
        file,
        pid: child.id(),
    };
    fs::write(path(&format!("{file}.pid")), format!("{}\n", daemon.pid))?;
    created.daemons.push(daemon);
    Ok(daemon)
}

/// Polls `done` every 50 ms until it holds; fails after `secs` seconds or when `done` fails.
fn wait(secs: u64, what: &str, mut done: impl FnMut() -> Result<bool>) -> Result<Duration> {
    let start = Instant::now();
    while !done()? {
        ensure!(
            start.elapsed().as_secs() < secs,
            "gave up after {secs} s waiting for {what}"
        );
        sleep(Duration::from_millis(50));
    }
    Ok(start.elapsed())
}

/// Whether the agent answers on `socket`: a bare newline gets a decode error back, so the
/// probe leaves no warning in the agent's log.
fn answers(socket: &Path) -> bool {
    let probe = |mut stream: UnixStream| {
        stream.write_all(b"\n")?;
        stream.read_to_end(&mut Vec::new())
    };
    matches!(UnixStream::connect(socket).and_then(probe), Ok(1..))
}

/// Wait until `daemon`'s log has a line containing `text`.
fn wait_log(daemon: Daemon, secs: u64, text: &str) -> Result<Duration> {
    let log = path(&format!("{}.log", daemon.file));
    wait(secs, &format!("{text:?} in {}", log.display()), || {
        ensure!(
            daemon.running(),
            "{} exited; see {}",
            daemon.comm,
            log.display()
        );
        Ok(fs::read_to_string(&log).unwrap_or_default().contains(text))
    })
}

fn start_api_server(created: &mut Created) -> Result<()> {
    section("the API server: weft's Kubernetes API EMULATOR on node-a (not a real kube-apiserver)");
    println!(
        "The emulator (tests/src/kube, run as the `kube-emulator` program) speaks the Kubernetes\n\
         API's wire protocol to kubectl and kube-rs and keeps every object in memory. There is no\n\
         scheduler, kubelet or controller manager: this demo registers the Nodes and plays the\n\
         container runtime itself. Everything else below is the real weft."
    );
    let a = &NODES[0];
    let listen = format!("0.0.0.0:{API_PORT}");
    let mut emulator = a.enter(bin("kube-emulator"));
    emulator
        .args(["--listen", &listen, "--kubeconfig-out"])
        .arg(a.kubeconfig());
    let daemon = start_daemon(created, "kube-emulator", "kube-emulator", &mut emulator)?;
    wait_log(daemon, 20, "listening on")?;
    let text = fs::read_to_string(a.kubeconfig())?;
    let local = format!("http://127.0.0.1:{API_PORT}");
    ensure!(
        text.contains(&local),
        "the kubeconfig names no {local}:\n{text}"
    );
    let remote = format!("http://{}:{API_PORT}", a.ip);
    fs::write(NODES[1].kubeconfig(), text.replace(&local, &remote))?;
    println!(
        "{} (server {local}); node-b's copy {} (server {remote})",
        a.kubeconfig().display(),
        NODES[1].kubeconfig().display()
    );
    println!(
        "\nkubectl runs on node-a too; every `kubectl` below is\n  {}",
        kubectl_alias()
    );
    kubectl(&["get", "namespaces"])
}

/// The Nodes (as kubelets register them), the pools and the pods' namespace, the operator.
fn register(created: &mut Created, mode: Mode) -> Result<()> {
    section("what the kubelets would register: the two Nodes");
    let nodes: Vec<String> = NODES
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let spec = match mode {
                Mode::MultiPool => String::new(),
                Mode::Azure => format!("spec:\n  providerID: {}\n", azure::provider_id(i)),
                Mode::Aws => format!("spec:\n  providerID: {}\n", aws::provider_id(i)),
            };
            format!(
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: {0}\n  labels:\n    kubernetes.io/hostname: {0}\n\
                 {spec}status:\n  addresses:\n  - type: InternalIP\n    address: {1}\n  - type: Hostname\n    address: {0}\n",
                n.name, n.ip
            )
        })
        .collect();
    kubectl_create("nodes.yaml", &nodes.join("---\n"))?;
    if mode != Mode::MultiPool {
        section(
            "the pods' second namespace (no pools: every pod takes an address of the cloud's interfaces)",
        );
        kubectl_create(
            "namespace.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: mars\n",
        )?;
        return start_operator(created, mode);
    }

    section("two CiliumPodIPPools, and a namespace whose pods take pool mars");
    let pools = "apiVersion: cilium.io/v2alpha1\nkind: CiliumPodIPPool\nmetadata:\n  name: default\n\
                 spec:\n  ipv4:\n    cidrs: [10.10.0.0/16]\n    maskSize: 27\n---\n\
                 apiVersion: cilium.io/v2alpha1\nkind: CiliumPodIPPool\nmetadata:\n  name: mars\n\
                 spec:\n  ipv4:\n    cidrs: [10.20.0.0/16]\n    maskSize: 27\n";
    kubectl_create("pools.yaml", pools)?;
    let namespace = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: mars\n  annotations:\n    {POOL_ANNOTATION}: mars\n"
    );
    kubectl_create("namespace.yaml", &namespace)?;
    start_operator(created, mode)
}

/// weft-operator on node-a, in `mode`, leading through a Lease.
fn start_operator(created: &mut Created, mode: Mode) -> Result<()> {
    section(&format!(
        "weft-operator on node-a: {}, leader elected through a Lease",
        mode.ipam()
    ));
    let a = &NODES[0];
    let mut operator = a.enter(bin("weft-operator"));
    operator
        .env("RUST_LOG", "info")
        .arg("--kubeconfig")
        .arg(a.kubeconfig())
        .args(["--ipam", mode.ipam()]);
    let ready = match mode {
        Mode::MultiPool => "every CiliumNode listed",
        Mode::Azure => {
            // The cloud, subscription and resource group come from the emulator's IMDS.
            let arm = format!("http://127.0.0.1:{ARM_PORT}");
            operator
                .args(["--azure-arm-endpoint", &arm])
                .args(["--azure-imds-endpoint", &arm]);
            "initial synchronization with instances API done"
        }
        Mode::Aws => {
            aws::operator_flags(&mut operator);
            "initial synchronization with instances API done"
        }
    };
    let daemon = start_daemon(created, "weft-operator", "operator", &mut operator)?;
    let took = wait_log(daemon, 30, ready)?;
    println!(
        "the operator leads and has listed the cluster after {:.1} s",
        took.as_secs_f64()
    );
    kubectl(&[
        "-n",
        "kube-system",
        "get",
        "lease",
        "weft-operator-resource-lock",
        "-o",
        "jsonpath={.spec.holderIdentity}{\"\\n\"}",
    ])
}

fn start_agents(created: &mut Created, mode: Mode) -> Result<()> {
    section(match mode {
        Mode::MultiPool => {
            "a weft-agent on each node: multi-pool, 8 addresses pre-allocated in each pool"
        }
        Mode::Azure => {
            "a weft-agent on each node: azure, addresses from the node's NIC (8 kept free)"
        }
        Mode::Aws => {
            "a weft-agent on each node: eni, seeded from IMDS, addresses from ENI 1 (8 kept free)"
        }
    });
    let config = if mode == Mode::Aws {
        Some(aws::agent_config()?)
    } else {
        None
    };
    let mut daemons = Vec::new();
    for (i, node) in NODES.iter().enumerate() {
        let dir = node.dir();
        let mut agent = node.enter(bin("weft-agent"));
        agent
            .env("RUST_LOG", "info")
            .args([
                "--pin-dir",
                &node.pin_dir(),
                "run",
                "--node-name",
                node.name,
            ])
            .arg("--kubeconfig")
            .arg(node.kubeconfig())
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--socket")
            .arg(dir.join("weft.sock"))
            .arg("--delete-queue-dir")
            .arg(dir.join("delete-queue"))
            .args(["--ipam", mode.ipam()])
            .args(["--ipam-cilium-node-update-rate", "1s"])
            .args(["--devices", node.dev]);
        match &config {
            // ENI mode routes each pod through its ENI: no routes between the nodes.
            Some(config) => {
                agent
                    .args(["--aws-imds-endpoint", &aws::imds_url(), "--config"])
                    .arg(config);
            }
            None => {
                agent.args(["--auto-direct-node-routes", "true"]);
            }
        }
        if mode == Mode::MultiPool {
            agent.args(["--ipam-multi-pool-pre-allocation", "default=8,mars=8"]);
        }
        created.pin_dirs.push(i);
        let file = if i == 0 {
            "agent-node-a"
        } else {
            "agent-node-b"
        };
        daemons.push(start_daemon(created, "weft-agent", file, &mut agent)?);
        fs::write(dir.join("weft.conf"), format!("{}\n", netconf(node)))?;
    }
    for (node, daemon) in NODES.iter().zip(daemons) {
        let socket = node.dir().join("weft.sock");
        let took = wait(60, "the agent's socket", || {
            ensure!(daemon.running(), "weft-agent on {} exited", node.name);
            Ok(answers(&socket))
        })?;
        println!(
            "{}'s agent serves {} after {:.1} s",
            node.name,
            socket.display(),
            took.as_secs_f64()
        );
    }
    match mode {
        Mode::MultiPool => {}
        Mode::Azure => return nic_addresses(),
        Mode::Aws => return aws::plug_enis(),
    }
    pool_blocks()
}

/// Multi-pool: wait until both nodes hold blocks of both pools; show them.
fn pool_blocks() -> Result<()> {
    let took = wait(
        30,
        "the operator to allocate both pools to both nodes",
        || {
            let text = run::output(&mut kubectl_shown(&["get", "ciliumnodes", "-o", "json"]))?;
            let list: serde_json::Value = serde_json::from_str(&text)?;
            let items = list["items"].as_array().cloned().unwrap_or_default();
            Ok(items.len() == NODES.len()
                && items.iter().all(|n| {
                    n["spec"]["ipam"]["pools"]["allocated"]
                        .as_array()
                        .is_some_and(|a| a.len() == 2)
                }))
        },
    )?;
    println!(
        "both nodes hold blocks of both pools (after {:.1} s more)",
        took.as_secs_f64()
    );
    println!("\nwhat each agent asked for, and what the operator gave it:");
    kubectl(&[
        "get",
        "ciliumnodes",
        "-o",
        "custom-columns=NAME:.metadata.name,REQUESTED:.spec.ipam.pools.requested[*].pool,ALLOCATED:.spec.ipam.pools.allocated[*].cidrs[*]",
    ])
}
