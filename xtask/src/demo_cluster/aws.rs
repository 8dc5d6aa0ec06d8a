//! The AWS parts of `cargo xtask demo-aws`: the EC2 + IMDS emulator's estate (a VPC whose node
//! subnet holds the two instances' primary ENIs, the nodes' links, and whose pod subnet takes
//! the ENIs the operator creates), the nodes' links given their primary ENIs' MACs as IMDS
//! reports them, and a "VPC" namespace standing for the cloud's fabric: a bridge with the pod
//! subnet's gateway, into which the demo plugs each ENI the operator attached (as the
//! hypervisor would), delivering each of an ENI's addresses to its MAC and dropping what leaves
//! an ENI from an address that is not its own (AWS's source/destination check, counted).

use std::{fs, process::Command};

use anyhow::{Context, Result};
use serde_json::Value;

use super::{
    NODES, bin,
    kubectl::{kubectl, kubectl_shown},
    path, section, start_daemon,
    teardown::Created,
    wait, wait_log,
};
use crate::run;

/// Where the EC2 + IMDS emulator listens, on node-a.
pub(super) const EC2_PORT: u16 = 8773;
/// The namespace standing for the VPC's fabric.
pub(super) const VPC_NETNS: &str = "weft-dc-vpc";
/// The VPC.
const VPC: &str = "vpc-0d00000000000d001";
/// The pod subnet (the ENIs the operator creates).
const POD_SUBNET: &str = "subnet-0d0000000000d0002";
/// The pod subnet's gateway, on the fabric's bridge.
const POD_GATEWAY: &str = "192.0.2.129/25";
/// The instance of each node.
const INSTANCES: [&str; 2] = ["i-0d00000000000000a", "i-0d00000000000000b"];

/// The estate: one VPC (192.0.2.0/24), the node subnet (the nodes' addresses are their
/// instances' primary addresses), the pod subnet, a security group.
fn estate() -> String {
    let instances: Vec<String> = (NODES.iter().zip(INSTANCES))
        .map(|(node, id)| {
            format!(
                "  - {{id: {id}, type: m5.large, subnet: subnet-0d0000000000d0001, \
                 primaryIp: {}, securityGroups: [sg-0d0000000000d0001]}}",
                node.ip
            )
        })
        .collect();
    let instances = instances.join("\n");
    format!(
        "region: us-east-1
vpcs:
  - {{id: {VPC}, cidr: 192.0.2.0/24}}
subnets:
  - {{id: subnet-0d0000000000d0001, vpc: {VPC}, cidr: 192.0.2.0/25, az: us-east-1a, tags: {{weft: nodes}}}}
  - {{id: {POD_SUBNET}, vpc: {VPC}, cidr: 192.0.2.128/25, az: us-east-1a, tags: {{weft: pods}}}}
routeTables:
  - {{id: rtb-0d0000000000d0001, vpc: {VPC}, subnets: [subnet-0d0000000000d0001, {POD_SUBNET}]}}
securityGroups:
  - {{id: sg-0d0000000000d0001, vpc: {VPC}, tags: {{weft: nodes}}}}
instances:
{instances}
"
    )
}

/// The node's provider ID (its instance).
pub(super) fn provider_id(i: usize) -> String {
    format!("aws:///us-east-1a/{}", INSTANCES[i])
}

/// IMDS, as every node reaches it (the emulator on node-a).
pub(super) fn imds_url() -> String {
    format!("http://{}:{EC2_PORT}", NODES[0].ip)
}

/// The agents' keys beyond the flags: new ENIs from device index 1, in the pod subnet.
pub(super) fn agent_config() -> Result<std::path::PathBuf> {
    let file = path("agent-config.yaml");
    let text = format!("eni-first-interface-index: \"1\"\neni-subnet-ids: \"{POD_SUBNET}\"\n");
    fs::write(&file, &text)?;
    println!("{}:\n{text}", file.display());
    Ok(file)
}

/// The operator's flags for the emulator (the keys are any: the estate restricts none).
pub(super) fn operator_flags(operator: &mut Command) {
    let url = format!("http://127.0.0.1:{EC2_PORT}");
    operator
        .env("AWS_ACCESS_KEY_ID", "AKIDWEFTDEMO")
        .env("AWS_SECRET_ACCESS_KEY", "weft-demo")
        .args(["--ec2-api-endpoint", &url, "--aws-imds-endpoint", &url])
        .args(["--aws-region", "us-east-1", "--aws-vpc-id", VPC]);
}

