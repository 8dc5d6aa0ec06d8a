//! The whole AWS path on one node, every part real but the cloud: the EC2 + IMDS emulator holds
//! the instance, the real `weft-operator --ipam eni` creates ENI 1 in the pod subnet, attaches it
//! and fills it; this test plays the hypervisor and plugs a link with the ENI's MAC into the node
//! once EC2 says it is attached; the real agent, seeded from IMDS, finds the link by MAC,
//! configures it, and routes a pod holding one of its addresses out of it, through the VPC's
//! source/destination check, before and after a restart. Nothing here writes the CiliumNode's
//! `status.eni`: the operator does.

use std::time::Duration;

use serde_json::Value;
use weft_tests::{
    ThreadNetNs,
    agent::{add, del},
    cloud::{self, VPC_MTU, Vpc, rules_of},
    ec2::{Ec2Emulator, Scenario, Tags},
    operator::Operator,
    require_root, unique,
};

use super::{Cluster, eni::reaches_the_vpc_host, wait_for, wait_interface};

const VPC: &str = "vpc-0e2e0000000000001";
const NODE_SUBNET: &str = "subnet-0e2e0000000000001";
const POD_SUBNET: &str = "subnet-0e2e0000000000002";
const INSTANCE: &str = "i-0e2e0000000000001";
const NODE_IP: &str = "10.6.0.10";
const ACCESS_KEY: &str = "AKIDWEFTE2E";
const SECRET_KEY: &str = "weft-e2e-secret";

/// The VPC of [`weft_tests::cloud`] as EC2 sees it: a node subnet and a pod subnet, one m5.large
/// whose primary ENI holds the node's address; IMDSv2 required.
fn estate() -> Scenario {
    let tag = |v: &str| Tags::from([("weft".to_owned(), v.to_owned())]);
    let mut scenario = Scenario::new("us-east-1")
        .vpc(VPC, cloud::VPC_CIDR, &[])
        .subnet(NODE_SUBNET, VPC, "10.6.0.0/24", "us-east-1a", tag("nodes"))
        .subnet(POD_SUBNET, VPC, "10.6.1.0/24", "us-east-1a", tag("pods"))
        .route_table("rtb-0e2e0000000000001", VPC, &[NODE_SUBNET, POD_SUBNET])
        .security_group("sg-0e2e0000000000001", VPC, tag("nodes"))
        .instance(INSTANCE, "m5.large", NODE_SUBNET, Tags::new());
    if let Some(instance) = scenario.instances.last_mut() {
        instance.primary_ip = Some(NODE_IP.parse().expect("address"));
        instance.security_groups = vec!["sg-0e2e0000000000001".to_owned()];
    }
    scenario.imds.require_token = true;
    scenario.access_keys = vec![ACCESS_KEY.to_owned()];
    scenario
        .secret_keys
        .insert(ACCESS_KEY.to_owned(), SECRET_KEY.to_owned());
    scenario
}

#[test]
fn the_operator_s_new_eni_carries_a_pod_through_the_vpc_check_across_a_restart() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut vpc = Vpc::new();
    let ec2 = Ec2Emulator::start(estate());
    ec2.set_imds_instance(INSTANCE);
    let primary = ec2.instance_enis(INSTANCE).remove(0);
    let eth0 = vpc.attach("eth0", &primary.mac, "10.6.0.0/24", &[NODE_IP], VPC_MTU);
    cloud::boot_primary(&eth0, NODE_IP);
    let cluster = Cluster::start("node-e", &format!("aws:///us-east-1a/{INSTANCE}"));

    // The agent's keys: the new ENIs from device index 1, in the pod subnet.
    let config = std::env::temp_dir().join(unique("weft-aws-e2e-config-"));
    std::fs::write(
        &config,
        format!("eni-first-interface-index: \"1\"\neni-subnet-ids: \"{POD_SUBNET}\"\n"),
    )
    .expect("agent config");
    let url = ec2.url();
    let config_arg = config.display().to_string();
    let mut agent = cluster.agent(
        "node-e",
        &[
            "--ipam",
            "eni",
            "--enable-health-checking",
            "false",
            "--aws-imds-endpoint",
            &url,
            "--config",
            &config_arg,
        ],
    );
    agent.spawn();
    let mut op = Operator::new(
        &cluster.kubeconfig,
        &[
            "--ipam=eni",
            "--leader-election=false",
            "--ec2-api-endpoint",
            &url,
            "--aws-imds-endpoint",
            &url,
            "--aws-region",
            "us-east-1",
            "--aws-vpc-id",
            VPC,
        ],
    );
    op.env = vec![
        ("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()),
        ("AWS_SECRET_ACCESS_KEY".into(), SECRET_KEY.into()),
    ];
    op.spawn();

    // The hypervisor: once EC2 lists ENI 1 attached with its addresses, its link appears.
    let eni1 = wait_for(
        "the operator's ENI at index 1",
        Duration::from_mins(1),
        || {
            (ec2.instance_enis(INSTANCE).into_iter())
                .find(|e| {
                    e.attachment.as_ref().is_some_and(|a| a.device_index == 1) && e.ips.len() > 8
                })
                .ok_or_else(|| format!("--- operator ---\n{}", op.log()))
        },
    );
    assert_eq!(eni1.subnet, POD_SUBNET);
    let addresses: Vec<String> = eni1.ips.iter().map(ToString::to_string).collect();
    let listed: Vec<&str> = addresses.iter().map(String::as_str).collect();
    vpc.attach("eth1", &eni1.mac, "10.6.1.0/24", &listed, 1500);
    agent.wait_ready(Duration::from_secs(30));
    let seeded: Value = cluster
        .emu
        .get("ciliumnodes", None, "node-e")
        .expect("the CiliumNode");
    assert_eq!(seeded["spec"]["instance-id"], INSTANCE, "seeded from IMDS");
    let configured = wait_interface(&agent, &eni1.id, "configured");
    assert_eq!(configured["ifname"], "eth1", "{configured}");

    cluster.add_pod("a", "node-e");
    let pod = add(&agent, "default", "a");
    let ip = pod.ips[0].to_string();
    assert!(
        addresses[1..].contains(&ip),
        "{ip}: an address the operator assigned to ENI 1 ({addresses:?})"
    );
    reaches_the_vpc_host(&vpc, &agent, &pod);

    agent.stop();
    agent.spawn();
    agent.wait_ready(Duration::from_secs(30));
    reaches_the_vpc_host(&vpc, &agent, &pod);

    del(&agent, &pod);
    wait_for(
        "the DEL to remove the pod's rules",
        Duration::from_secs(10),
        || {
            let left = rules_of(pod.ips[0]);
            left.is_empty()
                .then_some(())
                .ok_or_else(|| format!("{left:?}"))
        },
    );
    let _ = std::fs::remove_file(&config);
}
