//! Node seeding from the Node, the keys, the custom CNI configuration and the instance
//! metadata, and writing the seed into a CiliumNode.

use super::*;

fn node(value: &Value) -> Node {
    serde_json::from_value(value.clone()).expect("node")
}

#[test]
fn instance_ids_from_provider_ids() {
    assert_eq!(
        instance_id("azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/VM1").as_deref(),
        Some("/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm1")
    );
    assert_eq!(
        instance_id("aws:///eu-west-1a/i-0abc123").as_deref(),
        Some("i-0abc123")
    );
    assert_eq!(instance_id("kind://docker/kind/kind-worker"), None);
    assert_eq!(instance_id(""), None);
}

#[test]
fn custom_cni_conf_wins_except_max_allocate() {
    let n = node(
        &json!({"metadata": {"name": "n1", "uid": "u1", "labels": {"a": "b"}},
        "spec": {"providerID": "azure://X"}}),
    );
    let config = NodeSeedConfig {
        min_allocate: 5,
        pre_allocate: 6,
        max_allocate: 7,
        azure_interface_name: "eth0".into(),
        ..NodeSeedConfig::default()
    };
    let custom = CustomCniConf {
        ipam: CustomIpam {
            min_allocate: 10,
            pre_allocate: 0,
            static_ip_tags: BTreeMap::from([("t".into(), "v".into())]),
        },
        azure: CustomAzure {
            interface_name: "eth1".into(),
        },
        eni: None,
    };
    let s = seed(
        &n,
        IpamMode::Azure,
        &config,
        &custom,
        &InstanceMetadata::default(),
    )
    .expect("seed");
    assert_eq!(s.ipam["min-allocate"], 10);
    assert_eq!(s.ipam["pre-allocate"], 6);
    assert_eq!(s.ipam["max-allocate"], 7);
    assert_eq!(s.ipam["static-ip-tags"], json!({"t": "v"}));
    assert_eq!(s.azure_interface.as_deref(), Some("eth1"));
    assert_eq!(s.instance_id.as_deref(), Some("x"));
}

#[test]
fn eni_seed_from_keys_custom_conf_and_provider_id() {
    let n = node(&json!({"metadata": {"name": "n1"},
        "spec": {"providerID": "aws:///eu-west-1a/i-0abc"}}));
    let mut config = NodeSeedConfig::default();
    config.eni.subnet_ids = vec!["subnet-1".into()];
    config.eni.first_interface_index = Some(1);
    let s = seed(
        &n,
        IpamMode::Eni,
        &config,
        &CustomCniConf::default(),
        &InstanceMetadata::default(),
    )
    .expect("seed");
    assert_eq!(s.eni["subnet-ids"], json!(["subnet-1"]));
    assert_eq!(s.eni["first-interface-index"], 1);
    assert_eq!(s.eni["delete-on-termination"], true);
    assert_eq!(s.eni["availability-zone"], "eu-west-1a");
    // A custom configuration wins where set, and its unset delete-on-termination clears
    // the key (Cilium copies it unconditionally).
    let custom: CustomCniConf = serde_json::from_value(
        json!({"eni": {"subnet-ids": ["subnet-9"], "first-interface-index": 2}}),
    )
    .expect("custom conf");
    let s = seed(
        &n,
        IpamMode::Eni,
        &config,
        &custom,
        &InstanceMetadata::default(),
    )
    .expect("seed");
    assert_eq!(s.eni["subnet-ids"], json!(["subnet-9"]));
    assert_eq!(s.eni["first-interface-index"], 2);
    assert!(s.eni.get("delete-on-termination").is_none());
    let mut doc = json!({"metadata": {"name": "n1"}, "spec": {"eni": {"delete-on-termination": true, "vpc-id": "vpc-1"}}});
    assert!(apply(&mut doc, &s));
    assert!(doc["spec"]["eni"].get("delete-on-termination").is_none());
    assert_eq!(
        doc["spec"]["eni"]["vpc-id"], "vpc-1",
        "unseeded fields stay"
    );
    assert!(
        seed(
            &n,
            IpamMode::MultiPool,
            &config,
            &custom,
            &InstanceMetadata::default()
        )
        .expect("seed")
        .eni
        .is_empty()
    );
}

