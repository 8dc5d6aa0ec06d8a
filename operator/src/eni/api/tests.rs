//! Wire-level tests of the EC2 client against a local server that answers a scripted
//! sequence and fails on any other call: the request (form body, signing headers), paging,
//! the `OperationNotPermitted` switch, retries, errors and metrics here; each action's keys
//! and the security-group fallback in `ops`. Waits run on tokio's paused clock, so the gaps
//! between recorded requests are the waits the client chose.

use std::{sync::Arc, time::Duration};

use prometheus_client::{encoding::text::encode, registry::Registry};

use super::{
    testserver::{Reply, Seen, TestServer},
    *,
};
use crate::eni::creds::{Credentials, StaticCredentials};

mod ops;

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
