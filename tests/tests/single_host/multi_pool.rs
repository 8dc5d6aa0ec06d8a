//! Multi-pool: CiliumPodIPPools carved into `spec.ipam.pools.allocated`, in-process.

use std::{
    net::{IpAddr, Ipv4Addr},
    time::{Duration, Instant},
};

use ipnet::Ipv4Net;
use serde_json::{Value, json};
use weft_tests::{
    NamedNetNs, ThreadNetNs,
    agent::{Agent, del},
    require_root, unique, wait_for,
};

use super::{agent_with, doc, log_operated, v4_of, wait_operated};

/// The own node with nothing asked for or allocated yet.
const NODE1: &str = "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\nspec:\n  \
                     addresses:\n  - type: InternalIP\n    ip: 192.0.2.10\n";

const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n  labels:\n    \
                         kubernetes.io/metadata.name: default\n";

/// Pool `small`: /28 blocks (14 addresses each) out of one /24.
const SMALL: &str = "apiVersion: cilium.io/v2alpha1\nkind: CiliumPodIPPool\nmetadata:\n  name: small\nspec:\n  \
                     ipv4:\n    cidrs: [10.230.0.0/24]\n    maskSize: 28\n";

/// Pool `small` in v2: the first 41 addresses of its /24 are reserved (blocks .0, .16, .32).
const RESERVED: &str = "apiVersion: cilium.io/v2\nkind: CiliumPodIPPool\nmetadata:\n  name: small\nspec:\n  \
                        ipv4:\n    cidrs: [10.231.0.0/24]\n    maskSize: 28\n    pool:\n    - cidr: 10.231.0.0/24\n      \
                        reservedRanges:\n      - start: 10.231.0.0\n        end: 10.231.0.40\n";

fn pod_doc(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  nodeName: node1\n"
    )
}

/// `spec.ipam.pools.allocated` of pool `small` in node1's document.
fn small_blocks(agent: &Agent) -> Vec<String> {
    let node = doc(agent, "ciliumnodes/node1.yaml");
    (node["spec"]["ipam"]["pools"]["allocated"]
        .as_array()
        .into_iter()
        .flatten())
    .filter(|a| a["pool"] == "small")
    .flat_map(|a| a["cidrs"].as_array().cloned().unwrap_or_default())
    .filter_map(|c| c.as_str().map(str::to_owned))
    .collect()
}

/// `needed.ipv4-addrs` of pool `small` in node1's `spec.ipam.pools.requested`.
fn small_requested(agent: &Agent) -> Option<u64> {
    let node = doc(agent, "ciliumnodes/node1.yaml");
    (node["spec"]["ipam"]["pools"]["requested"]
        .as_array()
        .into_iter()
        .flatten())
    .find(|r| r["pool"] == "small")
    .and_then(|r| r["needed"]["ipv4-addrs"].as_u64())
}

/// Pool `small`'s entry of `spec.ipam.pools.<list>` (`requested`: its `needed`;
/// `allocated`: its `cidrs`) in a `spec.ipam` value.
fn small_of(ipam: &Value, list: &str) -> Option<Value> {
    let field = if list == "requested" {
        "needed"
    } else {
        "cidrs"
    };
    ipam["pools"][list]
        .as_array()?
        .iter()
        .find(|e| e["pool"] == "small")
        .map(|e| e[field].clone())
}

fn wait_blocks(agent: &Agent, what: &str, want: &[&str]) {
    wait_for(what, Duration::from_secs(15), || {
        let blocks = small_blocks(agent);
        if blocks == want {
            Ok(())
        } else {
            Err(format!("{blocks:?}"))
        }
    });
}

/// A pod added through `weft-cni`.
struct Added {
    netns: NamedNetNs,
    id: String,
    name: String,
    v4: Ipv4Addr,
}

