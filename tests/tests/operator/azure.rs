//! `weft-operator --ipam azure` against the ARM + IMDS emulator and the Kubernetes API
//! emulator: CiliumNodes as Azure agents create them fill up to `pre-allocate` from their
//! NIC (VMSS instance or standalone VM), grow with use, stop at the NIC's and the subnet's
//! limits without an error storm, get a static public IP, ride out throttling and a SIGKILL
//! between the GET and the PUT, release excess addresses through the agent handshake when
//! asked to, work with exactly the roles of `deploy/azure/`, and say what is wrong where a
//! user looks.

mod failures;
mod limits;
mod rbac;
mod release;

use std::{collections::BTreeSet, net::Ipv4Addr, time::Duration};

use serde_json::{Value, json};
use weft_tests::{
    azure::{ArmEmulator, Scenario},
    operator::Operator,
};

use super::{Cluster, wait_for};

/// One VMSS with two instances and a standalone VM on one subnet, and a tagged prefix.
pub(crate) const SCENARIO: &str = r"
subscriptionId: 11111111-2222-3333-4444-555555555555
resourceGroup: MC_weft_cluster_westeurope
vnets:
  - name: aks-vnet
    subnets:
      - {name: aks-subnet, cidr: 10.240.0.0/22}
vms:
  - name: standalone-0
    nics:
      - {name: standalone-0-nic, subnet: aks-vnet/aks-subnet}
scaleSets:
  - name: aks-nodepool1-vmss
    nics:
      - {name: aks-nodepool1-vmss, subnet: aks-subnet}
    instances: [{index: 0}, {index: 1}]
publicIpPrefixes:
  - name: weft-prefix
    prefix: 20.0.0.0/30
    tags: {weft: egress}
lro: {mode: async, inProgressPolls: 1, retryAfterSeconds: 0}
";

pub(crate) const VMSS: &str = "aks-nodepool1-vmss";

/// The scenario parsed, with `edit` applied.
pub(crate) fn scenario(edit: impl FnOnce(&mut Scenario)) -> Scenario {
    let mut s = Scenario::from_yaml(SCENARIO).unwrap_or_else(|e| panic!("scenario: {e}"));
    edit(&mut s);
    s
}

/// The ARM emulator, the Kubernetes emulator, and helpers.
pub(crate) struct Azure {
    pub(crate) arm: ArmEmulator,
    pub(crate) cluster: Cluster,
}

impl Azure {
    pub(crate) fn start(scenario: Scenario) -> Self {
        Self {
            arm: ArmEmulator::start(scenario),
            cluster: Cluster::start(),
        }
    }