/// The EC2 + IMDS emulator on node-a; each node's link takes its primary ENI's MAC.
pub(super) fn start_ec2(created: &mut Created) -> Result<()> {
    section("AWS: weft's EC2 + IMDS EMULATOR on node-a (not AWS)");
    println!(
        "The emulator (tests/src/ec2, run as the `ec2-emulator` program) speaks EC2's Query API\n\
         and IMDSv2: one VPC, an m5.large instance per node whose primary ENI is the node's link.\n\
         IMDS answers each node for its own instance (the one whose primary address asks)."
    );
    let scenario = path("ec2-scenario.yaml");
    let text = estate();
    fs::write(&scenario, &text)?;
    println!("{}:\n{text}", scenario.display());
    let listen = format!("0.0.0.0:{EC2_PORT}");
    let mut ec2 = NODES[0].enter(bin("ec2-emulator"));
    ec2.args(["--listen", &listen, "--scenario"]).arg(&scenario);
    let daemon = start_daemon(created, "ec2-emulator", "ec2-emulator", &mut ec2)?;
    wait_log(daemon, 20, "http://")?;
    section("each node's link is its instance's primary ENI: its MAC, as IMDS says");
    for node in &NODES {
        let mac = imds(node, "/latest/meta-data/mac")?;
        run::echo_run(Command::new("ip").args([
            "-n", node.netns, "link", "set", "dev", node.dev, "address", &mac,
        ]))?;
    }
    for node in &NODES {
        run::echo_run(
            Command::new("ip").args(["-n", node.netns, "neigh", "flush", "dev", node.dev]),
        )?;
    }
    Ok(())
}

/// `path` of IMDS as `node` reads it (IMDSv2: a token, then the GET).
fn imds(node: &super::Node, path: &str) -> Result<String> {
    let url = imds_url();
    let token = run::output(node.enter("curl").args([
        "-sf",
        "-X",
        "PUT",
        "-H",
        "X-aws-ec2-metadata-token-ttl-seconds: 60",
        &format!("{url}/latest/api/token"),
    ]))?;
    let value = run::output(node.enter("curl").args([
        "-sf",
        "-H",
        &format!("X-aws-ec2-metadata-token: {}", token.trim()),
        &format!("{url}{path}"),
    ]))?;
    println!("{}: IMDS {path} = {}", node.name, value.trim());
    Ok(value.trim().to_owned())
}

/// The fabric: a namespace with the pod subnet's gateway on a bridge, routing, and the
/// source/destination check's table (bridge family: it sees which ENI a packet came from).
pub(super) fn make_vpc(created: &mut Created) -> Result<()> {
    section(
        "the VPC's fabric: a namespace with the pod subnet's gateway and the source/destination check",
    );
    run::echo_run(Command::new("ip").args(["netns", "add", VPC_NETNS]))?;
    created.vpc = true;
    let ip = |args: &[&str]| run::echo_run(Command::new("ip").args(["-n", VPC_NETNS]).args(args));
    ip(&["link", "set", "lo", "up"])?;
    // A MAC of its own: a bridge taking its ports' lowest one would change it as ENIs are
    // plugged in, and the kernel then flushes the neighbours (permanent ones too).
    ip(&[
        "link",
        "add",
        "pods",
        "address",
        "02:00:00:ff:00:01",
        "type",
        "bridge",
    ])?;
    ip(&["addr", "add", POD_GATEWAY, "dev", "pods"])?;
    ip(&["link", "set", "pods", "up"])?;
    run::echo_run(Command::new("ip").args([
        "netns",
        "exec",
        VPC_NETNS,
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
        "net.ipv4.conf.all.send_redirects=0",
        "net.ipv4.conf.pods.send_redirects=0",
    ]))?;
    run::echo_run(Command::new("ip").args([
        "netns", "exec", VPC_NETNS, "nft",
        "add table bridge srcdst; add counter bridge srcdst drops; \
         add chain bridge srcdst check { type filter hook prerouting priority -300; policy accept; }",
    ]))
}

/// An ENI as its CiliumNode's status lists it.
struct Eni {
    id: String,
    mac: String,
    primary: String,
    addresses: Vec<String>,
}

