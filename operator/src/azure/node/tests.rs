//! Azure's node operations on a filled cache (Cilium's `node_test.go` cases: capacity with
//! and without the primary, the interface-name filter, the 256 limit, the subnet choice, the
//! status sort). The API panics on any call: these must all be answered from the cache.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use weft_k8s::crd::azure::{AzureAddress, AzureInterface, AzureSpec, AzureSubnet};

use super::*;
use crate::azure::{
    api::ArmError,
    model,
    parse::{Subnet, SubnetMap},
};

#[derive(Debug)]
struct NoCalls;

impl AzureApi for NoCalls {
    async fn list_all_network_interfaces(&self) -> Result<Vec<model::NetworkInterface>, ArmError> {
        panic!("unexpected ARM call: list_all_network_interfaces")
    }
    async fn list_vm_network_interfaces(
        &self,
        id: &str,
    ) -> Result<Vec<model::NetworkInterface>, ArmError> {
        panic!("unexpected ARM call: list_vm_network_interfaces {id}")
    }
    async fn get_network_interface(&self, name: &str) -> Result<model::NetworkInterface, ArmError> {
        panic!("unexpected ARM call: get_network_interface {name}")
    }
    async fn get_subnets(&self, ids: &BTreeSet<String>) -> SubnetMap {
        panic!("unexpected ARM call: get_subnets {ids:?}")
    }
    async fn assign_private_ips_vm(&self, _: &str, _: &str, _: usize) -> Result<(), ArmError> {
        panic!("unexpected ARM call")
    }
    async fn assign_private_ips_vmss(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: &str,
        _: usize,
    ) -> Result<(), ArmError> {
        panic!("unexpected ARM call")
    }
    async fn release_private_ips_vm(&self, _: &str, _: &[IpAddr]) -> Result<(), ArmError> {
        panic!("unexpected ARM call")
    }
    async fn release_private_ips_vmss(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: &[IpAddr],
    ) -> Result<(), ArmError> {
        panic!("unexpected ARM call")
    }
    async fn assign_public_ip_vm(
        &self,
        _: &str,
        _: &BTreeMap<String, String>,
    ) -> Result<String, ArmError> {
        panic!("unexpected ARM call")
    }
    async fn assign_public_ip_vmss(
        &self,
        _: &str,
        _: &str,
        _: &BTreeMap<String, String>,
    ) -> Result<String, ArmError> {
        panic!("unexpected ARM call")
    }
}

const SUBNET: &str =
    "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/a";
const INSTANCE: &str = "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachinescalesets/vmss/virtualmachines/1";

fn nic(name: &str, primary: Option<&str>, addresses: usize) -> AzureInterface {
    AzureInterface {
        id: format!(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/vmss/virtualMachines/1/networkInterfaces/{name}"
        ),
        name: name.to_owned(),
        ip: primary.map(|p| p.parse().unwrap()),
        // Each NIC's addresses in its own /24s (by the name's last byte).
        addresses: (0..addresses)
            .map(|i| AzureAddress {
                ip: format!(
                    "10.{}.{}.{}",
                    name.bytes().last().unwrap_or(0),
                    i / 200,
                    i % 200 + 10
                ),
                state: "succeeded".into(),
                ..AzureAddress::default()
            })
            .collect(),
        subnet: Some(AzureSubnet {
            id: SUBNET.into(),
            ..AzureSubnet::default()
        }),
        ..AzureInterface::default()
    }
}

fn cache(nics: Vec<AzureInterface>, subnet_free: u64, use_primary: bool) -> Instances<NoCalls> {
    let instances = Instances::new(NoCalls, use_primary, "rg");
    {
        let mut c = instances.lock();
        c.instances.insert(
            INSTANCE.into(),
            nics.into_iter().map(|n| (n.id.clone(), n)).collect(),
        );
        c.subnets.insert(
            SUBNET.into(),
            Subnet {
                id: SUBNET.into(),
                cidr: Some("10.1.0.0/16".parse().unwrap()),
                virtual_network_id: String::new(),
                available_addresses: subnet_free,
            },
        );
    }
    instances
}

fn spec(interface_name: &str) -> AzureSpec {
    AzureSpec {
        interface_name: interface_name.to_owned(),
        ..AzureSpec::default()
    }
}

fn node(spec: &AzureSpec) -> NodeRef<'_, AzureSpec> {
    NodeRef {
        name: "n1",
        instance_id: INSTANCE,
        spec,
    }
}

