//! Listings as Cilium reads them: DescribeNetworkInterfaces with every filter it sends
//! (`private-ip-address` matching any address of an ENI, wildcards; `attachment.instance-id`;
//! `subnet-id`; `status`; `tag:K`; `vpc-id`), `NetworkInterfaceId.N`, an unknown filter refused,
//! `MaxResults` + `NextToken` paging, `OperationNotPermitted` for an unpaged listing past the
//! scenario's threshold; the subnet, route-table, instance, instance-type and tag listings.

use weft_tests::ec2::{
    EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, EXAMPLE_POD_SUBNET, EXAMPLE_SG, EXAMPLE_VPC, Scenario,
    Tags,
};

use super::{attach, create_eni, start, start_with};

fn ids(r: &super::Resp) -> Vec<String> {
    r.all("networkInterfaceId")
}

#[test]
fn network_interface_filters_match_like_ec2() {
    let (e, c) = start();
    let primary = e.instance_enis(EXAMPLE_INSTANCE)[0].id.clone();
    let tagged = create_eni(
        &c,
        EXAMPLE_POD_SUBNET,
        &[
            ("TagSpecification.1.ResourceType", "network-interface"),
            ("TagSpecification.1.Tag.1.Key", "io.cilium/cilium-managed"),
            ("TagSpecification.1.Tag.1.Value", "true"),
            ("SecondaryPrivateIpAddressCount", "2"),
        ],
    );
    let attached = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    attach(&c, &attached, EXAMPLE_INSTANCE, 1).expect(200);

    let by = |name: &str, value: &str| {
        let mut found = ids(&c
            .call(
                "DescribeNetworkInterfaces",
                &[("Filter.1.Name", name), ("Filter.1.Value.1", value)],
            )
            .expect(200));
        found.sort();
        found
    };
    let mut on_instance = vec![primary.clone(), attached.clone()];
    on_instance.sort();
    assert_eq!(by("attachment.instance-id", EXAMPLE_INSTANCE), on_instance);
    assert_eq!(by("status", "available"), std::slice::from_ref(&tagged));
    assert_eq!(
        by("tag:io.cilium/cilium-managed", "true"),
        std::slice::from_ref(&tagged)
    );
    assert_eq!(
        by("subnet-id", EXAMPLE_NODE_SUBNET),
        std::slice::from_ref(&primary)
    );
    assert_eq!(by("vpc-id", EXAMPLE_VPC).len(), 3);
    assert_eq!(by("private-ip-address", "*").len(), 3);
    assert_eq!(by("private-ip-address", "10.0.1.*").len(), 2);
    // A secondary address matches its ENI too (moto matches the primary only).
    assert_eq!(
        by("private-ip-address", "10.0.1.6"),
        std::slice::from_ref(&tagged)
    );

    let two_filters = c
        .call(
            "DescribeNetworkInterfaces",
            &[
                ("Filter.1.Name", "subnet-id"),
                ("Filter.1.Value.1", EXAMPLE_POD_SUBNET),
                ("Filter.1.Value.2", EXAMPLE_NODE_SUBNET),
                ("Filter.2.Name", "status"),
                ("Filter.2.Value.1", "in-use"),
            ],
        )
        .expect(200);
    assert_eq!(ids(&two_filters).len(), 2, "values OR-ed, filters AND-ed");

    let listed = c
        .call(
            "DescribeNetworkInterfaces",
            &[
                ("NetworkInterfaceId.1", &tagged),
                ("NetworkInterfaceId.2", &primary),
                ("Filter.1.Name", "private-ip-address"),
                ("Filter.1.Value.1", "*"),
            ],
        )
        .expect(200);
    assert_eq!(ids(&listed).len(), 2);
    c.call(
        "DescribeNetworkInterfaces",
        &[("NetworkInterfaceId.1", "eni-00000000000000bad")],
    )
    .expect_error(400, "InvalidNetworkInterfaceID.NotFound");
    let unknown = c
        .call(
            "DescribeNetworkInterfaces",
            &[("Filter.1.Name", "private-ip"), ("Filter.1.Value.1", "*")],
        )
        .expect_error(400, "InvalidParameterValue");
    assert!(unknown.text().contains("private-ip"), "{}", unknown.text());
}

