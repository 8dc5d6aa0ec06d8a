//! The actions' request keys (every write and read, as bodies) and the security-group
//! fallback (GetSecurityGroupsForVpc refused or not implemented → DescribeSecurityGroups for
//! good; any other error fails).

use super::*;

#[tokio::test(start_paused = true)]
async fn security_groups_fall_back_on_unauthorized_for_good() {
    let server = TestServer::start().await;
    server.expect_action(
        "GetSecurityGroupsForVpc",
        Reply::aws_error(
            403,
            "UnauthorizedOperation",
            "You are not authorized to perform this operation.",
        ),
    );
    let sgs = ok(
        "DescribeSecurityGroups",
        "<securityGroupInfo><item><groupId>sg-1</groupId><vpcId>vpc-1</vpcId></item></securityGroupInfo>",
    );
    server.expect_action("DescribeSecurityGroups", sgs.clone());
    server.expect_action("DescribeSecurityGroups", sgs);
    let (client, _) = client(&server);
    for _ in 0..2 {
        let groups = client.security_groups(Some("vpc-1")).await.unwrap();
        assert_eq!(groups[0].id, "sg-1");
    }
    let seen = server.finish();
    assert_eq!(seen[1].param("Filter.1.Name").as_deref(), Some("vpc-id"));
    assert_eq!(seen[1].param("Filter.1.Value.1").as_deref(), Some("vpc-1"));
}

#[tokio::test(start_paused = true)]
async fn security_groups_fall_back_when_not_implemented() {
    let server = TestServer::start().await;
    // moto: HTTP 500 with an HTML page (retried like any 500 first).
    for _ in 0..3 {
        server.expect_action(
            "GetSecurityGroupsForVpc",
            Reply::new(
                500,
                "<!doctype html><title>500 Internal Server Error</title>",
            ),
        );
    }
    server.expect_action(
        "DescribeSecurityGroups",
        ok("DescribeSecurityGroups", "<securityGroupInfo/>"),
    );
    let (client, _) = client(&server);
    assert!(
        client
            .security_groups(Some("vpc-1"))
            .await
            .unwrap()
            .is_empty()
    );
    server.finish();
}

#[tokio::test(start_paused = true)]
async fn other_security_group_errors_fail() {
    let server = TestServer::start().await;
    server.expect_action(
        "GetSecurityGroupsForVpc",
        Reply::aws_error(
            400,
            "InvalidVpcID.NotFound",
            "The vpc ID 'vpc-9' does not exist",
        ),
    );
    let (client, _) = client(&server);
    let err = client.security_groups(Some("vpc-9")).await.unwrap_err();
    assert_eq!(err.code(), Some("InvalidVpcID.NotFound"));
    server.finish();
}

