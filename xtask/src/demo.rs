//! `cargo xtask demo`: a live walk-through of the datapath on this machine. The root
//! network namespace plays the node; three network namespaces play pods. The release
//! `weft-agent` wires each pod up, the pods ping each other over IPv4 and IPv6, and the
//! agent's endpoint map and counters are shown. Every command is echoed (`+ cmd`) before
//! it runs, so the output doubles as a transcript of how to drive the agent by hand.
//! Everything is torn down afterwards, also when a step fails, unless `--keep` is given.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Result, bail};
use clap::Args;

use crate::{run, setup, target_dir, workspace_root};

/// Arguments of `cargo xtask demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Leave the demo pods and network namespaces in place (also after a failure) and print
    /// how to remove them.
    #[arg(long)]
    pub keep: bool,
}

/// One demo pod: a network namespace with one IPv4 and one IPv6 address.
#[derive(Debug)]
struct Pod {
    id: &'static str,
    netns: &'static str,
    ipv4: &'static str,
    ipv6: &'static str,
}

impl Pod {
    fn netns_path(&self) -> PathBuf {
        Path::new("/var/run/netns").join(self.netns)
    }
}

const PODS: [Pod; 3] = [
    Pod {
        id: "demo-a",
        netns: "weft-demo-a",
        ipv4: "10.200.0.11",
        ipv6: "fd00:200::11",
    },
    Pod {
        id: "demo-b",
        netns: "weft-demo-b",
        ipv4: "10.200.0.12",
        ipv6: "fd00:200::12",
    },
    Pod {
        id: "demo-c",
        netns: "weft-demo-c",
        ipv4: "10.200.0.13",
        ipv6: "fd00:200::13",
    },
];

const GATEWAY_V4: &str = "10.200.0.1";
const GATEWAY_V6: &str = "fd00:200::1";
const ENDPOINT_MAP_PIN: &str = "/sys/fs/bpf/weft/weft_eps_v1";

/// What the demo has created so far, so that cleanup undoes exactly that.
#[derive(Debug, Default)]
struct Created {
    netns: Vec<&'static Pod>,
    pods: Vec<&'static Pod>,
}

/// Runs setup, builds the release agent and runs the demo, cleaning up unless `keep`.
pub fn demo(args: &DemoArgs) -> Result<()> {
    run::require_root("the demo loads eBPF and creates network namespaces")?;
    setup::setup()?;
    section("build the release agent");
    run::echo_run(Command::new("cargo").current_dir(workspace_root()).args([
        "build",
        "--release",
        "-p",
        "weft-agent",
    ]))?;
    let agent = target_dir().join("release").join("weft-agent");
    if !agent.is_file() {
        bail!(
            "`cargo build --release -p weft-agent` did not produce {}",
            agent.display()
        );
    }

    remove_stale(&agent);
    let mut created = Created::default();
    let result = run_demo(&agent, &mut created);
    if args.keep {
        print_cleanup_hint(&agent);
        return result;
    }
    let cleanup = cleanup(&agent, &created);
    match (result, cleanup) {
        (Err(err), cleanup) => {
            if let Err(cleanup_err) = cleanup {
                eprintln!("warning: cleanup after the failure also failed: {cleanup_err:#}");
            }
            Err(err)
        }
        (Ok(()), cleanup) => cleanup,
    }
}

fn section(title: &str) {
    println!("\n==> {title}");
}

fn agent_cmd(agent: &Path) -> Command {
    Command::new(agent)
}

fn ip_netns(verb: &str, pod: &Pod) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", verb, pod.netns]);
    cmd
}

/// Removes namespaces (and, best effort, agent endpoints) left behind by an earlier
/// `--keep` run or an interrupted one.
fn remove_stale(agent: &Path) {
    let stale: Vec<_> = PODS
        .iter()
        .filter(|pod| pod.netns_path().exists())
        .collect();
    if stale.is_empty() {
        return;
    }
    section("remove leftovers of an earlier demo");
    for pod in stale {
        // The endpoint may already be gone; only the namespace removal matters here.
        let _ = run::echo_run(agent_cmd(agent).args(["pod", "del", "--id", pod.id]));
        if let Err(err) = run::echo_run(&mut ip_netns("del", pod)) {
            eprintln!("warning: {err:#}");
        }
    }
}

fn run_demo(agent: &Path, created: &mut Created) -> Result<()> {
    section("create one network namespace per pod");
    for pod in &PODS {
        created.netns.push(pod);
        run::echo_run(&mut ip_netns("add", pod))?;
    }

    section("attach each pod to the weft datapath");
    for pod in &PODS {
        created.pods.push(pod);
        let netns = pod.netns_path();
        run::echo_run(
            agent_cmd(agent)
                .args(["pod", "add", "--id", pod.id, "--netns"])
                .arg(&netns)
                .args(["--ip", pod.ipv4, "--ip", pod.ipv6])
                .args(["--gateway-v4", GATEWAY_V4, "--gateway-v6", GATEWAY_V6]),
        )?;
    }

    section("pods reach each other over IPv4 and IPv6");
    let [a, b, c] = &PODS;
    for (from, to) in [(a, b.ipv4), (a, c.ipv6), (b, c.ipv4), (b, c.ipv6)] {
        run::echo_run(ip_netns("exec", from).args(["ping", "-c", "3", "-i", "0.2", to]))?;
    }

    section("what the datapath knows");
    run::echo_run(agent_cmd(agent).args(["bpf", "endpoint", "list"]))?;
    run::echo_run(agent_cmd(agent).args(["bpf", "counters"]))?;
    run::echo_run(Command::new("bpftool").args(["map", "dump", "pinned", ENDPOINT_MAP_PIN]))?;
    Ok(())
}

/// Deletes the pods and namespaces in `created`, attempting every item even if one fails;
/// returns the first failure.
fn cleanup(agent: &Path, created: &Created) -> Result<()> {
    section("clean up");
    let mut first_err = None;
    let mut attempt = |cmd: &mut Command| {
        if let Err(err) = run::echo_run(cmd) {
            eprintln!("warning: {err:#}");
            first_err.get_or_insert(err);
        }
    };
    for pod in created.pods.iter().rev() {
        attempt(agent_cmd(agent).args(["pod", "del", "--id", pod.id]));
    }
    for pod in created.netns.iter().rev() {
        if pod.netns_path().exists() {
            attempt(&mut ip_netns("del", pod));
        }
    }
    first_err.map_or(Ok(()), Err)
}

fn print_cleanup_hint(agent: &Path) {
    section("--keep: the demo pods stay up");
    println!("try e.g. `ip netns exec weft-demo-a ping {}`", PODS[2].ipv4);
    println!("to clean up later, run (or just rerun `cargo xtask demo`):");
    for pod in &PODS {
        println!("  {} pod del --id {}", agent.display(), pod.id);
    }
    for pod in &PODS {
        println!("  ip netns del {}", pod.netns);
    }
}
