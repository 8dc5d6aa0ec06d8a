//! The Query wire as EC2 speaks it: answers in the 2016-11-15 namespace with `<requestId>` and
//! `<xxxSet><item>` lists (empty ones self-closing), AWS error bodies with the right status,
//! the signing scope checked (missing header, another region, another service, an unknown
//! key), `Version` required, unknown actions refused.

use weft_tests::ec2::{EXAMPLE_NODE_SUBNET, EXAMPLE_VPC, Scenario, authorization};

use super::{Client, start, start_with};

#[test]
fn answers_carry_the_namespace_request_id_and_item_lists() {
    let (_e, c) = start();
    let r = c
        .call("DescribeVpcs", &[("VpcId.1", EXAMPLE_VPC)])
        .expect(200);
    let text = r.text();
    assert!(
        text.contains("<DescribeVpcsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"),
        "{text}"
    );
    assert_eq!(r.one("requestId").len(), 36, "{text}");
    assert_eq!(r.all("vpcId"), [EXAMPLE_VPC]);
    assert!(text.contains("<vpcSet><item>"), "{text}");
    assert_eq!(
        r.all("cidrBlock"),
        ["10.0.0.0/16", "10.0.0.0/16", "10.1.0.0/16"],
        "the primary CIDR, then every association"
    );
    let content_type = r.headers.get("content-type").and_then(|v| v.to_str().ok());
    assert_eq!(content_type, Some("text/xml;charset=UTF-8"));

    let empty = c
        .call(
            "DescribeNetworkInterfaces",
            &[("Filter.1.Name", "tag:nothing"), ("Filter.1.Value.1", "x")],
        )
        .expect(200);
    assert!(
        empty.text().contains("<networkInterfaceSet/>"),
        "{}",
        empty.text()
    );
}

#[test]
fn errors_are_aws_error_bodies_with_their_status() {
    let (_e, c) = start();
    let r = c
        .call(
            "DeleteNetworkInterface",
            &[("NetworkInterfaceId", "eni-0000000000000dead")],
        )
        .expect_error(400, "InvalidNetworkInterfaceID.NotFound");
    let text = r.text();
    assert!(
        text.contains(
            "<Response><Errors><Error><Code>InvalidNetworkInterfaceID.NotFound</Code><Message>"
        ),
        "{text}"
    );
    assert!(text.contains("</Error></Errors><RequestID>"), "{text}");
    assert_eq!(r.one("RequestID").len(), 36);
    c.call("DescribeSubnets", &[("SubnetId.1", "subnet-nope")])
        .expect_error(400, "InvalidSubnetID.NotFound");
    c.call("CreateNetworkInterface", &[])
        .expect_error(400, "MissingParameter");
}

#[test]
fn the_signing_scope_is_checked_but_not_the_signature() {
    let (_e, c) = start_with(Scenario::example().access_keys(&["AKIDWEFTTEST"]));
    let params = [("Action", "DescribeVpcs"), ("Version", "2016-11-15")];
    c.form(&params, &[])
        .expect_error(401, "MissingAuthenticationToken");
    c.form(&params, &[("authorization", "Bearer x".to_owned())])
        .expect_error(400, "IncompleteSignature");
    let other_region = c
        .form(
            &params,
            &[("authorization", authorization("AKIDWEFTTEST", "eu-west-1"))],
        )
        .expect_error(401, "AuthFailure");
    assert!(
        other_region.text().contains("'eu-west-1'"),
        "{}",
        other_region.text()
    );
    let other_service = authorization("AKIDWEFTTEST", "us-east-1").replace("/ec2/", "/sts/");
    c.form(&params, &[("authorization", other_service)])
        .expect_error(401, "AuthFailure");
    c.form(
        &params,
        &[(
            "authorization",
            authorization("AKIDSOMEONEELSE", "us-east-1"),
        )],
    )
    .expect_error(401, "AuthFailure");
    c.form(
        &params,
        &[("authorization", authorization("AKIDWEFTTEST", "us-east-1"))],
    )
    .expect(200);
}

#[test]
fn version_is_required_and_unknown_actions_are_refused() {
    let (_e, c) = start();
    let auth = [("authorization", authorization("AKIDWEFTTEST", "us-east-1"))];
    c.form(&[("Action", "DescribeVpcs")], &auth)
        .expect_error(400, "MissingParameter");
    c.form(
        &[("Action", "DescribeVpcs"), ("Version", "2014-01-01")],
        &auth,
    )
    .expect_error(400, "InvalidParameterValue");
    c.call("RunInstances", &[])
        .expect_error(400, "InvalidAction");
}

#[test]
fn the_query_string_works_like_the_form_body() {
    let (e, _) = start();
    let c = Client::new(&e);
    let auth = [("authorization", authorization("AKIDWEFTTEST", "us-east-1"))];
    let r = c
        .send(
            "GET",
            &format!(
                "/?Action=DescribeSubnets&Version=2016-11-15&SubnetId.1={EXAMPLE_NODE_SUBNET}"
            ),
            &auth,
            bytes::Bytes::new(),
        )
        .expect(200);
    assert_eq!(r.all("subnetId"), [EXAMPLE_NODE_SUBNET]);
}
