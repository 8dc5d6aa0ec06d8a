//! EC2's answers in the cache's terms.

use super::*;
use crate::eni::api::model::Attachment;

fn network() -> NetworkState {
    parse_network(
        vec![model::Vpc {
            id: "vpc-1".into(),
            primary_cidr: "10.0.0.0/16".into(),
            cidrs: vec!["10.0.0.0/16".into(), "100.64.0.0/16".into()],
        }],
        vec![
            model::Subnet {
                id: "subnet-1".into(),
                cidr: "10.0.1.0/24".into(),
                available_addresses: -3,
                availability_zone: "us-east-1a".into(),
                vpc_id: "vpc-1".into(),
                tags: BTreeMap::new(),
            },
            model::Subnet {
                id: "subnet-bad".into(),
                cidr: "10.0.300.0/24".into(),
                ..model::Subnet::default()
            },
        ],
        vec![model::RouteTable {
            id: "rtb-1".into(),
            vpc_id: "vpc-1".into(),
            associations: vec![
                model::RouteTableAssociation {
                    subnet_id: Some("subnet-1".into()),
                    state: Some("associated".into()),
                },
                model::RouteTableAssociation {
                    subnet_id: Some("subnet-2".into()),
                    state: Some("disassociated".into()),
                },
            ],
        }],
        Vec::new(),
    )
}

#[test]
fn the_network_keeps_what_parses_and_counts_no_negative_free_addresses() {
    let n = network();
    assert_eq!(
        n.vpcs["vpc-1"].cidrs,
        ["100.64.0.0/16".parse::<IpNet>().unwrap()]
    );
    assert_eq!(
        n.subnets.len(),
        1,
        "a subnet whose CIDR does not parse is skipped"
    );
    assert_eq!(
        n.subnets["subnet-1"].available, 0,
        "moto's negative count reads as none"
    );
    assert_eq!(
        n.route_tables[0].subnets.iter().collect::<Vec<_>>(),
        ["subnet-1"],
        "only associated associations"
    );
}

#[test]
fn an_eni_lists_its_addresses_and_its_prefix_addresses_with_the_network_s_cidrs() {
    let ni = NetworkInterface {
        id: "eni-1".into(),
        primary_ip: Some("10.0.1.10".into()),
        mac: "02:00:00:00:00:01".into(),
        subnet_id: "subnet-1".into(),
        vpc_id: "vpc-1".into(),
        attachment: Some(Attachment {
            device_index: Some(1),
            instance_id: Some("i-1".into()),
            attachment_id: Some("a-1".into()),
        }),
        private_ips: vec!["10.0.1.10".into(), "10.0.1.11".into()],
        ipv4_prefixes: vec!["10.0.1.32/28".into()],
        ..NetworkInterface::default()
    };
    let eni = parse_eni(&ni, &network()).expect("parses");
    assert_eq!(eni.number, 1);
    assert_eq!(eni.addresses.len(), 18, "2 private + 16 of the /28");
    assert_eq!(
        eni.subnet.unwrap().cidr,
        Some("10.0.1.0/24".parse().unwrap())
    );
    assert_eq!(
        eni.vpc.unwrap().primary_cidr,
        Some("10.0.0.0/16".parse().unwrap())
    );
    let broken = NetworkInterface {
        private_ips: vec!["10.0.1.999".into()],
        ..ni.clone()
    };
    assert_eq!(parse_eni(&broken, &network()), None);
    let no_primary = NetworkInterface {
        primary_ip: None,
        ..ni
    };
    assert_eq!(parse_eni(&no_primary, &network()), None);
}