#[test]
fn capacity_counts_one_slot_per_hidden_primary() {
    // (NICs with a primary, use_primary, expected capacity) — Cilium's 255/256/254/256.
    for (primaries, use_primary, want) in [
        (1, false, 255),
        (1, true, 256),
        (2, false, 254),
        (2, true, 256),
    ] {
        let nics = (0..primaries)
            .map(|i| nic(&format!("eth{i}"), Some("10.1.9.4"), 3))
            .collect();
        let c = cache(nics, 100, use_primary);
        let (available, stats) = c.resync_interfaces(node(&spec(""))).unwrap();
        assert_eq!(
            stats.node_capacity, want,
            "{primaries} primaries, use_primary={use_primary}"
        );
        assert_eq!(available.len(), 3 * primaries, "addresses of every NIC");
    }
}

#[test]
fn only_succeeded_addresses_are_available() {
    let mut n = nic("eth0", Some("10.1.9.4"), 3);
    n.addresses[1].state = "updating".into();
    let c = cache(vec![n], 100, false);
    let (available, _) = c.resync_interfaces(node(&spec(""))).unwrap();
    assert_eq!(available.len(), 2);
    assert!(
        available
            .values()
            .all(|r| r.ends_with("/networkInterfaces/eth0"))
    );
}

#[test]
fn allocation_takes_the_first_nic_with_room_on_its_own_subnet() {
    // (addresses on eth0, eth1, interface-name, subnet free, expected NIC, expected amount, candidates)
    let cases: &[(usize, usize, &str, u64, &str, u64, u64)] = &[
        (10, 0, "", 100, "eth0", 100, 2),
        (255, 0, "", 100, "eth1", 100, 1),
        (10, 0, "eth1", 100, "eth1", 100, 1),
        (250, 0, "", 100, "eth0", 5, 2),
        (10, 0, "", 3, "eth0", 3, 2),
        (10, 0, "", 0, "eth0", 0, 2),
        (255, 255, "", 100, "", 0, 0),
        (10, 0, "eth7", 100, "", 0, 0),
    ];
    for &(a0, a1, filter, free, want_nic, want_amount, candidates) in cases {
        let c = cache(
            vec![
                nic("eth0", Some("10.1.9.4"), a0),
                nic("eth1", Some("10.1.9.5"), a1),
            ],
            free,
            false,
        );
        let a = c.prepare_allocation(node(&spec(filter))).unwrap();
        let case = format!("eth0={a0} eth1={a1} filter={filter:?} free={free}");
        assert!(
            a.interface_id.ends_with(want_nic),
            "{case}: {}",
            a.interface_id
        );
        assert_eq!(a.available_for_allocation, want_amount, "{case}");
        assert_eq!(a.interface_candidates, candidates, "{case}");
        if !want_nic.is_empty() {
            assert_eq!(a.pool_id, SUBNET, "{case}");
        }
    }
}

#[test]
fn a_missing_instance_names_the_resource_group_mistake() {
    let c = cache(Vec::new(), 100, false);
    let other = "/subscriptions/s/resourcegroups/mc_rg_cluster_westeurope/providers/microsoft.compute/virtualmachines/vm9";
    let error = c
        .resync_interfaces(NodeRef {
            name: "n9",
            instance_id: other,
            spec: &AzureSpec::default(),
        })
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("--azure-resource-group must be the resource group of the nodes"),
        "{error}"
    );
    assert!(error.contains("mc_rg_cluster_westeurope"), "{error}");
}

#[test]
fn status_sorts_interfaces_by_id_and_addresses_by_ip() {
    let mut b = nic("b", None, 0);
    b.addresses = ["10.1.0.10", "10.1.0.9", "10.1.0.100"]
        .iter()
        .map(|ip| AzureAddress {
            ip: (*ip).into(),
            state: "succeeded".into(),
            ..AzureAddress::default()
        })
        .collect();
    let a = nic("a", None, 1);
    let nics: BTreeMap<String, AzureInterface> =
        [b, a].into_iter().map(|n| (n.id.clone(), n)).collect();
    let sorted = status_interfaces(&nics);
    assert!(sorted[0].id.ends_with("/a"));
    let ips: Vec<&str> = sorted[1].addresses.iter().map(|a| a.ip.as_str()).collect();
    assert_eq!(ips, ["10.1.0.9", "10.1.0.10", "10.1.0.100"]);
}

#[test]
fn release_never_picks_a_used_or_primary_address() {
    // eth0's addresses are 10.48.0.10 to .14 ('0' is byte 48); the first is its primary.
    let c = cache(vec![nic("eth0", Some("10.48.0.10"), 5)], 100, true);
    let used = BTreeSet::from(["10.48.0.11".to_owned()]);
    let r = c.prepare_release(node(&spec("")), 10, &used);
    assert_eq!(r.ips, ["10.48.0.12", "10.48.0.13", "10.48.0.14"]);
}

#[test]
fn authorization_failures_name_a_role() {
    assert!(
        role_for("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/write")
            .contains("Virtual Machine Contributor")
    );
    assert!(role_for("Microsoft.Network/networkInterfaces/write").contains("Network Contributor"));
}
