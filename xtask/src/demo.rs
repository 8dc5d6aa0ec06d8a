//! `cargo xtask demo`: the whole single-host agent flow, live on this machine. The root network
//! namespace plays the node: `weft-agent run` serves IPAM from a copy of `examples/store/` and
//! wires pods into the eBPF datapath, and `weft-cni` is called for three pods exactly as a
//! container runtime calls it. The pods ping each other, then the CiliumNode the agent wrote
//! back, the endpoints, the counters and bpftool's map dump are shown. Then pool `venus`, whose
//! blocks hold two addresses each, gets three pods: the agent asks for more addresses and the
//! operator's allocator, which runs in-process on the store, carves a second block (the
//! CiliumNode's `spec.ipam.pools.allocated` is printed before and after). Every command is
//! echoed (`+ cmd`) before it runs, so the output doubles as a transcript of how to drive weft
//! by hand. Everything is torn down afterwards, also when a step fails, unless `--keep` is
//! given.

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
use serde_json::Value;

use crate::{run, setup, target_dir, workspace_root};

/// Arguments of `cargo xtask demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Leave the agent and the pods running (also after a failure) and print how to remove them.
    #[arg(long)]
    pub keep: bool,
}

/// Everything the demo writes lives here: store copy, agent state, socket, log, netconf.
const DIR: &str = "/var/run/weft-demo";
/// The agent's default bpffs directory (`--pin-dir`).
const PIN_DIR: &str = "/sys/fs/bpf/weft";
/// The network configuration a runtime reads from `/etc/cni/net.d/` and passes on stdin.
const NETCONF: &str = r#"{"cniVersion":"1.0.0","name":"weft","type":"weft-cni","agent-socket":"/var/run/weft-demo/weft.sock","delete-queue-dir":"/var/run/weft-demo/delete-queue"}"#;

/// The pods of `examples/store/` as (namespace, name); each is played by a network namespace.
const PODS: [Pod; 3] = [
    Pod("default", "web"),
    Pod("default", "db"),
    Pod("mars", "rover"),
];

/// Pods of pool `venus` (podSelector `app: venus`), added after the first three.
const VENUS_PODS: [Pod; 3] = [
    Pod("default", "venus-1"),
    Pod("default", "venus-2"),
    Pod("default", "venus-3"),
];

/// Pool `venus`, written into the demo's store: /30 and /126 blocks of two usable addresses.
const VENUS_POOL: &str = "apiVersion: cilium.io/v2alpha1
kind: CiliumPodIPPool
metadata:
  name: venus
spec:
  ipv4:
    cidrs: [10.202.0.0/24]
    maskSize: 30
  ipv6:
    cidrs: [fd00:202::/112]
    maskSize: 126
  podSelector:
    matchLabels:
      app: venus
";

/// The first IPv4 block of pool `venus` (its pre-allocation asks for one address).
const VENUS_FIRST_BLOCK: &str = "10.202.0.0/30";
/// The second IPv4 block of pool `venus` (the allocator carves blocks in order).
const VENUS_SECOND_BLOCK: &str = "10.202.0.4/30";

#[derive(Debug)]
struct Pod(&'static str, &'static str);

impl Pod {
    fn netns(&self) -> String {
        format!("weft-demo-{}", self.1)
    }
    fn netns_path(&self) -> PathBuf {
        Path::new("/var/run/netns").join(self.netns())
    }
    fn id(&self) -> String {
        format!("demo-{}", self.1)
    }
    fn owner(&self) -> String {
        format!("{}/{}", self.0, self.1)
    }
}

/// Whether `pid` is a live `weft-agent` (ours, or one an earlier `--keep` left running).
fn running(pid: u32) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.split_once(" (weft-agent) ").map(|(_, rest)| rest);
    state.is_some_and(|state| !state.starts_with('Z'))
}

/// What the demo has created so far, so that cleanup undoes exactly that.
#[derive(Debug, Default)]
struct Created {
    dir: bool,
    pin_dir: bool,
    agent: Option<u32>,
    netns: Vec<&'static Pod>,
    added: Vec<&'static Pod>,
}

