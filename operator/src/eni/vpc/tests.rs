//! Cilium's choice order for a new ENI's subnet, security groups and device index.

use super::*;

fn subnet(id: &str, zone: &str, available: u64, tags: &[(&str, &str)]) -> Subnet {
    Subnet {
        id: id.into(),
        cidr: None,
        availability_zone: zone.into(),
        vpc_id: "vpc-1".into(),
        available,
        tags: tags
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

fn subnets(list: Vec<Subnet>) -> BTreeMap<String, Subnet> {
    list.into_iter().map(|s| (s.id.clone(), s)).collect()
}

fn spec() -> EniSpec {
    EniSpec {
        vpc_id: "vpc-1".into(),
        availability_zone: "a".into(),
        node_subnet_id: "node".into(),
        ..EniSpec::default()
    }
}

fn table(subnets: &[&str]) -> RouteTable {
    RouteTable {
        id: "rtb".into(),
        vpc_id: "vpc-1".into(),
        subnets: subnets.iter().map(|s| (*s).to_owned()).collect(),
    }
}

#[test]
fn each_rule_in_cilium_s_order() {
    let all = subnets(vec![
        subnet("node", "a", 100, &[]),
        subnet("listed-small", "a", 5, &[]),
        subnet("listed-big", "a", 50, &[]),
        subnet("listed-other-zone", "b", 500, &[]),
        subnet("tagged", "a", 20, &[("pods", "yes")]),
        subnet("routed", "a", 30, &[]),
        subnet("any", "a", 400, &[]),
    ]);
    let tables = [table(&["node", "routed"])];
    let sgs = BTreeMap::new();
    let net = Network {
        subnets: &all,
        route_tables: &tables,
        security_groups: &sgs,
    };
    let mut s = spec();
    s.subnet_ids = vec![
        "listed-small".into(),
        "listed-big".into(),
        "listed-other-zone".into(),
    ];
    s.subnet_tags = BTreeMap::from([("pods".into(), "yes".into())]);
    let pick = |s: &EniSpec, limit| {
        let c = net.choose_subnet(s, limit).expect("a subnet");
        (c.subnet.id, c.rule, c.shares_route_table)
    };
    assert_eq!(
        pick(&s, 10),
        ("listed-big".into(), SubnetRule::Listed, false)
    );
    s.subnet_ids.clear();
    assert_eq!(pick(&s, 10), ("tagged".into(), SubnetRule::Tagged, false));
    s.subnet_tags.clear();
    assert_eq!(pick(&s, 10), ("node".into(), SubnetRule::NodeSubnet, true));
    assert_eq!(
        pick(&s, 101),
        ("routed".into(), SubnetRule::RouteTable, true),
        "the node subnet has less room than an ENI"
    );
    s.node_subnet_id = "elsewhere".into();
    assert_eq!(pick(&s, 10), ("any".into(), SubnetRule::AnyInZone, false));
}

#[test]
fn no_subnet_names_each_one_and_why() {
    let all = subnets(vec![
        subnet("node", "a", 3, &[]),
        subnet("full", "a", 0, &[]),
        subnet("far", "b", 90, &[]),
    ]);
    let sgs = BTreeMap::new();
    let net = Network {
        subnets: &all,
        route_tables: &[],
        security_groups: &sgs,
    };
    let mut s = spec();
    s.availability_zone = "c".into();
    let err = net.choose_subnet(&s, 10).expect_err("zone c has none");
    assert_eq!(
        err.considered,
        [
            ("far".to_owned(), Passed::OtherZone),
            ("full".to_owned(), Passed::OtherZone),
            ("node".to_owned(), Passed::OtherZone),
        ]
    );
    s.availability_zone = "a".into();
    let full = subnets(vec![
        subnet("full", "a", 0, &[]),
        subnet("node", "a", 0, &[]),
        subnet("far", "b", 90, &[]),
    ]);
    let net = Network {
        subnets: &full,
        ..net
    };
    let text = net.choose_subnet(&s, 10).expect_err("full").to_string();
    assert!(
        text.starts_with("No matching subnet available for interface creation (VPC=vpc-1 AZ=a"),
        "{text}"
    );
    assert!(
        text.ends_with("considered far: another availability zone, full: no free address, node: no free address"),
        "{text}"
    );
}

fn eni(id: &str, number: i64, groups: &[&str]) -> (String, Eni) {
    (
        id.to_owned(),
        Eni {
            id: id.into(),
            number,
            security_groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..Eni::default()
        },
    )
}

#[test]
fn security_groups_given_then_tagged_then_the_primary_eni_s() {
    let sgs: BTreeMap<String, SecurityGroup> = [
        ("sg-b", "vpc-1", true),
        ("sg-a", "vpc-1", true),
        ("sg-other-vpc", "vpc-2", true),
        ("sg-untagged", "vpc-1", false),
    ]
    .into_iter()
    .map(|(id, vpc, tagged)| {
        let tags = if tagged {
            BTreeMap::from([("role".to_owned(), "pods".to_owned())])
        } else {
            BTreeMap::new()
        };
        (
            id.to_owned(),
            SecurityGroup {
                id: id.into(),
                vpc_id: vpc.into(),
                tags,
            },
        )
    })
    .collect();
    let all = BTreeMap::new();
    let net = Network {
        subnets: &all,
        route_tables: &[],
        security_groups: &sgs,
    };
    let enis = BTreeMap::from([
        eni("eni-0", 0, &["sg-z", "sg-y"]),
        eni("eni-1", 1, &["sg-q"]),
    ]);
    let mut s = spec();
    let mut warned = 0;
    let mut warn = |_: &BTreeMap<String, String>| warned += 1;
    s.security_groups = vec!["sg-given".into()];
    assert_eq!(
        net.choose_security_groups(&s, &enis, &mut warn),
        Ok(vec!["sg-given".into()])
    );
    s.security_groups.clear();
    s.security_group_tags = BTreeMap::from([("role".into(), "pods".into())]);
    assert_eq!(
        net.choose_security_groups(&s, &enis, &mut warn),
        Ok(vec!["sg-a".into(), "sg-b".into()])
    );
    s.security_group_tags = BTreeMap::from([("role".into(), "none".into())]);
    assert_eq!(
        net.choose_security_groups(&s, &enis, &mut warn),
        Ok(vec!["sg-y".into(), "sg-z".into()]),
        "no tagged group: the device-0 ENI's, sorted"
    );
    assert_eq!(warned, 1);
    assert_eq!(
        net.choose_security_groups(&s, &BTreeMap::new(), |_| {}),
        Err(NoSecurityGroups)
    );
}

#[test]
fn the_lowest_free_device_index_from_the_first_interface_index() {
    let enis = BTreeMap::from([eni("a", 0, &[]), eni("b", 1, &[]), eni("c", 3, &[])]);
    assert_eq!(free_device_index(&enis, 0), 2);
    assert_eq!(free_device_index(&enis, 1), 2);
    assert_eq!(free_device_index(&enis, 3), 4);
    assert_eq!(free_device_index(&BTreeMap::new(), 1), 1);
}

#[test]
fn subnet_ids_the_cache_lacks_are_named() {
    let all = subnets(vec![subnet("node", "a", 100, &[])]);
    let sgs = BTreeMap::new();
    let net = Network {
        subnets: &all,
        route_tables: &[],
        security_groups: &sgs,
    };
    let mut s = spec();
    assert_eq!(net.check_subnet_ids(&s), Ok(()), "none listed");
    s.subnet_ids = vec!["node".into(), "subnet-typo".into()];
    let error = net.check_subnet_ids(&s).expect_err("one unknown");
    assert_eq!(error.unknown, vec!["subnet-typo".to_owned()]);
    assert!(
        error.to_string().starts_with("spec.eni.subnet-ids: "),
        "{error}"
    );
}
