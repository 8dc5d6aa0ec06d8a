use serde_json::{Value, json};

use super::*;

fn node(value: Value) -> CloudInput {
    CloudInput::from(&serde_json::from_value::<CiliumNode>(value).expect("CiliumNode"))
}

fn two_enis() -> Value {
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": "n"},
        "spec": {"eni": {"first-interface-index": 1}},
        "status": {"eni": {"enis": {
            "eni-0": {"id": "eni-0", "ip": "10.6.0.10", "mac": "02:00:00:00:00:10",
                      "subnet": {"cidr": "10.6.0.0/24"},
                      "vpc": {"primary-cidr": "10.6.0.0/16", "cidrs": ["10.6.0.0/16"]}},
            "eni-1": {"id": "eni-1", "ip": "10.6.1.20", "mac": "02:00:00:00:00:20", "number": 1,
                      "subnet": {"cidr": "10.6.1.0/24"},
                      "vpc": {"primary-cidr": "10.6.0.0/16", "cidrs": ["10.6.0.0/16", "10.7.0.0/16"]},
                      "addresses": ["10.6.1.21"], "prefixes": ["10.6.1.48/28"]},
        }}},
    })
}

#[test]
fn an_eni_address_routes_through_its_eni_with_the_subnet_s_first_address_as_gateway() {
    let cloud = node(two_enis());
    let native = ["10.0.0.0/8".parse().expect("cidr")];
    for ip in ["10.6.1.21", "10.6.1.50", "10.6.1.20"] {
        let ip: IpAddr = ip.parse().expect("ip");
        let routing = cloud
            .pod_routing(IpamMode::Eni, ip, &[])
            .expect("routing")
            .expect("eni mode has routing");
        assert_eq!(routing.mac, "02:00:00:00:00:20");
        assert_eq!(routing.gateway, "10.6.1.1".parse::<IpAddr>().expect("ip"));
        assert_eq!(routing.interface_number, 1);
        assert!(!routing.compat);
        assert_eq!(
            routing.cidrs,
            ["10.6.0.0/15".parse::<IpNet>().expect("cidr")],
            "the VPC CIDRs, coalesced"
        );
    }
    let with_native = cloud
        .pod_routing(IpamMode::Eni, "10.6.1.21".parse().expect("ip"), &native)
        .expect("routing")
        .expect("some");
    assert_eq!(
        with_native.cidrs, native,
        "the native CIDR covers the VPC's"
    );
    assert_eq!(
        cloud
            .pod_routing(IpamMode::Eni, "10.9.9.9".parse().expect("ip"), &[])
            .expect_err("no ENI")
            .to_string(),
        "unable to find ENI for IP 10.9.9.9"
    );
    assert_eq!(
        cloud.pod_routing(IpamMode::MultiPool, "10.6.1.21".parse().expect("ip"), &[]),
        Ok(None)
    );
}

#[test]
fn the_device_configurator_skips_excluded_enis_and_cilium_s_texts_name_an_inconsistent_status() {
    let cloud = node(two_enis());
    assert_eq!(cloud.validate_enis(), Ok(()));
    assert_eq!(
        cloud.eni_devices(),
        [EniDevice {
            id: "eni-1".to_owned(),
            mac: "02:00:00:00:00:20".to_owned(),
            number: 1,
            primary: Some("10.6.1.20/24".parse().expect("cidr")),
        }]
    );
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut n = two_enis();
        edit(&mut n);
        node(n)
            .validate_enis()
            .expect_err("inconsistent")
            .to_string()
    };
    let eni1 = "/status/eni/enis/eni-1";
    let unset = |field: &'static str| {
        move |n: &mut Value| {
            let (parent, key) = field.rsplit_once('/').expect("path");
            n.pointer_mut(&format!("{eni1}{parent}"))
                .and_then(|v| v.as_object_mut())
                .map(|o| o.remove(key));
        }
    };
    assert_eq!(broken(&unset("/ip")), "primary IP not set for ENI eni-1");
    assert_eq!(
        broken(&unset("/subnet/cidr")),
        "subnet CIDR not set for ENI eni-1"
    );
    assert_eq!(
        broken(&unset("/vpc/primary-cidr")),
        "VPC Primary CIDR not set for ENI eni-1"
    );
    // A VPC with its primary CIDR only (EC2 lists no other association): consistent, as in
    // Cilium, which checks only that each listed CIDR is set.
    let mut one_cidr = two_enis();
    unset("/vpc/cidrs")(&mut one_cidr);
    assert_eq!(node(one_cidr).validate_enis(), Ok(()));
    assert_eq!(
        broken(&|n| n["spec"]["ipam"] = json!({"pool": {"10.6.1.21": {"resource": "eni-9"}}})),
        "ENI eni-9 not found in status"
    );
    assert_eq!(
        broken(&|n| n["spec"]["ipam"] = json!({"pool": {"10.6.1.99": {"resource": "eni-1"}}})),
        "ENI eni-1 does not have address 10.6.1.99"
    );
}

