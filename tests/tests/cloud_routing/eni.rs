//! ENI mode, a node with two ENIs and `first-interface-index` 1 (the common EKS setting): every
//! pod address is on ENI 1, whose link the agent finds by MAC and configures; the pod reaches
//! the VPC host through ENI 1, which the VPC's source/destination check lets through. Without
//! the pod's rules (their creation switched off) its packets leave through ENI 0 and are
//! dropped. Then DEL, a restart with a live pod, and `cleanup`.

use std::{net::IpAddr, process::Command, time::Duration};

use serde_json::json;
use weft_tests::{
    ThreadNetNs,
    agent::{Agent, Pod, add, del, ping},
    cloud::{self, HOST_IP, VPC_MTU, Vpc, ip_json, rules_of},
    require_root, run,
};

use super::{Cluster, cleanup, status, wait_for, wait_interface};

/// A node namespace in a VPC with ENI 0 (`eth0`, booted as the primary) and ENI 1 (`eth1`,
/// down, MTU 1500), the CiliumNode listing both, and an agent serving in `eni` mode.
pub(crate) struct EniNode {
    pub(crate) vpc: Vpc,
    pub(crate) cluster: Cluster,
    pub(crate) agent: Agent,
    /// ENI 1's `rp_filter` before the agent started.
    pub(crate) rp_filter_before: String,
    _node: ThreadNetNs,
}

/// ENI 1's addresses: its primary, then secondaries for the router and pods.
pub(crate) const ENI1: [&str; 5] = [
    "10.6.1.20",
    "10.6.1.21",
    "10.6.1.22",
    "10.6.1.23",
    "10.6.1.24",
];

/// The `status.eni.enis` entry of an ENI.
pub(crate) fn eni(
    id: &str,
    number: u8,
    mac: &str,
    subnet: &str,
    addrs: &[&str],
) -> serde_json::Value {
    json!({
        "id": id, "ip": addrs[0], "mac": mac, "number": number,
        "subnet": {"id": format!("subnet-{number}"), "cidr": subnet},
        "vpc": {"id": "vpc-1", "primary-cidr": cloud::VPC_CIDR, "cidrs": [cloud::VPC_CIDR]},
        "addresses": addrs[1..],
    })
}

impl EniNode {
    /// The node, its VPC and the agent with `flags` (beside `--ipam eni`) and `env`.
    pub(crate) fn start(flags: &[&str], env: &[(&str, &str)]) -> Self {
        require_root();
        let node = ThreadNetNs::new();
        let mut vpc = Vpc::new();
        let eth0 = vpc.attach(
            "eth0",
            "02:00:00:00:00:10",
            "10.6.0.0/24",
            &["10.6.0.10"],
            VPC_MTU,
        );
        vpc.attach("eth1", "02:00:00:00:00:20", "10.6.1.0/24", &ENI1, 1500);
        cloud::boot_primary(&eth0, "10.6.0.10");
        assert!(vpc.host_reachable(), "the VPC host answers the VPC");
        // Strict reverse-path filtering, as many images set it: the agent turns it off.
        std::fs::write(RP_FILTER, "1").expect("rp_filter");
        let rp_filter_before = rp_filter();
        let cluster = Cluster::start("node-e", "aws:///us-east-1a/i-0123456789abcdef0");
        let mut all = vec!["--ipam", "eni", "--enable-health-checking", "false"];
        all.extend_from_slice(flags);
        let mut agent = cluster.agent("node-e", &all);
        agent.env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        agent.spawn();
        cluster.operator_edit("node-e", |n| {
            n["spec"]["eni"]["first-interface-index"] = json!(1);
            n["status"]["eni"] = json!({"enis": {
                "eni-0": eni("eni-0", 0, "02:00:00:00:00:10", "10.6.0.0/24", &["10.6.0.10"]),
                "eni-1": eni("eni-1", 1, "02:00:00:00:00:20", "10.6.1.0/24", &ENI1),
            }});
        });
        agent.wait_ready(Duration::from_secs(30));
        Self {
            vpc,
            cluster,
            agent,
            rp_filter_before,
            _node: node,
        }
    }

