//! A real client drives a scenario: kubectl creates the pools and nodes, the operator carves,
//! and kubectl reads the CiliumNodes back with Cilium's troubleshooting command.

use std::{
    io::Write as _,
    process::{Command, Stdio},
    time::Duration,
};

use weft_tests::kube::Emulator;

use super::{Cluster, wait_for};

fn kubectl(cluster: &Cluster, args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run kubectl (it must be on PATH): {e}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("kubectl's stdin");
    let out = child.wait_with_output().expect("kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const OBJECTS: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumPodIPPool
metadata: {name: default}
spec:
  ipv4: {cidrs: ["10.10.0.0/16"], maskSize: 24}
---
apiVersion: cilium.io/v2alpha1
kind: CiliumPodIPPool
metadata: {name: mars}
spec:
  ipv4: {cidrs: ["10.20.0.0/16"], maskSize: 26}
  allowLastIP: true
---
apiVersion: cilium.io/v2
kind: CiliumNode
metadata: {name: node-a}
spec:
  ipam:
    pools:
      requested:
      - {pool: default, needed: {ipv4-addrs: 8}}
      - {pool: mars, needed: {ipv4-addrs: 8}}
---
apiVersion: cilium.io/v2
kind: CiliumNode
metadata: {name: node-b}
spec:
  ipam:
    pools:
      requested:
      - {pool: jupiter, needed: {ipv4-addrs: 8}}
"#;

#[test]
fn kubectl_creates_pools_and_nodes_and_reads_the_operator_status() {
    // kubectl sends no bearer token over plain HTTP.
    let cluster = Cluster::with(Emulator::builder().allow_anonymous().start());
    let _op = cluster.operator(&["--leader-election=false", "--ipam", "multi-pool"]);
    kubectl(&cluster, &["apply", "--validate=false", "-f", "-"], OBJECTS);
    wait_for("node-b's error", Duration::from_secs(20), || {
        let e = cluster.operator_error("node-b");
        if e.contains("jupiter") {
            Ok(())
        } else {
            Err(e)
        }
    });
    wait_for("node-a's blocks", Duration::from_secs(20), || {
        let out = kubectl(
            &cluster,
            &[
                "get",
                "ciliumnode",
                "node-a",
                "-o",
                "jsonpath={.spec.ipam.pools.allocated}",
            ],
            "",
        );
        if out.contains("10.10.0.0/24") && out.contains("10.20.0.0/26") {
            Ok(())
        } else {
            Err(out)
        }
    });
    let allocated = kubectl(
        &cluster,
        &[
            "get",
            "ciliumnode",
            "node-a",
            "-o",
            "jsonpath={.spec.ipam.pools.allocated}",
        ],
        "",
    );
    let parsed: serde_json::Value = serde_json::from_str(&allocated).expect("JSON");
    assert_eq!(
        parsed,
        serde_json::json!([
            {"pool": "default", "cidrs": ["10.10.0.0/24"]},
            {"pool": "mars", "cidrs": ["10.20.0.0/26"], "allowLastIP": true},
        ])
    );
    // Cilium's troubleshooting command, as its docs give it.
    let status = kubectl(
        &cluster,
        &[
            "get",
            "ciliumnodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}{\"\\t\"}{.status.ipam.operator-status}{\"\\n\"}{end}",
        ],
        "",
    );
    let lines: Vec<&str> = status.lines().collect();
    assert_eq!(lines.len(), 2, "{status}");
    assert_eq!(lines[0].trim_end(), "node-a", "{status}");
    assert!(lines[1].starts_with("node-b\t{\"error\":"), "{status}");
    assert!(lines[1].contains("jupiter"), "{status}");
}