/// §6.4: IMDS supplies the instance, its type, zone, VPC and node subnet; the custom CNI
/// configuration's `vpc-id` wins over IMDS's; what IMDS did not answer falls back to the
/// provider ID (instance and zone) or stays unset.
#[test]
fn eni_seed_from_instance_metadata_with_custom_vpc_winning() {
    let n = node(&json!({"metadata": {"name": "n1"},
        "spec": {"providerID": "aws:///eu-west-1a/i-0fromprovider"}}));
    let config = NodeSeedConfig::default();
    let imds = InstanceMetadata {
        instance_id: "i-0fromimds".into(),
        instance_type: "m5.large".into(),
        availability_zone: "us-east-1b".into(),
        vpc_id: "vpc-imds".into(),
        subnet_id: "subnet-node".into(),
    };
    let s = seed(&n, IpamMode::Eni, &config, &CustomCniConf::default(), &imds).expect("seed");
    assert_eq!(s.instance_id.as_deref(), Some("i-0fromimds"));
    assert_eq!(s.eni["instance-type"], "m5.large");
    assert_eq!(s.eni["availability-zone"], "us-east-1b");
    assert_eq!(s.eni["vpc-id"], "vpc-imds");
    assert_eq!(s.eni["node-subnet-id"], "subnet-node");
    let custom: CustomCniConf =
        serde_json::from_value(json!({"eni": {"vpc-id": "vpc-custom"}})).expect("custom conf");
    let s = seed(&n, IpamMode::Eni, &config, &custom, &imds).expect("seed");
    assert_eq!(
        s.eni["vpc-id"], "vpc-custom",
        "the custom configuration wins"
    );
    assert_eq!(s.eni["node-subnet-id"], "subnet-node");
    // IMDS answered only the instance: the zone comes from the provider ID.
    let partial = InstanceMetadata {
        instance_id: "i-0fromimds".into(),
        ..InstanceMetadata::default()
    };
    let s = seed(
        &n,
        IpamMode::Eni,
        &config,
        &CustomCniConf::default(),
        &partial,
    )
    .expect("seed");
    assert_eq!(s.instance_id.as_deref(), Some("i-0fromimds"));
    assert_eq!(s.eni["availability-zone"], "eu-west-1a");
    for unset in ["instance-type", "vpc-id", "node-subnet-id"] {
        assert!(s.eni.get(unset).is_none(), "{unset}: {:?}", s.eni);
    }
    // Nothing from IMDS: the provider ID's instance, as before.
    let s = seed(
        &n,
        IpamMode::Eni,
        &config,
        &CustomCniConf::default(),
        &InstanceMetadata::default(),
    )
    .expect("seed");
    assert_eq!(s.instance_id.as_deref(), Some("i-0fromprovider"));
    // Outside eni mode the instance metadata is not used.
    let s = seed(
        &n,
        IpamMode::MultiPool,
        &config,
        &CustomCniConf::default(),
        &imds,
    )
    .expect("seed");
    assert_eq!(s.instance_id.as_deref(), Some("i-0fromprovider"));
}

