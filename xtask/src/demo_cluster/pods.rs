//! The demo's pods: each node's network configuration, `weft-cni` called in the node's
//! network namespace exactly as a container runtime calls it (ADD retried while the agent says
//! "try again later", as the kubelet retries), and the pings between the pods.

use std::{
    fs,
    process::{Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use super::{
    Mode, NODES, Node, PODS, Pod, bin, kubectl::kubectl_create, node, section, teardown::Created,
};
use crate::run;

/// The network configuration a runtime on `node` passes on stdin.
pub(super) fn netconf(node: &Node) -> String {
    let dir = node.dir();
    format!(
        r#"{{"cniVersion":"1.0.0","name":"weft","type":"weft-cni","agent-socket":"{}/weft.sock","delete-queue-dir":"{}/delete-queue"}}"#,
        dir.display(),
        dir.display()
    )
}

/// The `CNI_*` environment a runtime sets for `verb` on `pod`.
fn cni_env(verb: &str, pod: &Pod) -> [(&'static str, String); 6] {
    [
        ("CNI_COMMAND", verb.to_owned()),
        ("CNI_CONTAINERID", pod.id()),
        ("CNI_NETNS", pod.netns_path()),
        ("CNI_IFNAME", "eth0".to_owned()),
        (
            "CNI_ARGS",
            format!("K8S_POD_NAMESPACE={};K8S_POD_NAME={}", pod.ns, pod.name),
        ),
        ("CNI_PATH", "/opt/cni/bin".to_owned()),
    ]
}

/// The weft-cni call on the pod's node as a shell command, wrapped.
pub(super) fn cni_line(verb: &str, pod: &Pod) -> String {
    let quote = |(k, v): (_, String)| {
        let q = if v.contains(';') { "'" } else { "" };
        format!("{k}={q}{v}{q}")
    };
    let env = cni_env(verb, pod).map(quote);
    let node = node(pod.node);
    format!(
        "{} \\\n    {} \\\n    nsenter --net={} {} < {}",
        env[..4].join(" "),
        env[4..].join(" "),
        node.netns_path(),
        bin("weft-cni").display(),
        node.dir().join("weft.conf").display()
    )
}

/// Runs `weft-cni` for `verb` on `pod` in its node's namespace: success and what it printed.
fn cni_call(verb: &str, pod: &Pod) -> Result<(bool, String)> {
    let node = node(pod.node);
    let conf = fs::File::open(node.dir().join("weft.conf")).context("opening the netconf")?;
    let out = node
        .enter(bin("weft-cni"))
        .envs(cni_env(verb, pod))
        .stdin(conf)
        .stderr(Stdio::inherit())
        .output()
        .context("running weft-cni")?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    ))
}

/// Echo and run `weft-cni` for `verb` on `pod`; what it printed.
pub(super) fn cni_output(verb: &str, pod: &Pod) -> Result<String> {
    println!("+ {}", cni_line(verb, pod));
    let (ok, stdout) = cni_call(verb, pod)?;
    ensure!(ok, "weft-cni {verb} {}/{}: {stdout}", pod.ns, pod.name);
    Ok(stdout)
}

/// The Pod objects, then a namespace and ADD per pod; each pod's IPv4 address.
pub(super) fn add_pods(created: &mut Created) -> Result<Vec<String>> {
    section(
        "the pods: Pod objects (as the scheduler leaves them), then weft-cni ADD as a runtime calls it",
    );
    let pods: Vec<String> = PODS
        .iter()
        .map(|p| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {}\n  namespace: {}\n  labels:\n    app: {}\n\
                 spec:\n  nodeName: {}\n  containers:\n  - name: main\n    image: busybox\n",
                p.name,
                p.ns,
                p.name.split('-').next().unwrap_or(p.name),
                p.node
            )
        })
        .collect();
    kubectl_create("pods.yaml", &pods.join("---\n"))?;
    let mut addrs = Vec::new();
    for pod in &PODS {
        println!();
        run::echo_run(Command::new("ip").args(["netns", "add", &pod.netns()]))?;
        created.pod_netns.push(pod);
        let stdout = add(pod)?;
        created.added.push(pod);
        let result: Value = serde_json::from_str(&stdout).context("the ADD result is not JSON")?;
        let ip = result["ips"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|ip| ip["address"].as_str()?.split('/').next())
            .find(|ip| !ip.contains(':'))
            .with_context(|| format!("no IPv4 address in {stdout}"))?
            .to_owned();
        println!("{}/{} on {}: {ip}", pod.ns, pod.name, pod.node);
        addrs.push(ip);
    }
    Ok(addrs)
}

/// ADD, retried while the agent answers 11 (try again later: its blocks are on the way), as
/// the kubelet retries a sandbox.
fn add(pod: &Pod) -> Result<String> {
    println!("+ {}", cni_line("ADD", pod));
    let start = Instant::now();
    loop {
        let (ok, stdout) = cni_call("ADD", pod)?;
        if ok {
            return Ok(stdout);
        }
        let answer: Value = serde_json::from_str(&stdout).unwrap_or_default();
        if answer["code"] != 11 || start.elapsed() > Duration::from_secs(30) {
            bail!("weft-cni ADD {}/{}: {stdout}", pod.ns, pod.name);
        }
        println!(
            "  (try again later: {}; retrying in 1 s as the kubelet would)",
            answer["msg"]
        );
        sleep(Duration::from_secs(1));
    }
}

pub(super) fn ping_pods(addrs: &[String], mode: Mode) -> Result<()> {
    let pairs: &[(usize, usize)] = match mode {
        Mode::MultiPool => {
            section("the pods ping each other: across nodes and across pools");
            &[(0, 1), (0, 3), (3, 2), (2, 1)]
        }
        Mode::Azure => {
            // Azure's fabric routes NIC addresses between VMs; two namespaces have no fabric.
            section("the pods on each node ping each other (NIC addresses)");
            &[(0, 2), (2, 0), (1, 3), (3, 1)]
        }
        Mode::Aws => {
            section(
                "the pods ping each other across nodes, through their ENIs and the VPC's fabric",
            );
            &[(0, 1), (1, 0), (2, 3), (3, 2)]
        }
    };
    for &(from, to) in pairs {
        let (src, dst) = (&PODS[from], &PODS[to]);
        println!(
            "{}/{} ({}) -> {}/{} ({})",
            src.ns, src.name, src.node, dst.ns, dst.name, dst.node
        );
        run::echo_run(Command::new("ip").args([
            "netns",
            "exec",
            &src.netns(),
            "ping",
            "-c",
            "2",
            "-i",
            "0.2",
            &addrs[to],
        ]))?;
    }
    match mode {
        Mode::MultiPool => {}
        Mode::Azure => return Ok(()),
        Mode::Aws => return super::aws::show_routing(),
    }
    println!("\nnode-a routes node-b's blocks via node-b (auto-direct-node-routes):");
    run::echo_run(Command::new("ip").args([
        "-n",
        NODES[0].netns,
        "route",
        "show",
        "proto",
        "static",
    ]))
    .or_else(|_| run::echo_run(Command::new("ip").args(["-n", NODES[0].netns, "route"])))
}