    /// The operator flags pointing at the emulator, plus `extra`.
    pub(crate) fn flags<'a>(url: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut flags = vec![
            "--ipam=azure",
            "--leader-election=false",
            "--azure-arm-endpoint",
            url,
            "--azure-imds-endpoint",
            url,
        ];
        flags.extend_from_slice(extra);
        flags
    }

    /// A started operator with `extra` flags.
    pub(crate) fn operator(&self, extra: &[&str]) -> Operator {
        let url = self.arm.url();
        let mut op = Operator::new(&self.cluster.kubeconfig, &Self::flags(&url, extra));
        op.spawn();
        op.wait_log("--operator-prometheus-serve-addr", Duration::from_secs(20));
        op
    }

    /// The instance ID an agent on VMSS instance `index` writes (Cilium lowercases it).
    pub(crate) fn vmss_instance(&self, index: u32) -> String {
        format!(
            "{}/providers/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/{index}",
            self.arm.resource_group_id()
        )
        .to_lowercase()
    }

    /// The instance ID of the standalone VM `name`.
    pub(crate) fn vm_instance(&self, name: &str) -> String {
        format!(
            "{}/providers/Microsoft.Compute/virtualMachines/{name}",
            self.arm.resource_group_id()
        )
        .to_lowercase()
    }

    /// A Node and its CiliumNode as Cilium's Azure agent seeds it.
    pub(crate) fn add_node(&self, name: &str, instance: &str, ipam: &Value) {
        self.cluster.emu.put(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name},
            "spec": {"providerID": format!("azure://{instance}")},
        }));
        self.cluster.emu.put(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": name},
            "spec": {"instance-id": instance, "ipam": ipam},
        }));
    }

    /// `spec.ipam.pool` of a CiliumNode: address → resource.
    pub(crate) fn pool(&self, name: &str) -> Vec<(String, String)> {
        self.cluster
            .cilium_node(name)
            .and_then(|n| n["spec"]["ipam"]["pool"].as_object().cloned())
            .into_iter()
            .flatten()
            .map(|(ip, v)| (ip, v["resource"].as_str().unwrap_or_default().to_owned()))
            .collect()
    }

    /// Wait until node `name`'s pool has `count` addresses; returns them.
    pub(crate) fn wait_pool(
        &self,
        name: &str,
        count: usize,
        timeout: Duration,
    ) -> Vec<(String, String)> {
        wait_for(
            &format!("{name}'s pool to hold {count} addresses"),
            timeout,
            || {
                let pool = self.pool(name);
                (pool.len() == count)
                    .then_some(())
                    .ok_or_else(|| format!("{} addresses: {pool:?}", pool.len()))
            },
        );
        self.pool(name)
    }

    /// Set `status.ipam.used` of a node to `ips` (as its agent would).
    pub(crate) fn set_used(&self, name: &str, ips: &[String]) {
        let mut node = self.cluster.cilium_node(name).expect("CiliumNode");
        let used: serde_json::Map<String, Value> = ips
            .iter()
            .map(|ip| (ip.clone(), json!({"owner": format!("default/pod-{ip}")})))
            .collect();
        node["status"]["ipam"]["used"] = Value::Object(used);
        self.cluster.emu.put(node);
    }
}

/// The pool's addresses equal the instance's addresses in ARM (nothing lost, nothing twice).
pub(crate) fn assert_pool_is_the_nic(azure: &Azure, node: &str, instance: &str) {
    let pool: Vec<String> = azure.pool(node).into_iter().map(|(ip, _)| ip).collect();
    let in_arm: Vec<Ipv4Addr> = azure.arm.instance_addresses(instance);
    let distinct: BTreeSet<&Ipv4Addr> = in_arm.iter().collect();
    assert_eq!(
        distinct.len(),
        in_arm.len(),
        "an address is on the instance twice: {in_arm:?}"
    );
    // The NIC's primary address is not handed out (--azure-use-primary-address=false).
    let mut secondaries: Vec<String> = in_arm.iter().skip(1).map(ToString::to_string).collect();
    secondaries.sort();
    let mut pool_sorted = pool.clone();
    pool_sorted.sort();
    assert_eq!(
        pool_sorted, secondaries,
        "the pool is the instance's secondary addresses"
    );
}