/// One cleanup action, run or (with `--keep`) printed.
#[derive(Debug)]
enum Step {
    CniDel(&'static Pod),
    PodDel(&'static Pod),
    NetnsDel(&'static Pod),
    StopAgent(u32),
    Remove(&'static str),
}

/// Runs setup, builds the release agent and plugin, and runs the demo, cleaning up unless `keep`.
pub fn demo(args: &DemoArgs) -> Result<()> {
    run::require_root("the demo loads eBPF and creates network namespaces")?;
    setup::setup()?;
    section("build the release agent and CNI plugin");
    let build = ["build", "--release", "-p", "weft-agent"];
    run::echo_run(cmd("cargo", build).current_dir(workspace_root()))?;
    for bin in [bin("weft-agent"), bin("weft-cni")] {
        ensure!(bin.is_file(), "the build did not produce {}", bin.display());
    }
    remove_stale()?;

    let mut created = Created::default();
    let result = run_demo(&mut created);
    if result.is_err() && created.agent.is_some() {
        let log = fs::read_to_string(path("agent.log")).unwrap_or_default();
        eprintln!("\n--- {DIR}/agent.log ---\n{log}--- end of the agent log ---");
    }
    if args.keep {
        section("--keep: the agent and the pods stay up");
        println!("try e.g. `ip netns exec weft-demo-rover ip -brief address`, or look at");
        println!("{DIR}/agent.log and {DIR}/store/. To clean up, run (or rerun the demo):");
        for step in steps(&created) {
            let line = match step {
                Step::CniDel(pod) => cni_line("DEL", pod).replace('\n', "\n  "),
                _ => run::display(&command(&step)),
            };
            println!("  {line}");
        }
        return result;
    }
    section("clean up");
    let cleanup = cleanup(&created);
    if let (Err(_), Err(cleanup_err)) = (&result, &cleanup) {
        eprintln!("warning: cleanup after the failure also failed: {cleanup_err:#}");
    }
    result.and(cleanup)
}

fn run_demo(created: &mut Created) -> Result<()> {
    section("the store: node1's CiliumNode, the IP pools, namespaces and pods");
    created.dir = true;
    fs::create_dir_all(DIR).with_context(|| format!("creating {DIR}"))?;
    let (example, store) = (workspace_root().join("examples/store"), path("store"));
    run::echo_run(Command::new("cp").arg("-r").arg(example).arg(&store))?;
    println!("+ find {} -type f | sort", store.display());
    println!(
        "+ cat > {}/ciliumpodippools/venus.yaml  # and pods/default/venus-{{1,2,3}}.yaml",
        store.display()
    );
    fs::write(store.join("ciliumpodippools/venus.yaml"), VENUS_POOL)?;
    for pod in &VENUS_PODS {
        fs::write(
            store.join(format!("pods/{}/{}.yaml", pod.0, pod.1)),
            pod_doc(pod),
        )?;
    }
    let found = run::output(Command::new("find").arg(&store).args(["-type", "f"]))?;
    let mut files: Vec<&str> = found.lines().collect();
    files.sort_unstable();
    println!("{}", files.join("\n"));
    fs::write(path("weft.conf"), format!("{NETCONF}\n"))?;

    section("start the agent in the background (the root network namespace is the node)");
    created.pin_dir = !Path::new(PIN_DIR).exists();
    let agent = *created.agent.insert(start_agent(&store)?);
    let socket = path("weft.sock");
    let took = wait(20, "the agent's socket", || {
        ensure!(running(agent), "weft-agent exited during startup");
        Ok(answers(&socket))
    })?;
    let (sock, took) = (socket.display(), took.as_secs_f64());
    println!("the agent serves {sock} after {took:.1} s");
    let node = store.join("ciliumnodes/node1.yaml");
    let took = wait(20, "pool venus's first block", || {
        Ok(fs::read_to_string(&node)?.contains(VENUS_FIRST_BLOCK))
    })?;
    let took = took.as_secs_f64();
    println!("the in-process allocator carved venus its first block after {took:.1} s more");

    section("add the pods as a container runtime does: a network namespace, then weft-cni ADD");
    println!("stdin of every weft-cni call, {DIR}/weft.conf:\n{NETCONF}\n");
    let mut addrs = Vec::new();
    for pod in &PODS {
        created.netns.push(pod);
        run::echo_run(&mut ip_netns("add", pod))?;
        created.added.push(pod);
        let result: Value = serde_json::from_str(&cni_retrying(pod)?)?;
        let cidrs = json_strs(&result["ips"], "address");
        let mut ips: Vec<&str> = cidrs.filter_map(|cidr| cidr.split('/').next()).collect();
        ips.sort_by_key(|ip| ip.contains(':'));
        let (name, owner, pools) = (pod.1, pod.owner(), pools_of(pod)?);
        println!("{name} ({owner}): {} from pool {pools}\n", ips.join(", "));
        addrs.push(ips.iter().map(ToString::to_string).collect::<Vec<_>>());
    }
    println!("why rover got pool mars:");
    let explain = ["ipam", "explain", "mars/rover", "--socket"];
    run::echo_run(cmd(bin("weft-agent"), explain).arg(&socket))?;

    section("pods reach each other over IPv4 and IPv6, also across pools");
    for (from, to, v6) in [(0, 1, false), (0, 1, true), (0, 2, false), (2, 1, false)] {
        let ip = addrs[to].iter().find(|addr| addr.contains(':') == v6);
        let ip = ip.context("a pod got no address of this family")?;
        run::echo_run(ip_netns("exec", &PODS[from]).args(["ping", "-c", "2", "-i", "0.2", ip]))?;
    }

    section("the CiliumNode's pools as the agent wrote them back (debounced by 2 s)");
    sleep(Duration::from_millis(2500));
    let node = store.join("ciliumnodes/node1.yaml");
    let text = fs::read_to_string(&node).with_context(|| format!("reading {}", node.display()))?;
    let mut lines = text.lines().skip_while(|line| *line != "  ipam:");
    let head = lines.next().unwrap_or(&text);
    let ipam: Vec<&str> = lines.take_while(|line| line.starts_with("   ")).collect();
    let (node, ipam) = (node.display(), ipam.join("\n"));
    println!("spec.ipam of {node}:\n{head}\n{ipam}");

    grow_venus(created, &store)?;

    section("what the datapath knows");
    run::echo_run(&mut cmd(bin("weft-agent"), ["bpf", "endpoint", "list"]))?;
    run::echo_run(&mut cmd(bin("weft-agent"), ["bpf", "counters"]))?;
    let map = format!("{PIN_DIR}/weft_eps_v1");
    run::echo_run(&mut cmd("bpftool", ["map", "dump", "pinned", &map]))
}

/// Pool `venus` grows by a block when its pods need one: the in-process allocator answers the
/// agent's `requested`.
fn grow_venus(created: &mut Created, store: &Path) -> Result<()> {
    section("pool venus grows by a block when its pods need it (the allocator runs in-process)");
    let node = store.join("ciliumnodes/node1.yaml");
    let before = fs::read_to_string(&node)?;
    println!("spec.ipam.pools.allocated before (venus: one block of 2 addresses per family):");
    println!("{}\n", allocated_section(&before));
    for pod in &VENUS_PODS {
        created.netns.push(pod);
        run::echo_run(&mut ip_netns("add", pod))?;
        created.added.push(pod);
        let result: Value = serde_json::from_str(&cni_retrying(pod)?)?;
        let cidrs = json_strs(&result["ips"], "address");
        let mut ips: Vec<&str> = cidrs.filter_map(|cidr| cidr.split('/').next()).collect();
        ips.sort_by_key(|ip| ip.contains(':'));
        let (name, owner, pools) = (pod.1, pod.owner(), pools_of(pod)?);
        println!("{name} ({owner}): {} from pool {pools}\n", ips.join(", "));
    }
    wait(20, "the second venus block", || {
        Ok(fs::read_to_string(&node)?.contains(VENUS_SECOND_BLOCK))
    })?;
    let after = fs::read_to_string(&node)?;
    println!("spec.ipam.pools.allocated after (venus: a second block, carved as its pods asked):");
    println!("{}", allocated_section(&after));
    Ok(())
}

/// The `allocated:` list under `spec.ipam.pools` of a CiliumNode's YAML text.
fn allocated_section(text: &str) -> String {
    let mut lines = text
        .lines()
        .skip_while(|line| line.trim_end() != "      allocated:");
    let head = lines.next().unwrap_or("(no spec.ipam.pools.allocated)");
    let body = lines.take_while(|line| line.starts_with("      -") || line.starts_with("        "));
    std::iter::once(head)
        .chain(body)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A Pod document for `pod`, labelled `app: venus`.
fn pod_doc(pod: &Pod) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {}\n  namespace: {}\n  labels:\n    \
         app: venus\nspec:\n  nodeName: node1\n",
        pod.1, pod.0
    )
}

/// ADD as a runtime does, retried while the agent answers "try again later" (11) or "pool
/// exhausted" (100: its next block is on the way), as kubelet retries a sandbox.
fn cni_retrying(pod: &Pod) -> Result<String> {
    let start = Instant::now();
    loop {
        match cni("ADD", pod) {
            Ok(out) => return Ok(out),
            Err(err) if start.elapsed() < Duration::from_secs(20) => {
                let err = format!("{err:#}");
                println!("({}; retrying in 0.5 s as a runtime would)", err.trim_end());
                sleep(Duration::from_millis(500));
            }
            Err(err) => return Err(err),
        }
    }
}

fn section(title: &str) {
    println!("\n==> {title}");
}

fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

fn bin(name: &str) -> PathBuf {
    target_dir().join("release").join(name)
}

fn cmd<S: AsRef<OsStr>>(program: impl AsRef<OsStr>, args: impl IntoIterator<Item = S>) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd
}

fn ip_netns(verb: &str, pod: &Pod) -> Command {
    cmd("ip", ["netns", verb, &pod.netns()])
}

/// The string field `key` of every object in the JSON array `array`.
fn json_strs<'a>(array: &'a Value, key: &'a str) -> impl Iterator<Item = &'a str> {
    let items = array.as_array().into_iter().flatten();
    items.filter_map(move |item| item[key].as_str())
}

/// The pools of `pod`'s addresses, from the endpoint record in the agent's state dir.
fn pools_of(pod: &Pod) -> Result<String> {
    let record = path(&format!("state/endpoints/{}_eth0.json", pod.id()));
    let text = fs::read(&record).with_context(|| format!("reading {}", record.display()))?;
    let record: Value = serde_json::from_slice(&text).context("an endpoint record is not JSON")?;
    let mut pools: Vec<&str> = json_strs(&record["addrs"], "pool").collect();
    pools.dedup();
    Ok(pools.join(", "))
}

/// Polls `done` every 50 ms until it holds; fails after `secs` seconds or when `done` fails.
fn wait(secs: u64, what: &str, mut done: impl FnMut() -> Result<bool>) -> Result<Duration> {
    let start = Instant::now();
    while !done()? {
        let waited = start.elapsed().as_secs();
        ensure!(waited < secs, "gave up after {secs} s waiting for {what}");
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

fn start_agent(store: &Path) -> Result<u32> {
    let mut agent = cmd(bin("weft-agent"), ["run", "--node-name", "node1"]);
    agent.arg("--store").arg(store);
    agent.arg("--state-dir").arg(path("state"));
    agent.arg("--socket").arg(path("weft.sock"));
    agent.arg("--delete-queue-dir").arg(path("delete-queue"));
    agent.args(["--ipam", "multi-pool", "--enable-ipv6", "true"]);
    agent.args([
        "--ipam-multi-pool-pre-allocation",
        "default=8,mars=4,venus=1",
    ]);
    agent.args(["--ipam-cilium-node-update-rate", "2s"]);
    let log = path("agent.log");
    println!("+ {} 2>{} &", run::display(&agent), log.display());
    let log = fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let child = agent.stdin(Stdio::null()).stderr(log).spawn();
    let child = child.with_context(|| format!("cannot run `{}`", run::display(&agent)))?;
    let pid = child.id();
    fs::write(path("agent.pid"), format!("{pid}\n"))?;
    println!("weft-agent runs as pid {pid}");
    Ok(pid)
}

/// The `CNI_*` environment a runtime sets for `verb` on `pod`.
fn cni_env(verb: &str, pod: &Pod) -> [(&'static str, String); 6] {
    let args = format!("K8S_POD_NAMESPACE={};K8S_POD_NAME={}", pod.0, pod.1);
    let netns = pod.netns_path();
    [
        ("CNI_COMMAND", verb.to_owned()),
        ("CNI_CONTAINERID", pod.id()),
        ("CNI_NETNS", netns.display().to_string()),
        ("CNI_IFNAME", "eth0".to_owned()),
        ("CNI_ARGS", args),
        ("CNI_PATH", "/opt/cni/bin".to_owned()),
    ]
}

/// The weft-cni call as a shell command, wrapped: four variables, two more, the program.
fn cni_line(verb: &str, pod: &Pod) -> String {
    let quote = |(k, v): (_, String)| {
        let q = if v.contains(';') { "'" } else { "" };
        format!("{k}={q}{v}{q}")
    };
    let env = cni_env(verb, pod).map(quote);
    let (env1, env2, cni) = (env[..4].join(" "), env[4..].join(" "), bin("weft-cni"));
    let cni = cni.display();
    format!("{env1} \\\n    {env2} \\\n    {cni} < {DIR}/weft.conf")
}

fn cni_command(verb: &str, pod: &Pod) -> Command {
    let mut cni = Command::new(bin("weft-cni"));
    cni.envs(cni_env(verb, pod));
    cni
}

/// Runs `weft-cni` for `verb` on `pod` as a runtime does and returns what it printed.
fn cni(verb: &str, pod: &Pod) -> Result<String> {
    println!("+ {}", cni_line(verb, pod));
    let conf = fs::File::open(path("weft.conf")).context("opening the network configuration")?;
    let mut cni = cni_command(verb, pod);
    let out = cni.stdin(conf).stderr(Stdio::inherit()).output()?;
    let (status, stdout) = (out.status, String::from_utf8_lossy(&out.stdout));
    ensure!(status.success(), "weft-cni {verb}: {status}: {stdout}");
    Ok(stdout.trim().to_owned())
}

/// Removes what an earlier `--keep` (or interrupted) demo left: pods, agent and directory.
fn remove_stale() -> Result<()> {
    let all = PODS.iter().chain(&VENUS_PODS);
    let netns: Vec<&'static Pod> = all.filter(|p| p.netns_path().exists()).collect();
    let dir = Path::new(DIR).exists();
    if netns.is_empty() && !dir {
        return Ok(());
    }
    section("remove the leftovers of an earlier demo");
    let pid = fs::read_to_string(path("agent.pid")).unwrap_or_default();
    let agent = pid.trim().parse().ok();
    let added = netns.clone();
    cleanup(&Created {
        dir,
        pin_dir: false,
        agent,
        netns,
        added,
    })
}

/// Cleanup for `created`, in order: DEL through the agent while it runs (else `weft-agent pod
/// del` on the pinned maps), the namespaces, the agent, then the directories.
fn steps(created: &Created) -> Vec<Step> {
    let agent = created.agent.filter(|&pid| running(pid));
    let del = |&pod| match agent {
        Some(_) => Step::CniDel(pod),
        None => Step::PodDel(pod),
    };
    let mut steps: Vec<Step> = created.added.iter().rev().map(del).collect();
    let netns = created.netns.iter().rev();
    let netns = netns.filter(|pod| pod.netns_path().exists());
    steps.extend(netns.map(|&pod| Step::NetnsDel(pod)));
    steps.extend(agent.map(Step::StopAgent));
    steps.extend(created.pin_dir.then_some(Step::Remove(PIN_DIR)));
    steps.extend(created.dir.then_some(Step::Remove(DIR)));
    steps
}

/// The command of a step (`CniDel` also needs the netconf on stdin: see [`cni`]).
fn command(step: &Step) -> Command {
    match step {
        Step::CniDel(pod) => cni_command("DEL", pod),
        Step::PodDel(pod) => cmd(bin("weft-agent"), ["pod", "del", "--id", &pod.id()]),
        Step::NetnsDel(pod) => ip_netns("del", pod),
        Step::StopAgent(pid) => cmd("kill", [pid.to_string()]),
        Step::Remove(path) => cmd("rm", ["-r", path]),
    }
}

/// Runs every cleanup step even if one fails; returns the first failure.
fn cleanup(created: &Created) -> Result<()> {
    let mut first_err = None;
    for step in steps(created) {
        let result = match step {
            Step::CniDel(pod) => cni("DEL", pod).map(drop),
            Step::StopAgent(pid) => run::echo_run(&mut command(&step))
                .and_then(|()| wait(10, "weft-agent to exit", || Ok(!running(pid))).map(drop)),
            _ => run::echo_run(&mut command(&step)),
        };
        if let Err(err) = result {
            eprintln!("warning: {err:#}");
            first_err.get_or_insert(err);
        }
    }
    first_err.map_or(Ok(()), Err)
}