/// The ENI at device index 1 of `node`'s CiliumNode, once it holds 8 addresses.
fn eni_1(node: &str) -> Option<Eni> {
    let text = run::output(&mut kubectl_shown(&[
        "get",
        "ciliumnode",
        node,
        "-o",
        "json",
    ]))
    .unwrap_or_default();
    let doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let found = (doc["status"]["eni"]["enis"]
        .as_object()
        .into_iter()
        .flatten())
    .map(|(_, eni)| eni)
    .find(|eni| eni["number"] == 1 && eni["addresses"].as_array().is_some_and(|a| a.len() >= 8));
    found.map(|eni| {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let addresses = (eni["addresses"].as_array().into_iter().flatten())
            .map(s)
            .collect();
        Eni {
            id: s(&eni["id"]),
            mac: s(&eni["mac"]),
            primary: s(&eni["ip"]),
            addresses,
        }
    })
}

/// Play the hypervisor: once the operator attached ENI 1 to a node's instance, plug a link
/// with its MAC into the node (`eth1`, down: the agent configures it) and its other end into
/// the fabric, which delivers the ENI's addresses to it and lets only them leave through it.
pub(super) fn plug_enis() -> Result<()> {
    section(
        "the operator creates ENI 1 on each instance; the demo plugs it in as the hypervisor would",
    );
    for (i, node) in NODES.iter().enumerate() {
        let mut eni = None;
        let took = wait(
            60,
            &format!("the operator to attach ENI 1 to {}", node.name),
            || {
                eni = eni_1(node.name);
                Ok(eni.is_some())
            },
        )?;
        let Eni {
            id,
            mac,
            primary,
            addresses,
        } = eni.context("waited for it")?;
        println!(
            "{}: {id} ({mac}) with {} addresses, after {:.1} s",
            node.name,
            addresses.len(),
            took.as_secs_f64()
        );
        let port = format!("eni-{}", &node.name[5..]);
        run::echo_run(Command::new("ip").args([
            "link", "add", "eth1", "address", &mac, "netns", node.netns, "type", "veth", "peer",
            "name", &port, "netns", VPC_NETNS,
        ]))?;
        let ip =
            |args: &[&str]| run::echo_run(Command::new("ip").args(["-n", VPC_NETNS]).args(args));
        ip(&["link", "set", &port, "master", "pods", "up"])?;
        let owned: Vec<&str> = std::iter::once(primary.as_str())
            .chain(addresses.iter().map(String::as_str))
            .collect();
        let set = format!("a{i}");
        run::echo_run(Command::new("ip").args([
            "netns", "exec", VPC_NETNS, "nft",
            &format!(
                "add set bridge srcdst {set} {{ type ipv4_addr; }}; \
                 add rule bridge srcdst check iifname \"{port}\" ether type ip ip saddr != @{set} counter name \"drops\" drop; \
                 add element bridge srcdst {set} {{ {} }}",
                owned.join(", ")
            ),
        ]))?;
        for address in &owned {
            ip(&[
                "neigh",
                "replace",
                address,
                "lladdr",
                &mac,
                "dev",
                "pods",
                "nud",
                "permanent",
            ])?;
        }
    }
    kubectl(&[
        "get",
        "ciliumnodes",
        "-o",
        "custom-columns=NAME:.metadata.name,INSTANCE:.spec.instance-id,TYPE:.spec.eni.instance-type,ENIS:.status.eni.enis.*.id",
    ])
}

/// What the agents made of ENI 1, the pods' rules, and the check's counter after the pings.
pub(super) fn show_routing() -> Result<()> {
    let a = &NODES[0];
    println!("\nnode-a: ENI 1 configured by the agent (MTU, up, its primary address):");
    run::echo_run(Command::new("ip").args(["-n", a.netns, "addr", "show", "dev", "eth1"]))?;
    println!(
        "\nnode-a: each pod's traffic into the VPC leaves through its ENI (rule 111, table 11):"
    );
    run::echo_run(Command::new("ip").args(["-n", a.netns, "rule"]))?;
    run::echo_run(Command::new("ip").args(["-n", a.netns, "route", "show", "table", "11"]))?;
    println!("\nthe source/destination check dropped (should be 0):");
    run::echo_run(Command::new("ip").args([
        "netns", "exec", VPC_NETNS, "nft", "list", "counter", "bridge", "srcdst", "drops",
    ]))
}
