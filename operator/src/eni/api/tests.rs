//! Wire-level tests of the EC2 client against a local server that answers a scripted
//! sequence and fails on any other call: the request (form body, signing headers), paging,
//! the `OperationNotPermitted` switch, retries, the security-group fallback, errors and
//! metrics. Waits run on tokio's paused clock, so the gaps between recorded requests are the
//! waits the client chose.

use std::{sync::Arc, time::Duration};

use prometheus_client::{encoding::text::encode, registry::Registry};

use super::{
    testserver::{Reply, Seen, TestServer},
    *,
};
use crate::eni::creds::{Credentials, StaticCredentials};

const NS: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";

fn ok(action: &str, inner: &str) -> Reply {
    Reply::ok(&format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{action}Response xmlns=\"{NS}\">\
         <requestId>r</requestId>{inner}</{action}Response>"
    ))
}

fn eni(id: &str) -> String {
    format!(
        "<item><networkInterfaceId>{id}</networkInterfaceId><privateIpAddress>10.0.0.1</privateIpAddress>\
         <attachment><instanceId>i-1</instanceId><deviceIndex>0</deviceIndex></attachment></item>"
    )
}

fn enis_page(ids: &[&str], next: Option<&str>) -> Reply {
    let items: String = ids.iter().map(|id| eni(id)).collect();
    let next = next
        .map(|n| format!("<nextToken>{n}</nextToken>"))
        .unwrap_or_default();
    ok(
        "DescribeNetworkInterfaces",
        &format!("<networkInterfaceSet>{items}</networkInterfaceSet>{next}"),
    )
}

fn client_with(
    server: &TestServer,
    settings: impl FnOnce(&mut Ec2Settings),
) -> (Ec2Client, Ec2Metrics) {
    let mut s = Ec2Settings::new("us-east-1", Some(&server.url));
    s.timeout = None;
    s.qps = 0.0;
    settings(&mut s);
    let metrics = Ec2Metrics::default();
    let creds = StaticCredentials::new(Credentials::new(
        "AKIDEXAMPLE",
        "secret",
        Some("session-token".into()),
        None,
    ));
    let client = Ec2Client::new(s, Arc::new(creds), metrics.clone()).unwrap();
    (client, metrics)
}

fn client(server: &TestServer) -> (Ec2Client, Ec2Metrics) {
    client_with(server, |_| {})
}

fn metrics_text(metrics: &Ec2Metrics) -> String {
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    text
}

fn gaps(seen: &[Seen]) -> Vec<Duration> {
    seen.windows(2).map(|w| w[1].at - w[0].at).collect()
}