#[test]
fn listings_page_with_max_results_and_next_token() {
    let (_e, c) = start();
    for _ in 0..6 {
        create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    }
    let first = c
        .call("DescribeNetworkInterfaces", &[("MaxResults", "5")])
        .expect(200);
    assert_eq!(ids(&first).len(), 5);
    let token = first.one("nextToken");
    let second = c
        .call(
            "DescribeNetworkInterfaces",
            &[("MaxResults", "5"), ("NextToken", &token)],
        )
        .expect(200);
    assert_eq!(ids(&second).len(), 2, "7 ENIs: the primary and 6");
    assert!(second.all("nextToken").is_empty(), "{}", second.text());
    let mut all = ids(&first);
    all.extend(ids(&second));
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 7);

    c.call("DescribeNetworkInterfaces", &[("MaxResults", "4")])
        .expect_error(400, "InvalidParameterValue");
    c.call(
        "DescribeNetworkInterfaces",
        &[("MaxResults", "5"), ("NextToken", "bogus")],
    )
    .expect_error(400, "InvalidNextToken");
    c.call(
        "DescribeNetworkInterfaces",
        &[("MaxResults", "5"), ("NetworkInterfaceId.1", &all[0])],
    )
    .expect_error(400, "InvalidParameterCombination");
}

#[test]
fn unpaged_listings_past_the_threshold_are_refused() {
    let s = Scenario::example()
        .security_group("sg-0a000000000000002", EXAMPLE_VPC, Tags::new())
        .security_group("sg-0a000000000000003", EXAMPLE_VPC, Tags::new())
        .unpaged_limit(2);
    let (e, c) = start_with(s);
    create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    c.call("DescribeNetworkInterfaces", &[]).expect(200);
    create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    c.call("DescribeNetworkInterfaces", &[])
        .expect_error(400, "OperationNotPermitted");
    c.call("DescribeSecurityGroups", &[])
        .expect_error(400, "OperationNotPermitted");
    c.call("GetSecurityGroupsForVpc", &[("VpcId", EXAMPLE_VPC)])
        .expect_error(400, "OperationNotPermitted");
    assert_eq!(
        ids(&c
            .call("DescribeNetworkInterfaces", &[("MaxResults", "1000")])
            .expect(200))
        .len(),
        3
    );
    assert_eq!(
        c.call(
            "GetSecurityGroupsForVpc",
            &[("VpcId", EXAMPLE_VPC), ("MaxResults", "1000")]
        )
        .expect(200)
        .all("groupId")
        .len(),
        3
    );
    e.set_unpaged_limit(None);
    c.call("DescribeNetworkInterfaces", &[]).expect(200);
}

#[test]
fn subnets_route_tables_and_instances_list_what_cilium_reads() {
    let tags = Tags::from([("aws:eks:cluster-name".to_owned(), "weft".to_owned())]);
    let s = Scenario::example().instance(
        "i-0b000000000000001",
        "t2.xlarge",
        EXAMPLE_NODE_SUBNET,
        tags,
    );
    let (e, c) = start_with(s);
    let subnets = c
        .call(
            "DescribeSubnets",
            &[
                ("Filter.1.Name", "vpc-id"),
                ("Filter.1.Value.1", EXAMPLE_VPC),
                ("Filter.2.Name", "tag:weft"),
                ("Filter.2.Value.1", "pods"),
            ],
        )
        .expect(200);
    assert_eq!(subnets.all("subnetId"), [EXAMPLE_POD_SUBNET]);
    assert_eq!(subnets.one("availableIpAddressCount"), "59");
    assert_eq!(subnets.one("availabilityZone"), "us-east-1a");
    assert_eq!(subnets.all("key"), ["weft"]);

    let tables = c
        .call(
            "DescribeRouteTables",
            &[
                ("Filter.1.Name", "vpc-id"),
                ("Filter.1.Value.1", EXAMPLE_VPC),
            ],
        )
        .expect(200);
    assert_eq!(
        tables.all("subnetId"),
        [EXAMPLE_NODE_SUBNET, EXAMPLE_POD_SUBNET]
    );
    assert_eq!(tables.all("state"), ["associated", "associated"]);

    let instances = c
        .call(
            "DescribeInstances",
            &[
                ("Filter.1.Name", "tag:aws:eks:cluster-name"),
                ("Filter.1.Value.1", "weft"),
            ],
        )
        .expect(200);
    assert_eq!(instances.all("instanceId"), ["i-0b000000000000001"]);
    assert_eq!(
        instances.all("networkInterfaceId"),
        [e.instance_enis("i-0b000000000000001")[0].id.clone()]
    );
}