/// ADD `default/name`, retried for up to 15 s while the agent answers 11 (pool not ready) or
/// 100 (its blocks are full until the allocator's next block arrives), as kubelet retries.
fn add_retrying(agent: &Agent, name: &str) -> Added {
    let netns = NamedNetNs::new();
    let id = unique("ctr-");
    let path = netns.path().display().to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let call = agent.cni("ADD", &id, &path, ("default", name));
        if call.code == 0 {
            let v4 = v4_of(&call);
            return Added {
                netns,
                id,
                name: name.to_owned(),
                v4,
            };
        }
        assert!(
            Instant::now() < deadline
                && [11, 100].contains(&call.stdout["code"].as_i64().unwrap_or(0)),
            "ADD default/{name} failed: {}\n--- agent log ---\n{}",
            call.stdout,
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn del_added(agent: &Agent, pod: Added) {
    let pod = weft_tests::agent::Pod {
        netns: pod.netns,
        id: pod.id,
        ns: "default".to_owned(),
        name: pod.name,
        ips: vec![IpAddr::V4(pod.v4)],
    };
    del(agent, &pod);
}

fn small_pool_agent(pool: &str, pre_allocation: &str, pods: usize) -> Agent {
    let names: Vec<(String, String)> = (0..pods)
        .map(|i| (format!("pods/default/p{i}.yaml"), pod_doc(&format!("p{i}"))))
        .collect();
    let mut docs: Vec<(&str, &str)> = vec![
        ("ciliumnodes/node1.yaml", NODE1),
        ("namespaces/default.yaml", NAMESPACE),
        ("ciliumpodippools/small.yaml", pool),
    ];
    docs.extend(
        names
            .iter()
            .map(|(rel, text)| (rel.as_str(), text.as_str())),
    );
    agent_with(
        &docs,
        &[
            "--ipam",
            "multi-pool",
            "--ipam-default-ip-pool",
            "small",
            "--ipam-multi-pool-pre-allocation",
            pre_allocation,
            "--ipam-cilium-node-update-rate",
            "300ms",
        ],
    )
}

#[test]
fn a_pool_of_28s_grows_by_a_block_when_its_pods_need_it_and_shrinks_after_their_dels() {
    require_root();
    let _node = ThreadNetNs::new();
    // Pre-allocation 1: the agent asks for in-use + 1 addresses.
    let mut agent = small_pool_agent(SMALL, "small=1", 14);
    log_operated(&mut agent);
    agent.start();
    let first = "10.230.0.0/28";
    wait_blocks(
        &agent,
        "the first block (router + pre-allocation)",
        &[first],
    );

    // Router + 12 pods: 13 in use, 14 asked for, one block of 14 is enough.
    let mut pods: Vec<Added> = (0..12)
        .map(|i| add_retrying(&agent, &format!("p{i}")))
        .collect();
    wait_for("requested to reach 14", Duration::from_secs(15), || {
        let asked = small_requested(&agent);
        if asked == Some(14) {
            Ok(())
        } else {
            Err(format!("{asked:?}"))
        }
    });
    wait_operated(&agent, 0, "the allocator to act on 14 asked for", |ipam| {
        small_of(ipam, "requested") == Some(json!({"ipv4-addrs": 14}))
    });
    assert_eq!(
        small_blocks(&agent),
        [first],
        "a block before the pods needed it"
    );

    // The 13th pod: 14 in use, 15 asked for: a second block.
    pods.push(add_retrying(&agent, "p12"));
    let second = "10.230.0.16/28";
    wait_blocks(&agent, "a second block", &[first, second]);
    // The first block is full: the 14th pod lives in the second.
    pods.push(add_retrying(&agent, "p13"));
    let (first_net, second_net): (Ipv4Net, Ipv4Net) =
        (first.parse().expect("cidr"), second.parse().expect("cidr"));
    let last = pods.last().expect("pods").v4;
    assert!(
        second_net.contains(&last),
        "p13 got {last}, outside {second_net}"
    );
    for pod in &pods {
        assert!(
            first_net.contains(&pod.v4) || second_net.contains(&pod.v4),
            "{} got {} outside the pool's blocks",
            pod.name,
            pod.v4
        );
    }
    let node = doc(&agent, "ciliumnodes/node1.yaml");
    assert!(
        node["status"]["ipam"]["operator-status"]["error"].is_null(),
        "{node}"
    );

    // The DELs give the second block back: in use 1 (the router), 2 asked for.
    let before_dels = agent.log().len();
    for pod in pods.drain(..) {
        del_added(&agent, pod);
    }
    wait_blocks(&agent, "the second block to go back", &[first]);
    assert_eq!(small_requested(&agent), Some(2));
    // The pass that reads its own release (2 asked for, the first block held) must not carve.
    wait_operated(
        &agent,
        before_dels,
        "the allocator to read its release back",
        |ipam| {
            small_of(ipam, "requested") == Some(json!({"ipv4-addrs": 2}))
                && small_of(ipam, "allocated") == Some(json!([first]))
        },
    );
    assert_eq!(
        small_blocks(&agent),
        [first],
        "the allocator gave the block out again"
    );
}

#[test]
fn a_v2_pool_never_gets_a_block_from_its_reserved_range() {
    require_root();
    let _node = ThreadNetNs::new();
    // Pre-allocation 20: 0 in use asks for 20, the router makes it 40, three blocks of 14.
    let mut agent = small_pool_agent(RESERVED, "small=20", 1);
    agent.start();
    wait_blocks(
        &agent,
        "three blocks after the reserved range",
        &["10.231.0.48/28", "10.231.0.64/28", "10.231.0.80/28"],
    );
    let reserved_end: Ipv4Addr = "10.231.0.40".parse().expect("ip");
    let pod = add_retrying(&agent, "p0");
    assert!(
        pod.v4 > reserved_end,
        "p0 got {} inside the reserved range",
        pod.v4
    );
    let node: Value = doc(&agent, "ciliumnodes/node1.yaml");
    assert!(
        node["status"]["ipam"]["operator-status"]["error"].is_null(),
        "{node}"
    );
    del_added(&agent, pod);
}