#[test]
fn endpoints() {
    let cases = [
        ("us-east-1", None, "https://ec2.us-east-1.amazonaws.com"),
        (
            "cn-north-1",
            None,
            "https://ec2.cn-north-1.amazonaws.com.cn",
        ),
        ("us-east-1", Some(""), "https://ec2.us-east-1.amazonaws.com"),
        (
            "us-east-1",
            Some("ec2.example.com"),
            "https://ec2.example.com",
        ),
        (
            "us-east-1",
            Some("http://127.0.0.1:5055/"),
            "http://127.0.0.1:5055",
        ),
        (
            "eu-west-1",
            Some("https://vpce-1.ec2.eu-west-1.vpce.amazonaws.com"),
            "https://vpce-1.ec2.eu-west-1.vpce.amazonaws.com",
        ),
    ];
    for (region, configured, want) in cases {
        assert_eq!(
            endpoint_url(region, configured),
            want,
            "{region} {configured:?}"
        );
    }
    assert_eq!(
        request::host_header("http://127.0.0.1:5055/").as_deref(),
        Some("127.0.0.1:5055")
    );
    assert_eq!(
        request::host_header("https://ec2.example.com:443/").as_deref(),
        Some("ec2.example.com")
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_is_a_signed_form_post() {
    let server = TestServer::start().await;
    server.expect_action(
        "DescribeVpcs",
        ok(
            "DescribeVpcs",
            "<vpcSet><item><vpcId>vpc-1</vpcId><cidrBlock>10.0.0.0/16</cidrBlock></item></vpcSet>",
        ),
    );
    let (client, metrics) = client(&server);
    let vpcs = client.describe_vpcs(Some("vpc-1")).await.unwrap();
    assert_eq!(vpcs[0].id, "vpc-1");
    let seen = server.finish();
    let req = &seen[0];
    assert_eq!(req.method, http::Method::POST);
    assert_eq!(req.uri, "/");
    assert_eq!(
        req.text(),
        "Action=DescribeVpcs&Version=2016-11-15&VpcId.1=vpc-1"
    );
    assert_eq!(
        req.header("content-type"),
        Some("application/x-www-form-urlencoded; charset=utf-8")
    );
    let host = server.url.trim_start_matches("http://");
    assert_eq!(req.header("host"), Some(host));
    assert_eq!(req.header("x-amz-security-token"), Some("session-token"));
    assert!(
        req.header("x-amz-date")
            .is_some_and(|d| d.len() == 16 && d.ends_with('Z'))
    );
    let auth = req.header("authorization").unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
            && auth.contains("/us-east-1/ec2/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature="),
        "{auth}"
    );
    assert!(
        req.header("user-agent")
            .unwrap()
            .starts_with("weft-operator/")
    );
    let text = metrics_text(&metrics);
    assert!(
        text.contains(
            r#"ec2_api_duration_seconds_count{operation="DescribeVpcs",response_code="OK"} 1"#
        ),
        "{text}"
    );
    assert!(
        !text.contains(r#"ec2_api_rate_limit_duration_seconds_count{operation="DescribeVpcs"}"#),
        "no wait, nothing observed: {text}"
    );
}

#[tokio::test(start_paused = true)]
async fn listing_follows_next_token_one_token_per_page() {
    let server = TestServer::start().await;
    server.expect_action(
        "DescribeNetworkInterfaces",
        enis_page(&["eni-1", "eni-2"], Some("t2")),
    );
    server.expect_action(
        "DescribeNetworkInterfaces",
        enis_page(&["eni-3"], Some("t3")),
    );
    server.expect_action("DescribeNetworkInterfaces", enis_page(&[], None));
    let (client, metrics) = client_with(&server, |s| {
        s.qps = 1.0;
        s.burst = 1;
    });
    let filters = [Filter::new("private-ip-address", ["*"])];
    let enis = client
        .describe_network_interfaces(&[], &filters)
        .await
        .unwrap();
    let ids: Vec<_> = enis.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["eni-1", "eni-2", "eni-3"]);
    let seen = server.finish();
    let tokens: Vec<_> = seen.iter().map(|s| s.param("NextToken")).collect();
    assert_eq!(tokens, [None, Some("t2".into()), Some("t3".into())]);
    assert!(seen.iter().all(|s| s.param("MaxResults").is_none()));
    assert_eq!(
        seen[0].param("Filter.1.Name").as_deref(),
        Some("private-ip-address")
    );
    assert_eq!(seen[2].param("Filter.1.Value.1").as_deref(), Some("*"));
    // One token per page: burst 1 at 1 qps.
    assert_eq!(
        gaps(&seen),
        [Duration::from_secs(1), Duration::from_secs(1)]
    );
    let text = metrics_text(&metrics);
    assert!(text.contains(
        r#"ec2_api_duration_seconds_count{operation="DescribeNetworkInterfaces",response_code="OK"} 3"#
    ));
    assert!(
        text.contains(
            r#"ec2_api_rate_limit_duration_seconds_sum{operation="DescribeNetworkInterfaces"} 2.0"#
        ),
        "{text}"
    );
    assert!(text.contains(
        r#"ec2_api_rate_limit_duration_seconds_count{operation="DescribeNetworkInterfaces"} 2"#
    ));
}

#[tokio::test(start_paused = true)]
async fn a_repeated_next_token_ends_the_listing() {
    let server = TestServer::start().await;
    server.expect_action(
        "DescribeSubnets",
        ok("DescribeSubnets", "<subnetSet/><nextToken>same</nextToken>"),
    );
    server.expect_action(
        "DescribeSubnets",
        ok("DescribeSubnets", "<subnetSet/><nextToken>same</nextToken>"),
    );
    let (client, _) = client(&server);
    assert!(client.describe_subnets(&[]).await.unwrap().is_empty());
    server.finish();
}

#[tokio::test(start_paused = true)]
async fn operation_not_permitted_switches_to_paging_for_good() {
    let server = TestServer::start().await;
    server.expect_action(
        "DescribeNetworkInterfaces",
        enis_page(&["eni-1"], Some("t2")),
    );
    server.expect_action(
        "DescribeNetworkInterfaces",
        Reply::aws_error(
            400,
            "OperationNotPermitted",
            "The request is too large; use pagination.",
        ),
    );
    // The listing restarts from the first page, with MaxResults.
    server.expect_action(
        "DescribeNetworkInterfaces",
        enis_page(&["eni-1"], Some("t2")),
    );
    server.expect_action("DescribeNetworkInterfaces", enis_page(&["eni-2"], None));
    // Later listings page from the start.
    server.expect_action(
        "DescribeSecurityGroups",
        ok(
            "DescribeSecurityGroups",
            "<securityGroupInfo><item><groupId>sg-1</groupId></item></securityGroupInfo>",
        ),
    );
    // A lookup by IDs never sends MaxResults.
    server.expect_action("DescribeNetworkInterfaces", enis_page(&["eni-9"], None));
    let (client, _) = client(&server);
    let enis = client.describe_network_interfaces(&[], &[]).await.unwrap();
    assert_eq!(enis.len(), 2, "no duplicates from the abandoned first pass");
    client.security_groups(None).await.unwrap();
    client
        .describe_network_interfaces(&["eni-9".to_owned()], &[])
        .await
        .unwrap();
    let seen = server.finish();
    let max: Vec<_> = seen.iter().map(|s| s.param("MaxResults")).collect();
    let k = Some("1000".to_owned());
    assert_eq!(max, [None, None, k.clone(), k.clone(), k, None]);
    assert_eq!(seen[2].param("NextToken"), None);
    assert_eq!(seen[3].param("NextToken").as_deref(), Some("t2"));
    assert_eq!(
        seen[5].param("NetworkInterfaceId.1").as_deref(),
        Some("eni-9")
    );
}

#[tokio::test(start_paused = true)]
async fn configured_max_results_is_sent_and_not_switched() {
    let server = TestServer::start().await;
    server.expect_action(
        "GetSecurityGroupsForVpc",
        Reply::aws_error(400, "OperationNotPermitted", "nope"),
    );
    let (client, _) = client_with(&server, |s| s.max_results_per_call = 5);
    let err = client.security_groups(Some("vpc-1")).await.unwrap_err();
    assert!(err.is_operation_not_permitted(), "{err}");
    let seen = server.finish();
    assert_eq!(seen[0].param("MaxResults").as_deref(), Some("5"));
    assert_eq!(seen[0].param("VpcId").as_deref(), Some("vpc-1"));
}

#[tokio::test(start_paused = true)]
async fn throttling_and_5xx_are_retried_then_succeed() {
    let server = TestServer::start().await;
    server.expect_action(
        "AssignPrivateIpAddresses",
        Reply::aws_error(503, "RequestLimitExceeded", "Request limit exceeded."),
    );
    server.expect_action(
        "AssignPrivateIpAddresses",
        Reply::new(502, "<html>bad gateway</html>"),
    );
    server.expect_action(
        "AssignPrivateIpAddresses",
        ok(
            "AssignPrivateIpAddresses",
            "<networkInterfaceId>eni-1</networkInterfaceId><assignedPrivateIpAddressesSet>\
             <item><privateIpAddress>10.0.0.5</privateIpAddress></item></assignedPrivateIpAddressesSet>",
        ),
    );
    let (client, metrics) = client_with(&server, |s| {
        s.qps = 1.0;
        s.burst = 1;
    });
    let got = client
        .assign_private_ip_addresses("eni-1", AddressRequest::Secondary(3))
        .await
        .unwrap();
    assert_eq!(got, ["10.0.0.5"]);
    let seen = server.finish();
    for s in &seen {
        assert_eq!(s.param("NetworkInterfaceId").as_deref(), Some("eni-1"));
        assert_eq!(
            s.param("SecondaryPrivateIpAddressCount").as_deref(),
            Some("3")
        );
    }
    // Backoffs: at most 2 s then 4 s (full jitter), never the rate limiter's 1 s per retry.
    let g = gaps(&seen);
    assert!(
        g[0] <= Duration::from_secs(2) && g[1] <= Duration::from_secs(4),
        "{g:?}"
    );
    assert_eq!(metrics.retries("AssignPrivateIpAddresses"), 2);
    let text = metrics_text(&metrics);
    assert!(text.contains(
        r#"ec2_api_duration_seconds_count{operation="AssignPrivateIpAddresses",response_code="OK"} 1"#
    ));
    assert!(
        !text.contains(
            r#"ec2_api_rate_limit_duration_seconds_count{operation="AssignPrivateIpAddresses"}"#
        ),
        "retries take no token: {text}"
    );
}

#[tokio::test(start_paused = true)]
async fn retries_stop_after_three_attempts() {
    let server = TestServer::start().await;
    for _ in 0..3 {
        server.expect_action(
            "DescribeVpcs",
            Reply::aws_error(503, "Throttling", "Rate exceeded"),
        );
    }
    let (client, metrics) = client(&server);
    let err = client.describe_vpcs(None).await.unwrap_err();
    assert!(err.is_throttle());
    assert_eq!(err.code(), Some("Throttling"));
    assert_eq!(
        err.to_string(),
        "DescribeVpcs: HTTP 503: Throttling: Rate exceeded (request req-Throttling)"
    );
    assert_eq!(server.finish().len(), 3);
    assert!(metrics_text(&metrics).contains(
        r#"ec2_api_duration_seconds_count{operation="DescribeVpcs",response_code="503 Service Unavailable"} 1"#
    ));
}

#[tokio::test(start_paused = true)]
async fn client_errors_are_not_retried_and_kept_whole() {
    let server = TestServer::start().await;
    let msg = "Instance 'i-1' already has an interface attached at device index '1'.";
    server.expect_action(
        "AttachNetworkInterface",
        Reply::aws_error(400, "InvalidParameterValue", msg),
    );
    let (client, metrics) = client(&server);
    let err = client
        .attach_network_interface("eni-1", "i-1", 1)
        .await
        .unwrap_err();
    assert!(err.is_index_conflict());
    assert!(
        matches!(&err, Ec2Error::Api { status: 400, message, request_id, .. }
        if message == msg && request_id == "req-InvalidParameterValue")
    );
    let seen = server.finish();
    assert_eq!(
        seen[0].text(),
        "Action=AttachNetworkInterface&Version=2016-11-15&DeviceIndex=1&InstanceId=i-1\
         &NetworkInterfaceId=eni-1&NetworkCardIndex=0"
    );
    assert!(metrics_text(&metrics).contains(
        r#"ec2_api_duration_seconds_count{operation="AttachNetworkInterface",response_code="400 Bad Request"} 1"#
    ));
}

#[tokio::test(start_paused = true)]
async fn a_truncated_answer_is_an_error_not_a_retry() {
    let server = TestServer::start().await;
    server.expect_action(
        "DescribeInstanceTypes",
        Reply::ok("<DescribeInstanceTypesResponse><instanceTypeSet><item><instanceType>m5.lar"),
    );
    let (client, metrics) = client(&server);
    let err = client.describe_instance_types().await.unwrap_err();
    assert!(
        matches!(
            err,
            Ec2Error::Xml {
                action: "DescribeInstanceTypes",
                ..
            }
        ),
        "{err}"
    );
    server.finish();
    assert!(metrics_text(&metrics).contains(
        r#"ec2_api_duration_seconds_count{operation="DescribeInstanceTypes",response_code="Failed"} 1"#
    ));
}

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

#[tokio::test(start_paused = true)]
async fn an_unreachable_endpoint_is_a_transport_error() {
    let (client, _) = {
        let mut s = Ec2Settings::new("us-east-1", Some("http://127.0.0.1:1"));
        s.timeout = None;
        s.qps = 0.0;
        let creds = StaticCredentials::new(Credentials::new("a", "b", None, None));
        let metrics = Ec2Metrics::default();
        (
            Ec2Client::new(s, Arc::new(creds), metrics.clone()).unwrap(),
            metrics,
        )
    };
    let err = client.describe_vpcs(None).await.unwrap_err();
    assert!(
        matches!(
            err,
            Ec2Error::Transport {
                action: "DescribeVpcs",
                ..
            }
        ),
        "{err}"
    );
}
