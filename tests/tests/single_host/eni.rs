//! ENI mode on the embedded store: the pool is the node's ENI addresses from
//! `status.eni.enis`, with no CiliumPodIPPool anywhere (Cilium's ENI mode has none).

use weft_tests::{NamedNetNs, ThreadNetNs, require_root, unique};

use super::{agent_with, v4_of};

/// The own node as the ENI operator leaves it: ENI 0 (device 0, excluded by
/// `first-interface-index: 1`) and ENI 1 with two secondary addresses; each ENI's primary
/// address is its `ip` only.
const NODE1: &str = "apiVersion: cilium.io/v2
kind: CiliumNode
metadata:
  name: node1
spec:
  addresses:
  - type: InternalIP
    ip: 10.5.0.10
  instance-id: i-0123456789abcdef0
  eni:
    instance-type: m5.large
    first-interface-index: 1
    vpc-id: vpc-1
    availability-zone: us-east-1a
    node-subnet-id: subnet-1
status:
  eni:
    enis:
      eni-0:
        id: eni-0
        ip: 10.5.0.10
        mac: 02:00:00:00:00:10
        subnet: {id: subnet-1, cidr: 10.5.0.0/24}
        vpc: {id: vpc-1, primary-cidr: 10.5.0.0/16}
      eni-1:
        id: eni-1
        ip: 10.5.1.20
        mac: 02:00:00:00:00:20
        number: 1
        subnet: {id: subnet-2, cidr: 10.5.1.0/24}
        vpc: {id: vpc-1, primary-cidr: 10.5.0.0/16}
        addresses: [10.5.1.21, 10.5.1.22]
";

const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n";

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  namespace: default\nspec:\n  nodeName: node1\n";

#[test]
fn a_pod_gets_an_address_of_the_second_eni_with_no_ciliumpodippool() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = agent_with(
        &[
            ("ciliumnodes/node1.yaml", NODE1),
            ("namespaces/default.yaml", NAMESPACE),
            ("pods/default/a.yaml", POD),
        ],
        &["--ipam", "eni"],
    );
    agent.start();
    let netns = NamedNetNs::new();
    let call = agent.cni(
        "ADD",
        &unique("ctr-"),
        &netns.path().display().to_string(),
        ("default", "a"),
    );
    assert_eq!(
        call.code,
        0,
        "ADD: {}\n--- agent log ---\n{}",
        call.stdout,
        agent.log()
    );
    let ip = v4_of(&call).to_string();
    assert!(
        ["10.5.1.21", "10.5.1.22"].contains(&ip.as_str()),
        "{ip}: one of ENI 1's secondary addresses (router took the other)\n{}",
        call.stdout
    );
}
