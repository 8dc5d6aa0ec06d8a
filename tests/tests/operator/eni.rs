//! `weft-operator --ipam eni` against the EC2 + IMDS emulator and the Kubernetes API emulator:
//! a CiliumNode as Cilium's ENI agent seeds it (instance, type, VPC, zone, node subnet,
//! `first-interface-index: 1`, the security groups by tag) is filled to `pre-allocate` through
//! a new ENI attached at index 1, with `status.eni.enis` equal to what EC2 holds and the ENI's
//! primary address never handed out, with only the actions of `deploy/aws/weft-eni-base.json`
//! allowed; an operator SIGKILLed between creating an ENI and attaching it leaves no second ENI
//! (the next one's `ClientToken` finds the first's, which it attaches).

mod bad_spec;
mod credentials;
mod gc;
mod limits;
mod moto;
mod prefixes;
mod release;
mod subnets;
mod throttling;
mod writes;

use std::{collections::BTreeSet, time::Duration};

use serde_json::{Value, json};
use weft_tests::{
    ec2::{EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, EXAMPLE_VPC, Ec2Emulator, Fault, Scenario},
    operator::Operator,
};

use super::{Cluster, wait_for};

/// The access key the emulator accepts (its signatures verified with the secret).
const ACCESS_KEY: &str = "AKIDWEFTTEST";
const SECRET_KEY: &str = "weft-test-secret";

struct Aws {
    ec2: Ec2Emulator,
    cluster: Cluster,
}

/// The IAM policy documents of `deploy/aws/` named `files`, as one document.
fn policy(files: &[&str]) -> Value {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/aws");
    let mut statements = Vec::new();
    for file in files {
        let path = dir.join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let doc: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        statements.extend(doc["Statement"].as_array().cloned().unwrap_or_default());
    }
    json!({"Version": "2012-10-17", "Statement": statements})
}

impl Aws {
    /// The example estate, enforcing the IAM policy documents `policies` of `deploy/aws/`.
    fn start(policies: &[&str]) -> Self {
        let mut scenario = Scenario::example();
        scenario.policy = Some(policy(policies));
        Self::with(scenario)
    }

    /// `scenario`, accepting only the test's access key (its signatures verified).
    fn with(mut scenario: Scenario) -> Self {
        scenario.access_keys = vec![ACCESS_KEY.to_owned()];
        scenario
            .secret_keys
            .insert(ACCESS_KEY.to_owned(), SECRET_KEY.to_owned());
        Self {
            ec2: Ec2Emulator::start(scenario),
            cluster: Cluster::start(),
        }
    }

    fn operator(&self, extra: &[&str]) -> Operator {
        self.operator_with_env(
            extra,
            &[
                ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
                ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
            ],
        )
    }

    /// An operator with `extra` flags and `env` as its AWS environment, started, once it
    /// serves (it may still be waiting for EC2).
    fn operator_with_env(&self, extra: &[&str], env: &[(&str, &str)]) -> Operator {
        let url = self.ec2.url();
        let mut flags = vec![
            "--ipam=eni",
            "--leader-election=false",
            "--ec2-api-endpoint",
            &url,
            "--aws-imds-endpoint",
            &url,
            "--aws-region",
            "us-east-1",
            "--aws-vpc-id",
            EXAMPLE_VPC,
        ];
        flags.extend_from_slice(extra);
        let mut op = Operator::new(&self.cluster.kubeconfig, &flags);
        // Whatever the test's own environment holds, only `env` is the operator's AWS setup.
        op.env = AWS_ENV
            .iter()
            .map(|k| ((*k).to_owned(), String::new()))
            .collect();
        op.env
            .extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        op.spawn();
        op.wait_log("--operator-prometheus-serve-addr", Duration::from_secs(20));
        op
    }

    /// A Node and its CiliumNode as Cilium's ENI agent seeds them.
    fn add_node(&self, name: &str) {
        self.add_node_with(name, EXAMPLE_INSTANCE, &json!({}));
    }

    /// A Node and its CiliumNode on `instance` (an m5.large of the example's node subnet
    /// unless `eni` says otherwise: its keys replace the seeded `spec.eni` ones).
    fn add_node_with(&self, name: &str, instance: &str, eni: &Value) {
        let mut spec_eni = json!({
            "instance-type": "m5.large", "vpc-id": EXAMPLE_VPC,
            "availability-zone": "us-east-1a", "node-subnet-id": EXAMPLE_NODE_SUBNET,
            "first-interface-index": 1,
            "security-group-tags": {"weft": "nodes"},
        });
        for (k, v) in eni.as_object().into_iter().flatten() {
            spec_eni[k] = v.clone();
        }
        let zone = spec_eni["availability-zone"]
            .as_str()
            .unwrap_or("us-east-1a");
        self.cluster.emu.put(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name},
            "spec": {"providerID": format!("aws:///{zone}/{instance}")},
        }));
        self.cluster.emu.put(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": name},
            "spec": {"instance-id": instance, "eni": spec_eni, "ipam": {}},
        }));
    }

    /// Set `status.ipam.used` of a node to `ips` (as its 1.19 agent would).
    fn set_used(&self, name: &str, ips: &BTreeSet<String>) {
        let mut node = self.node(name);
        let used: serde_json::Map<String, Value> = (ips.iter())
            .map(|ip| (ip.clone(), json!({"owner": format!("default/pod-{ip}")})))
            .collect();
        node["status"]["ipam"]["used"] = Value::Object(used);
        self.cluster.emu.put(node);
    }

    /// Wait until `name`'s pool holds `count` addresses; the pool.
    fn wait_pool(
        &self,
        name: &str,
        count: usize,
        timeout: Duration,
        op: &Operator,
    ) -> BTreeSet<String> {
        wait_for(
            &format!("{name}'s pool to hold {count} addresses"),
            timeout,
            || {
                let node = self.node(name);
                (pool(&node).len() == count)
                    .then_some(())
                    .ok_or_else(|| format!("{node}\n--- operator ---\n{}", op.log()))
            },
        );
        pool(&self.node(name))
    }

    /// Wait until `name`'s `operator-status.error` contains every one of `words`; the error.
    fn wait_error(&self, name: &str, words: &[&str], timeout: Duration, op: &Operator) -> String {
        wait_for(
            &format!("{name}'s operator-status to say {words:?}"),
            timeout,
            || {
                let error = self.cluster.operator_error(name);
                words
                    .iter()
                    .all(|w| error.contains(w))
                    .then_some(())
                    .ok_or_else(|| {
                        format!("operator-status: {error:?}\n--- operator ---\n{}", op.log())
                    })
            },
        );
        self.cluster.operator_error(name)
    }

    fn node(&self, name: &str) -> Value {
        self.cluster.cilium_node(name).unwrap_or(Value::Null)
    }
}