#[test]
fn azure_needs_a_provider_id() {
    let n = node(&json!({"metadata": {"name": "n1"}}));
    let e = seed(
        &n,
        IpamMode::Azure,
        &NodeSeedConfig::default(),
        &CustomCniConf::default(),
        &InstanceMetadata::default(),
    )
    .expect_err("no provider id");
    assert_eq!(
        e.to_string(),
        "Spec.ProviderID in k8s node resource must be set for Azure IPAM"
    );
    let n = node(&json!({"metadata": {"name": "n1"}, "spec": {"providerID": "aws:///i-1"}}));
    let e = seed(
        &n,
        IpamMode::Azure,
        &NodeSeedConfig::default(),
        &CustomCniConf::default(),
        &InstanceMetadata::default(),
    )
    .expect_err("not an azure provider id");
    assert_eq!(
        e,
        SeedError::NotAzureProviderId {
            provider_id: "aws:///i-1".into()
        }
    );
    // Discovery's fatal error keeps the seed's as its source.
    let fatal = crate::k8s::K8sError::ProviderId {
        node: "n1".into(),
        source: e,
    };
    let source = std::error::Error::source(&fatal).expect("a source");
    assert_eq!(
        source.downcast_ref::<SeedError>(),
        Some(&SeedError::NotAzureProviderId {
            provider_id: "aws:///i-1".into()
        })
    );
    assert_eq!(
        source.to_string(),
        "Spec.ProviderID in k8s node resource must have prefix azure://"
    );
}

#[test]
fn kubernetes_mode_copies_pod_cidrs_in_cilium_order() {
    let n = node(&json!({"metadata": {"name": "n1"},
        "spec": {"podCIDRs": ["10.4.0.7/24", "fd00::/64"], "podCIDR": "10.9.0.0/24"}}));
    assert_eq!(
        pod_cidrs(&n),
        vec![
            "10.4.0.0/24".parse::<IpNet>().unwrap(),
            "fd00::/64".parse().unwrap()
        ]
    );
    let n = node(&json!({"metadata": {"name": "n1",
        "annotations": {"io.cilium.network.ipv4-pod-cidr": "10.5.0.0/16"}}}));
    assert_eq!(pod_cidrs(&n), vec!["10.5.0.0/16".parse::<IpNet>().unwrap()]);
    let e = seed(
        &node(&json!({"metadata": {"name": "n1"}})),
        IpamMode::Kubernetes,
        &NodeSeedConfig::default(),
        &CustomCniConf::default(),
        &InstanceMetadata::default(),
    )
    .expect_err("no CIDR");
    assert!(e.to_string().contains("has no pod CIDR"), "{e}");
}

#[test]
fn apply_sets_seeded_fields_and_keeps_the_rest() {
    let n = node(
        &json!({"metadata": {"name": "n1", "uid": "u1", "labels": {"zone": "a"}},
        "spec": {"providerID": "aws:///z/i-1", "podCIDRs": ["10.1.0.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.1"},
                                 {"type": "Hostname", "address": "n1"}]}}),
    );
    let s = seed(
        &n,
        IpamMode::Kubernetes,
        &NodeSeedConfig::default(),
        &CustomCniConf::default(),
        &InstanceMetadata::default(),
    )
    .expect("seed");
    let mut doc = json!({"metadata": {"name": "n1"},
        "spec": {"ipam": {"pool": {"10.0.0.1": {}}}, "future": 1,
                 "addresses": [{"type": "InternalIP", "ip": "192.0.2.99"},
                               {"type": "CiliumInternalIP", "ip": "10.1.0.1"}]}});
    assert!(apply(&mut doc, &s));
    assert_eq!(doc["metadata"]["labels"], json!({"zone": "a"}));
    assert_eq!(doc["metadata"]["ownerReferences"][0]["uid"], "u1");
    assert_eq!(doc["spec"]["instance-id"], "i-1");
    assert_eq!(
        doc["spec"]["addresses"],
        json!([{"type": "InternalIP", "ip": "192.0.2.1"},
               {"type": "CiliumInternalIP", "ip": "10.1.0.1"}]),
        "the Node's addresses, and the router's kept"
    );
    assert_eq!(doc["spec"]["ipam"]["podCIDRs"], json!(["10.1.0.0/24"]));
    assert_eq!(doc["spec"]["ipam"]["pool"], json!({"10.0.0.1": {}}));
    assert_eq!(doc["spec"]["future"], 1);
    assert!(!apply(&mut doc, &s), "seeding twice changes nothing");
}