#[tokio::test(start_paused = true)]
#[expect(
    clippy::too_many_lines,
    reason = "one scripted sequence and the bodies it must have received"
)]
async fn writes_send_their_keys() {
    let server = TestServer::start().await;
    let created = format!(
        "<networkInterface>{}</networkInterface>",
        eni("eni-new")
            .trim_start_matches("<item>")
            .trim_end_matches("</item>")
    );
    server.expect_action(
        "CreateNetworkInterface",
        ok("CreateNetworkInterface", &created),
    );
    server.expect_action(
        "AttachNetworkInterface",
        ok(
            "AttachNetworkInterface",
            "<attachmentId>eni-attach-1</attachmentId>",
        ),
    );
    for action in [
        "ModifyNetworkInterfaceAttribute",
        "UnassignPrivateIpAddresses",
        "UnassignPrivateIpAddresses",
        "AssignIpv6Addresses",
        "DeleteNetworkInterface",
    ] {
        server.expect_action(action, ok(action, "<return>true</return>"));
    }
    server.expect_action(
        "AssignPrivateIpAddresses",
        ok("AssignPrivateIpAddresses", "<assignedIpv4PrefixSet/>"),
    );
    server.expect_action(
        "AssociateAddress",
        ok(
            "AssociateAddress",
            "<return>true</return><associationId>eipassoc-1</associationId>",
        ),
    );
    let (client, _) = client(&server);
    let request = CreateInterface {
        subnet_id: "subnet-a".into(),
        description: "Cilium-CNI (i-1)".into(),
        security_groups: vec!["sg-1".into(), "sg-2".into()],
        addresses: Some(AddressRequest::Prefixes(2)),
        ipv6_prefix: true,
        tags: Tags::from([("io.cilium/cilium-managed".into(), "true".into())]),
        client_token: Some("weft-i-1-1".into()),
    };
    assert_eq!(
        client.create_network_interface(&request).await.unwrap().id,
        "eni-new"
    );
    assert_eq!(
        client
            .attach_network_interface("eni-new", "i-1", 1)
            .await
            .unwrap(),
        "eni-attach-1"
    );
    client
        .set_delete_on_termination("eni-new", "eni-attach-1")
        .await
        .unwrap();
    client
        .unassign_private_ip_addresses(
            "eni-new",
            &AddressRelease::Ips(vec!["10.0.0.5".into(), "10.0.0.6".into()]),
        )
        .await
        .unwrap();
    client
        .unassign_private_ip_addresses(
            "eni-new",
            &AddressRelease::Prefixes(vec!["10.0.0.16/28".into()]),
        )
        .await
        .unwrap();
    client.assign_ipv6_prefix("eni-new").await.unwrap();
    client.delete_network_interface("eni-new").await.unwrap();
    assert!(
        client
            .assign_private_ip_addresses("eni-new", AddressRequest::Prefixes(1))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        client
            .associate_address("eipalloc-1", "eni-new")
            .await
            .unwrap(),
        "eipassoc-1"
    );
    let bodies: Vec<_> = server.finish().iter().map(Seen::text).collect();
    assert_eq!(
        bodies,
        [
            "Action=CreateNetworkInterface&Version=2016-11-15&SubnetId=subnet-a\
             &Description=Cilium-CNI%20%28i-1%29&SecurityGroupId.1=sg-1&SecurityGroupId.2=sg-2\
             &Ipv4PrefixCount=2&Ipv6PrefixCount=1&TagSpecification.1.ResourceType=network-interface\
             &TagSpecification.1.Tag.1.Key=io.cilium%2Fcilium-managed&TagSpecification.1.Tag.1.Value=true\
             &ClientToken=weft-i-1-1",
            "Action=AttachNetworkInterface&Version=2016-11-15&DeviceIndex=1&InstanceId=i-1\
             &NetworkInterfaceId=eni-new&NetworkCardIndex=0",
            "Action=ModifyNetworkInterfaceAttribute&Version=2016-11-15&NetworkInterfaceId=eni-new\
             &Attachment.AttachmentId=eni-attach-1&Attachment.DeleteOnTermination=true",
            "Action=UnassignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-new\
             &PrivateIpAddress.1=10.0.0.5&PrivateIpAddress.2=10.0.0.6",
            "Action=UnassignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-new\
             &Ipv4Prefix.1=10.0.0.16%2F28",
            "Action=AssignIpv6Addresses&Version=2016-11-15&NetworkInterfaceId=eni-new&Ipv6PrefixCount=1",
            "Action=DeleteNetworkInterface&Version=2016-11-15&NetworkInterfaceId=eni-new",
            "Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=eni-new&Ipv4PrefixCount=1",
            "Action=AssociateAddress&Version=2016-11-15&AllocationId=eipalloc-1\
             &NetworkInterfaceId=eni-new&AllowReassociation=false",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn reads_send_their_keys() {
    let server = TestServer::start().await;
    server.expect_action(
        "DescribeRouteTables",
        ok("DescribeRouteTables", "<routeTableSet/>"),
    );
    server.expect_action(
        "DescribeInstances",
        ok("DescribeInstances", "<reservationSet/>"),
    );
    server.expect_action("DescribeTags", ok("DescribeTags", "<tagSet/>"));
    server.expect_action(
        "DescribeAddresses",
        ok("DescribeAddresses", "<addressesSet/>"),
    );
    server.expect_action("DescribeVpcs", ok("DescribeVpcs", "<vpcSet/>"));
    let (client, _) = client(&server);
    let vpc = [Filter::new("vpc-id", ["vpc-1"])];
    client.describe_route_tables(&vpc).await.unwrap();
    let tags = Tags::from([("team".to_owned(), "net".to_owned())]);
    client
        .describe_instances(&Filter::tags(&tags))
        .await
        .unwrap();
    client
        .describe_tags(&[
            Filter::new("resource-type", ["instance"]),
            Filter::new("resource-id", ["i-1"]),
            Filter::new("key", ["aws:eks:cluster-name"]),
        ])
        .await
        .unwrap();
    client
        .describe_addresses(&Filter::tags(&tags))
        .await
        .unwrap();
    client.describe_vpcs(None).await.unwrap();
    let bodies: Vec<_> = server.finish().iter().map(Seen::text).collect();
    assert_eq!(
        bodies,
        [
            "Action=DescribeRouteTables&Version=2016-11-15&Filter.1.Name=vpc-id&Filter.1.Value.1=vpc-1",
            "Action=DescribeInstances&Version=2016-11-15&Filter.1.Name=tag%3Ateam&Filter.1.Value.1=net",
            "Action=DescribeTags&Version=2016-11-15&Filter.1.Name=resource-type&Filter.1.Value.1=instance\
             &Filter.2.Name=resource-id&Filter.2.Value.1=i-1&Filter.3.Name=key&Filter.3.Value.1=aws%3Aeks%3Acluster-name",
            "Action=DescribeAddresses&Version=2016-11-15&Filter.1.Name=tag%3Ateam&Filter.1.Value.1=net",
            "Action=DescribeVpcs&Version=2016-11-15",
        ]
    );
}