#[test]
fn vmss_and_vm_nodes_fill_up_to_pre_allocate_from_their_nic() {
    let azure = Azure::start(scenario(|_| {}));
    let vmss0 = azure.vmss_instance(0);
    let vm = azure.vm_instance("standalone-0");
    azure.add_node("vmss-0", &vmss0, &json!({}));
    azure.add_node("vm-0", &vm, &json!({}));
    let _op = azure.operator(&[]);

    let pool = azure.wait_pool("vmss-0", 8, Duration::from_secs(30));
    let nic = azure.arm.vmss_nic_id(VMSS, 0, VMSS);
    assert!(
        pool.iter().all(|(_, r)| r.eq_ignore_ascii_case(&nic)),
        "every address names the NIC: {pool:?}"
    );
    azure.wait_pool("vm-0", 8, Duration::from_secs(30));
    for (node, instance) in [("vmss-0", &vmss0), ("vm-0", &vm)] {
        assert_pool_is_the_nic(&azure, node, instance);
        // The status subresource is its own PATCH, which may land after the spec's pool.
        wait_for(
            &format!("{node}'s status.azure.interfaces to list 8 addresses"),
            Duration::from_secs(30),
            || {
                let n = azure.cluster.cilium_node(node).expect("node");
                let listed = &n["status"]["azure"]["interfaces"][0]["addresses"];
                let count = listed.as_array().map_or(0, Vec::len);
                (count == 8)
                    .then_some(())
                    .ok_or_else(|| format!("{count} addresses: {}", n["status"]))
            },
        );
        let n = azure.cluster.cilium_node(node).expect("node");
        assert_eq!(
            n["spec"]["ipam"]["pre-allocate"], 8,
            "Cilium's default written back"
        );
        let interfaces = n["status"]["azure"]["interfaces"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(interfaces.len(), 1, "{n}");
        let addresses: Vec<&str> = interfaces[0]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["ip"].as_str())
            .collect();
        let mut sorted = addresses.clone();
        sorted.sort_by_key(|ip| ip.parse::<Ipv4Addr>().expect("IP"));
        assert_eq!(addresses, sorted, "addresses sorted by IP");
        assert_eq!(addresses.len(), 8);
        assert_eq!(interfaces[0]["subnet"]["cidr"], "10.240.0.0/22");
        assert_eq!(interfaces[0]["gateway"], "10.240.0.1");
        assert!(
            interfaces[0]["ip"].is_string(),
            "the primary address: {}",
            interfaces[0]
        );
    }
    // Cilium's design: one GET and one PUT per round and node.
    let puts = azure
        .arm
        .requests()
        .iter()
        .filter(|r| r.method == "PUT")
        .count();
    assert_eq!(puts, 2, "one PUT per node");
}

#[test]
fn used_addresses_top_the_node_up() {
    let azure = Azure::start(scenario(|_| {}));
    let vmss1 = azure.vmss_instance(1);
    azure.add_node("vmss-1", &vmss1, &json!({"pre-allocate": 4}));
    let _op = azure.operator(&[]);
    let pool = azure.wait_pool("vmss-1", 4, Duration::from_secs(30));
    let used: Vec<String> = pool.iter().take(3).map(|(ip, _)| ip.clone()).collect();
    azure.set_used("vmss-1", &used);
    // 3 used, 4 kept free: 7.
    azure.wait_pool("vmss-1", 7, Duration::from_secs(30));
    assert_pool_is_the_nic(&azure, "vmss-1", &vmss1);
}

#[test]
fn a_static_public_ip_is_assigned_from_the_tagged_prefix() {
    let azure = Azure::start(scenario(|_| {}));
    let vmss0 = azure.vmss_instance(0);
    let vm = azure.vm_instance("standalone-0");
    azure.add_node(
        "vmss-0",
        &vmss0,
        &json!({"static-ip-tags": {"weft": "egress"}}),
    );
    azure.add_node("vm-0", &vm, &json!({"static-ip-tags": {"weft": "egress"}}));
    let _op = azure.operator(&[]);
    let prefix: ipnet::Ipv4Net = "20.0.0.0/30".parse().expect("prefix");
    for node in ["vmss-0", "vm-0"] {
        wait_for(
            &format!("{node}'s static IP"),
            Duration::from_secs(30),
            || {
                let n = azure.cluster.cilium_node(node).ok_or("no node")?;
                let ip = n["status"]["ipam"]["assigned-static-ip"]
                    .as_str()
                    .unwrap_or_default();
                match ip.parse::<Ipv4Addr>() {
                    Ok(ip) if prefix.contains(&ip) => Ok(()),
                    _ => Err(format!("{:?} / {}", ip, n["status"]["ipam"])),
                }
            },
        );
    }
    let ips: BTreeSet<String> = ["vmss-0", "vm-0"]
        .iter()
        .map(|n| {
            azure.cluster.cilium_node(n).expect("node")["status"]["ipam"]["assigned-static-ip"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(ips.len(), 2, "two nodes, two public IPs: {ips:?}");
    assert_eq!(
        azure.arm.public_ips().len(),
        2,
        "{:?}",
        azure.arm.public_ips()
    );
}
