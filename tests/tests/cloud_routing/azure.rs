//! Azure on a secondary NIC (`azure-interface-name` naming the second interface, whose
//! addresses the operator hands out): each pod's traffic goes out of that NIC through Cilium's
//! "compat" rule (priority 110) and the table numbered after the NIC's ifindex, so the
//! network's check of the source address lets it through.

use std::{net::IpAddr, time::Duration};

use serde_json::json;
use weft_tests::{
    ThreadNetNs,
    agent::{add, ping},
    cloud::{self, HOST_IP, VPC_MTU, Vpc},
    require_root, run,
};

use super::{Cluster, status};

#[test]
fn a_pod_on_the_secondary_nic_leaves_through_it_by_the_compat_rule_and_table() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut vpc = Vpc::new();
    let eth0 = vpc.attach(
        "eth0",
        "02:00:00:00:01:10",
        "10.6.0.0/24",
        &["10.6.0.10"],
        VPC_MTU,
    );
    let nic1 = ["10.6.1.20", "10.6.1.21", "10.6.1.22", "10.6.1.23"];
    vpc.attach("eth1", "02:00:00:00:01:20", "10.6.1.0/24", &nic1, VPC_MTU);
    cloud::boot_primary(&eth0, "10.6.0.10");
    // Azure's guest agent brings the secondary NIC up with its primary address.
    run(std::process::Command::new("ip").args(["addr", "add", "10.6.1.20/24", "dev", "eth1"]));
    run(std::process::Command::new("ip").args(["link", "set", "eth1", "up"]));
    let cluster = Cluster::start(
        "node-z",
        "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-z",
    );
    let mut agent = cluster.agent(
        "node-z",
        &[
            "--ipam",
            "azure",
            "--enable-health-checking",
            "false",
            "--azure-interface-name",
            "eth1",
            "--ipv4-native-routing-cidr",
            cloud::VPC_CIDR,
        ],
    );
    agent.spawn();
    let nic = |n: u8, mac: &str, subnet: &str, ip: &str| {
        json!({
            "id": format!("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic-{n}"),
            "name": format!("nic-{n}"), "mac": mac, "ip": ip, "state": "succeeded",
            "subnet": {"id": "subnet", "cidr": subnet}, "gateway": format!("10.6.{n}.1"),
        })
    };
    let nic1_id = nic(1, "", "", "")["id"].clone();
    cluster.operator_edit("node-z", |n| {
        assert_eq!(
            n["spec"]["azure"]["interface-name"], "eth1",
            "the agent seeds the NIC's name"
        );
        let pool: serde_json::Map<String, serde_json::Value> = nic1[1..]
            .iter()
            .map(|ip| ((*ip).to_owned(), json!({"resource": nic1_id})))
            .collect();
        n["spec"]["ipam"]["pool"] = json!(pool);
        n["status"]["azure"] = json!({"interfaces": [
            nic(0, "02:00:00:00:01:10", "10.6.0.0/24", "10.6.0.10"),
            nic(1, "02:00:00:00:01:20", "10.6.1.0/24", "10.6.1.20"),
        ]});
    });
    agent.wait_ready(Duration::from_secs(30));
    cluster.add_pod("a", "node-z");
    let pod = add(&agent, "default", "a");
    let ip = pod.ips[0];
    assert!(nic1[1..].contains(&ip.to_string().as_str()), "{ip}");
    let link = cloud::ip_json(&["link", "show", "dev", "eth1"]);
    let table = u32::try_from(link[0]["ifindex"].as_u64().expect("ifindex")).expect("u32");
    assert_eq!(
        cloud::rules_of(ip),
        [
            format!("20: from all to {ip} lookup main"),
            format!("110: from {ip} to 10.6.0.0/16 lookup {table}"),
        ],
        "status: {}",
        status(&agent)
    );
    assert_eq!(
        cloud::table(table),
        [
            "default via 10.6.1.1 dev eth1 proto kernel",
            "10.6.1.1 dev eth1 proto kernel scope link",
        ]
    );
    let answered = (0..3).any(|_| ping(&pod, IpAddr::V4(HOST_IP)));
    assert!(
        answered && vpc.drops() == 0,
        "answered {answered}, drops {}",
        vpc.drops()
    );
}