    /// A pod `name` through `weft-cni`.
    pub(crate) fn pod(&self, name: &str) -> Pod {
        self.cluster.add_pod(name, "node-e");
        add(&self.agent, "default", name)
    }
}

/// ENI 1's `rp_filter` (in the calling thread's namespace).
const RP_FILTER: &str = "/proc/sys/net/ipv4/conf/eth1/rp_filter";

fn rp_filter() -> String {
    std::fs::read_to_string(RP_FILTER)
        .expect("rp_filter")
        .trim()
        .to_owned()
}

/// `ip -j addr show dev <ifname>`: its MTU, whether it is up, its IPv4 addresses.
pub(crate) fn link(ifname: &str) -> (u64, bool, Vec<String>) {
    let v = ip_json(&["addr", "show", "dev", ifname]);
    let l = &v[0];
    let up = l["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == "UP"));
    let addrs = l["addr_info"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["family"] == "inet")
        .map(|a| {
            format!(
                "{}/{}",
                a["local"].as_str().unwrap_or_default(),
                a["prefixlen"]
            )
        })
        .collect();
    (l["mtu"].as_u64().unwrap_or_default(), up, addrs)
}

/// The pod's traffic to the VPC host goes out of its ENI and comes back: it answers, and the
/// source/destination check dropped nothing.
pub(crate) fn reaches_the_vpc_host(vpc: &Vpc, agent: &Agent, pod: &Pod) {
    let answered = (0..3).any(|_| ping(pod, IpAddr::V4(HOST_IP)));
    let drops = vpc.drops();
    assert!(
        answered && drops == 0,
        "the pod's ping to the VPC host: answered {answered}, source/destination check drops \
         {drops}; rules of {}: {:?}\nstatus: {}",
        pod.ips[0],
        rules_of(pod.ips[0]),
        status(agent)
    );
}

/// Everything up to the ping: ENI 1 configured, a pod with one of its addresses.
fn a_pod_on_eni_1(node: &EniNode) -> Pod {
    let configured = wait_interface(&node.agent, "eni-1", "configured");
    assert_eq!(configured["ifname"], "eth1", "{configured}");
    let (mtu, up, addrs) = link("eth1");
    assert_eq!(
        (mtu, up),
        (u64::from(VPC_MTU), true),
        "eth1 gets the device MTU and is up"
    );
    assert_eq!(addrs, ["10.6.1.20/24"], "ENI 1's primary address is added");
    let main = cloud::table(254);
    assert!(
        !main.iter().any(|r| r.starts_with("10.6.1.0/24")),
        "the kernel's subnet route of ENI 1 is deleted: {main:?}"
    );
    assert_eq!(rp_filter(), "0", "rp_filter is off on ENI 1");
    let pod = node.pod("a");
    let ip = pod.ips[0].to_string();
    assert!(
        ENI1[1..].contains(&ip.as_str()),
        "{ip}: a secondary address of ENI 1"
    );
    pod
}

#[test]
fn a_pod_on_the_second_eni_reaches_the_vpc_host_through_it() {
    let mut node = EniNode::start(&[], &[]);
    let pod = a_pod_on_eni_1(&node);
    let ip = pod.ips[0];
    // enable-ipv4-masquerade (the default): one egress rule per result CIDR.
    assert_eq!(
        rules_of(ip),
        [
            format!("20: from all to {ip} lookup main"),
            format!("111: from {ip} to 10.6.0.0/16 lookup 11"),
        ]
    );
    assert_eq!(
        cloud::table(11),
        [
            "default via 10.6.1.1 dev eth1 proto kernel",
            "10.6.1.1 dev eth1 proto kernel scope link",
        ]
    );
    reaches_the_vpc_host(&node.vpc, &node.agent, &pod);
    let listed = status(&node.agent)["pod_rules"].to_string();
    assert!(
        listed.contains(&format!("111: from {ip}/32 to 10.6.0.0/16 lookup 11")),
        "{listed}"
    );

    // DEL: the pod's rules go (the DEL finishes in the background).
    del(&node.agent, &pod);
    wait_for(
        "the DEL to remove the pod's rules",
        Duration::from_secs(10),
        || {
            let left = rules_of(ip);
            left.is_empty()
                .then_some(())
                .ok_or_else(|| format!("{left:?}"))
        },
    );
    assert!(
        cloud::table(11).is_empty(),
        "no rule uses table 11: it is flushed"
    );

    // A restart with a live pod: its rules, removed by hand while the agent is down, are
    // back before the socket serves.
    let live = node.pod("b");
    let live_ip = live.ips[0];
    node.agent.stop();
    run(Command::new("ip").args([
        "rule",
        "del",
        "priority",
        "111",
        "from",
        &live_ip.to_string(),
    ]));
    run(Command::new("ip").args(["rule", "del", "priority", "20", "to", &live_ip.to_string()]));
    run(Command::new("ip").args(["route", "flush", "table", "11"]));
    assert!(rules_of(live_ip).is_empty());
    node.agent.spawn();
    node.agent.wait_ready(Duration::from_secs(30));
    assert_eq!(
        rules_of(live_ip).len(),
        2,
        "rebuilt from the endpoint record at start-up"
    );
    assert_eq!(cloud::table(11).len(), 2, "and table 11 with them");
    reaches_the_vpc_host(&node.vpc, &node.agent, &live);

    // cleanup: no rule, no table route, no ENI address left.
    node.agent.stop();
    let said = cleanup(&node.agent);
    assert!(rules_of(live_ip).is_empty(), "cleanup said:\n{said}");
    assert!(cloud::table(11).is_empty(), "cleanup said:\n{said}");
    assert_eq!(
        link("eth1").2,
        Vec::<String>::new(),
        "cleanup said:\n{said}"
    );
    assert_eq!(rp_filter(), node.rp_filter_before, "rp_filter is put back");
    let all = run(Command::new("ip").args(["rule", "show"]));
    let all = String::from_utf8_lossy(&all.stdout).into_owned();
    assert!(
        !all.lines()
            .any(|l| l.starts_with("20:") || l.starts_with("111:")),
        "{all}\ncleanup said:\n{said}"
    );
    assert!(
        said.contains("removed ENI address: 10.6.1.20/24 dev eth1"),
        "{said}"
    );
}

#[test]
fn without_masquerading_one_rule_sends_all_of_the_pod_s_traffic_to_its_eni() {
    let node = EniNode::start(&["--enable-ipv4-masquerade", "false"], &[]);
    let pod = a_pod_on_eni_1(&node);
    let ip = pod.ips[0];
    assert_eq!(
        rules_of(ip),
        [
            format!("20: from all to {ip} lookup main"),
            format!("111: from {ip} lookup 11"),
        ]
    );
    reaches_the_vpc_host(&node.vpc, &node.agent, &pod);
}

/// The test above with the pod's rules switched off (`WEFT_TEST_FAULTS=pod-rules=skip`; the
/// same variable set around the test above makes it fail): the pod's packets leave through
/// ENI 0, whose source/destination check drops them.
#[test]
fn without_the_rules_the_source_destination_check_drops_the_pod_s_traffic() {
    let node = EniNode::start(&[], &[("WEFT_TEST_FAULTS", "pod-rules=skip")]);
    let pod = a_pod_on_eni_1(&node);
    assert!(rules_of(pod.ips[0]).is_empty(), "no rule was made");
    assert!(
        !ping(&pod, IpAddr::V4(HOST_IP)),
        "the VPC host must not answer"
    );
    assert!(
        node.vpc.drops() > 0,
        "the source/destination check dropped the pod's packets"
    );
}