#[test]
fn azure_routes_through_the_interface_of_the_pool_entry_in_the_compat_form() {
    let cloud = node(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": "n"},
        "spec": {"ipam": {"pool": {"10.8.1.5": {"resource": "nic-2"}, "10.8.1.6": {}}}},
        "status": {"azure": {"interfaces": [
            {"id": "nic-1", "mac": "02:00:00:00:01:01", "gateway": "10.8.0.1",
             "subnet": {"cidr": "10.8.0.0/24"}},
            {"id": "nic-2", "mac": "02:00:00:00:01:02", "gateway": "10.8.1.1",
             "cidr": "10.8.1.0/24"},
        ]}},
    }));
    let routing = cloud
        .pod_routing(IpamMode::Azure, "10.8.1.5".parse().expect("ip"), &[])
        .expect("routing")
        .expect("some");
    assert_eq!(
        (
            routing.mac.as_str(),
            routing.interface_number,
            routing.compat
        ),
        ("02:00:00:00:01:02", 0, true)
    );
    assert_eq!(routing.gateway, "10.8.1.1".parse::<IpAddr>().expect("ip"));
    assert_eq!(
        routing.cidrs,
        ["10.8.1.0/24".parse::<IpNet>().expect("cidr")]
    );
    assert_eq!(
        cloud
            .pod_routing(IpamMode::Azure, "10.8.1.6".parse().expect("ip"), &[])
            .expect_err("no resource")
            .to_string(),
        "failed to associate IP 10.8.1.6 inside CiliumNode: unable to find ENI "
    );
}

#[test]
fn alibaba_takes_the_vswitch_and_the_index_tag() {
    let cloud = node(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": "n"},
        "spec": {"ipam": {"pool": {"172.16.1.7": {"resource": "eni-a"}}}},
        "status": {"alibaba-cloud": {"enis": {"eni-a": {
            "network-interface-id": "eni-a", "mac-address": "00:16:3e:00:00:01",
            "vswitch": {"cidr": "172.16.1.0/24"}, "tags": {"cilium-eni-index": "2"},
        }}}},
    }));
    let routing = cloud
        .pod_routing(
            IpamMode::AlibabaCloud,
            "172.16.1.7".parse().expect("ip"),
            &[],
        )
        .expect("routing")
        .expect("some");
    assert_eq!(
        routing.gateway,
        "172.16.1.253".parse::<IpAddr>().expect("ip")
    );
    assert_eq!(routing.interface_number, 2);
    assert_eq!(
        routing.cidrs,
        ["172.16.1.0/24".parse::<IpNet>().expect("cidr")]
    );
}

#[test]
fn macs_parse_only_as_six_pairs() {
    assert_eq!(
        parse_mac("02:00:0a:ff:00:20"),
        Some([2, 0, 10, 255, 0, 0x20])
    );
    for bad in [
        "",
        "02:00",
        "02:00:0a:ff:00:2",
        "02:00:0a:ff:00:20:01",
        "zz:00:0a:ff:00:20",
    ] {
        assert_eq!(parse_mac(bad), None, "{bad}");
    }
}