#[test]
fn instance_types_tags_and_security_groups_list_what_cilium_reads() {
    let tags = Tags::from([("aws:eks:cluster-name".to_owned(), "weft".to_owned())]);
    let s = Scenario::example().instance(
        "i-0b000000000000001",
        "t2.xlarge",
        EXAMPLE_NODE_SUBNET,
        tags,
    );
    let (_e, c) = start_with(s);
    let types = c
        .call(
            "DescribeInstanceTypes",
            &[
                ("InstanceType.1", "m5.large"),
                ("InstanceType.2", "m5.metal"),
            ],
        )
        .expect(200);
    assert_eq!(types.all("instanceType"), ["m5.large", "m5.metal"]);
    assert_eq!(
        types.all("maximumNetworkInterfaces"),
        ["3", "3", "15", "15"],
        "networkInfo and its card"
    );
    assert_eq!(types.all("ipv4AddressesPerInterface"), ["10", "50"]);
    assert_eq!(types.all("hypervisor"), ["nitro"], "bare metal has none");
    assert_eq!(types.all("bareMetal"), ["false", "true"]);
    let every = c
        .call("DescribeInstanceTypes", &[])
        .expect(200)
        .all("instanceType");
    for t in ["m5.large", "m4.large", "m5.metal", "t2.xlarge"] {
        assert!(
            every.iter().any(|x| x == t),
            "{t} in the catalogue: {every:?}"
        );
    }

    let tag = c
        .call(
            "DescribeTags",
            &[
                ("Filter.1.Name", "resource-type"),
                ("Filter.1.Value.1", "instance"),
                ("Filter.2.Name", "resource-id"),
                ("Filter.2.Value.1", "i-0b000000000000001"),
                ("Filter.3.Name", "key"),
                ("Filter.3.Value.1", "aws:eks:cluster-name"),
            ],
        )
        .expect(200);
    assert_eq!(tag.all("value"), ["weft"]);

    let groups = c
        .call(
            "DescribeSecurityGroups",
            &[
                ("Filter.1.Name", "vpc-id"),
                ("Filter.1.Value.1", EXAMPLE_VPC),
            ],
        )
        .expect(200);
    assert_eq!(groups.all("groupId"), [EXAMPLE_SG]);
    assert!(
        groups.text().contains("<securityGroupInfo><item>"),
        "{}",
        groups.text()
    );
    let for_vpc = c
        .call("GetSecurityGroupsForVpc", &[("VpcId", EXAMPLE_VPC)])
        .expect(200);
    assert_eq!(for_vpc.all("groupId"), [EXAMPLE_SG]);
    assert_eq!(for_vpc.all("primaryVpcId"), [EXAMPLE_VPC]);
    assert!(
        for_vpc.text().contains("<securityGroupForVpcSet><item>"),
        "{}",
        for_vpc.text()
    );
}

#[test]
fn instance_types_page_even_without_max_results_as_aws_does() {
    let mut s = Scenario::example();
    s.instance_types_page_size = 2;
    let (_e, c) = start_with(s);
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..10 {
        let params: Vec<(&str, &str)> = token.iter().map(|t| ("NextToken", t.as_str())).collect();
        let page = c.call("DescribeInstanceTypes", &params).expect(200);
        let names = page.all("instanceType");
        assert!(names.len() <= 2, "{names:?}");
        seen.extend(names);
        token = page.all("nextToken").into_iter().next();
        if token.is_none() {
            break;
        }
    }
    assert!(token.is_none(), "paging ended");
    assert_eq!(seen.len(), 6, "the whole catalogue: {seen:?}");
}