/// The AWS variables of the credential chain and region (emptied for every operator, so the
/// test's own environment never leaks in).
const AWS_ENV: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_SESSION_NAME",
    "AWS_ENDPOINT_URL_STS",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_PROFILE",
];

/// Log lines of `op` containing every one of `words`.
fn log_lines(op: &Operator, words: &[&str]) -> Vec<String> {
    op.log()
        .lines()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .map(str::to_owned)
        .collect()
}

fn pool(node: &Value) -> BTreeSet<String> {
    node["spec"]["ipam"]["pool"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn a_node_fills_to_pre_allocate_through_a_new_eni_at_the_first_interface_index() {
    let aws = Aws::start(&["weft-eni-base.json"]);
    aws.add_node("node-a");
    let op = aws.operator(&[]);
    wait_for(
        "node-a's pool to hold 8 addresses",
        Duration::from_mins(1),
        || {
            let node = aws.node("node-a");
            (pool(&node).len() == 8)
                .then_some(())
                .ok_or_else(|| format!("{node}\n--- operator ---\n{}", op.log()))
        },
    );
    let enis = aws.ec2.instance_enis(EXAMPLE_INSTANCE);
    assert_eq!(enis.len(), 2, "the primary ENI and one new one: {enis:?}");
    let new = enis
        .iter()
        .find(|e| e.attachment.as_ref().is_some_and(|a| a.device_index == 1))
        .expect("an ENI at device index 1");
    assert!(
        new.attachment
            .as_ref()
            .is_some_and(|a| a.delete_on_termination),
        "marked delete-on-termination"
    );
    assert_eq!(new.description, format!("Cilium-CNI ({EXAMPLE_INSTANCE})"));
    let secondaries: BTreeSet<String> = new.ips.iter().skip(1).map(ToString::to_string).collect();
    let node = aws.node("node-a");
    assert_eq!(
        pool(&node),
        secondaries,
        "the pool is the new ENI's secondaries"
    );
    let shown = &node["status"]["eni"]["enis"][&new.id];
    assert_eq!(shown["number"], 1, "{node}");
    assert_eq!(shown["ip"], new.ips[0].to_string());
    assert_eq!(
        shown["addresses"].as_array().map(Vec::len),
        Some(8),
        "the primary is the ENI's ip only: {shown}"
    );
    assert_eq!(node["spec"]["ipam"]["pre-allocate"], 8, "written back");
    assert!(
        node["status"]["eni"]["enis"]
            .as_object()
            .map(serde_json::Map::len)
            == Some(2),
        "every ENI of the instance is shown, the excluded one too: {node}"
    );
    assert_eq!(aws.ec2.log().count("CreateNetworkInterface"), 1);
    let refused: Vec<String> = (aws.ec2.requests().into_iter())
        .filter(|r| r.code.as_deref() == Some("UnauthorizedOperation"))
        .map(|r| r.action)
        .collect();
    assert!(
        refused.is_empty(),
        "deploy/aws/weft-eni-base.json lacks {refused:?}"
    );
}

#[test]
fn an_operator_killed_between_create_and_attach_leaves_no_second_eni() {
    let aws = Aws::start(&["weft-eni-base.json"]);
    // The attachment hangs, so the operator dies with the ENI created and not attached.
    aws.ec2
        .inject(Fault::latency(Some("AttachNetworkInterface"), Duration::from_mins(1)).times(1));
    aws.add_node("node-k");
    let mut op = aws.operator(&[]);
    // The request log shows a request once answered: the creation is; the attachment hangs
    // once it has taken the fault (else the next operator's attachment would take it).
    wait_for("the attachment to hang", Duration::from_secs(30), || {
        (aws.ec2.log().count("CreateNetworkInterface") > 0 && aws.ec2.armed_faults() == 0)
            .then_some(())
            .ok_or_else(|| "no CreateNetworkInterface yet, or no attachment hanging".to_owned())
    });
    op.kill();
    let _next = aws.operator(&[]);
    wait_for(
        "node-k's pool to hold 8 addresses",
        Duration::from_mins(1),
        || {
            let node = aws.node("node-k");
            (pool(&node).len() == 8)
                .then_some(())
                .ok_or_else(|| node.to_string())
        },
    );
    let all = aws.ec2.enis();
    assert_eq!(
        all.len(),
        2,
        "the primary ENI and the one created before the kill, attached after it: {all:?}"
    );
    assert!(
        all.iter().all(|e| e.attachment.is_some()),
        "no detached ENI left: {all:?}"
    );
}
