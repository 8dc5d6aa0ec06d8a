//! Injected faults, the request-rate limit, the request log and IAM policy enforcement: a
//! throttle for N requests of one action (503 `RequestLimitExceeded`), a 500 for any, a chosen
//! EC2 error, a non-XML 5xx, the token bucket refusing above its rate and admitting again after
//! refill, every request logged with its parameters and answer, and a policy that does not allow
//! an action answering `UnauthorizedOperation` (403).

use std::time::{Duration, Instant};

use serde_json::json;
use weft_tests::ec2::{
    EXAMPLE_INSTANCE, EXAMPLE_POD_SUBNET, EXAMPLE_VPC, Fault, FaultAnswer, Scenario,
};

use super::{attach, create_eni, start, start_with};

#[test]
fn injected_faults_answer_their_action_for_their_count() {
    let (e, c) = start();
    e.inject(Fault::throttle(Some("DescribeSubnets")).times(2));
    c.call("DescribeVpcs", &[]).expect(200);
    c.call("DescribeSubnets", &[])
        .expect_error(503, "RequestLimitExceeded");
    c.call("DescribeSubnets", &[])
        .expect_error(503, "RequestLimitExceeded");
    c.call("DescribeSubnets", &[]).expect(200);

    e.inject(Fault::internal(None).times(1));
    c.call("DescribeVpcs", &[])
        .expect_error(500, "InternalError");
    c.call("DescribeVpcs", &[]).expect(200);

    let eni = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    e.inject(
        Fault::error(
            "AttachNetworkInterface",
            400,
            "InvalidParameterValue",
            "Instance 'i-0a000000000000001' already has an interface attached at device index '1'.",
        )
        .times(1),
    );
    attach(&c, &eni, EXAMPLE_INSTANCE, 1).expect_error(400, "InvalidParameterValue");
    attach(&c, &eni, EXAMPLE_INSTANCE, 1).expect(200);

    e.inject(Fault::new(
        Some("GetSecurityGroupsForVpc"),
        FaultAnswer::NotXml(500),
    ));
    let html = c
        .call("GetSecurityGroupsForVpc", &[("VpcId", EXAMPLE_VPC)])
        .expect(500);
    assert!(
        html.text().starts_with("<!doctype html>"),
        "{}",
        html.text()
    );
    e.clear_faults();
    c.call("GetSecurityGroupsForVpc", &[("VpcId", EXAMPLE_VPC)])
        .expect(200);

    e.inject(Fault::latency(Some("DescribeVpcs"), Duration::from_millis(300)).times(1));
    let at = Instant::now();
    c.call("DescribeVpcs", &[]).expect(200);
    assert!(at.elapsed() >= Duration::from_millis(300));
}

#[test]
fn the_rate_limit_throttles_above_its_rate_and_admits_after_refill() {
    let (e, c) = start_with(Scenario::example().rate_limit(2.0, 3));
    for _ in 0..3 {
        c.call("DescribeVpcs", &[]).expect(200);
    }
    c.call("DescribeVpcs", &[])
        .expect_error(503, "RequestLimitExceeded");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c.call("DescribeVpcs", &[]);
        if r.status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never admitted again: {}",
            r.text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    e.set_rate_limit(None);
    for _ in 0..10 {
        c.call("DescribeVpcs", &[]).expect(200);
    }
    assert!(e.log().count_status("DescribeVpcs", 503) >= 1);
}

#[test]
fn the_request_log_records_action_parameters_key_and_answer() {
    let (e, c) = start();
    create_eni(
        &c,
        EXAMPLE_POD_SUBNET,
        &[("SecondaryPrivateIpAddressCount", "2")],
    );
    c.call(
        "DeleteNetworkInterface",
        &[("NetworkInterfaceId", "eni-00000000000000bad")],
    )
    .expect(400);
    let log = e.requests();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].action, "CreateNetworkInterface");
    assert_eq!(log[0].param("SubnetId"), Some(EXAMPLE_POD_SUBNET));
    assert_eq!(log[0].param("SecondaryPrivateIpAddressCount"), Some("2"));
    assert_eq!(
        log[0].param("Version"),
        None,
        "Action and Version are not repeated"
    );
    assert_eq!((log[0].status, log[0].code.as_deref()), (200, None));
    assert_eq!(log[0].access_key.as_deref(), Some("AKIDWEFTTEST"));
    assert_eq!(
        (log[1].status, log[1].code.as_deref()),
        (400, Some("InvalidNetworkInterfaceID.NotFound"))
    );
    assert!(log[0].at <= log[1].at);
    assert_eq!(e.count("CreateNetworkInterface"), 1);
    assert_eq!(e.log().of("DeleteNetworkInterface").len(), 1);
    e.log().clear();
    assert!(e.requests().is_empty());
}

#[test]
fn a_policy_that_does_not_allow_an_action_answers_unauthorized_operation() {
    let policy = json!({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["ec2:Describe*", "ec2:CreateNetworkInterface"], "Resource": "*"},
        {"Effect": "Deny", "Action": "ec2:DescribeTags", "Resource": "*"}]});
    let (e, c) = start_with(Scenario::example().policy(policy));
    c.call("DescribeSubnets", &[]).expect(200);
    let eni = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    let denied = attach(&c, &eni, EXAMPLE_INSTANCE, 1).expect_error(403, "UnauthorizedOperation");
    assert!(
        denied.text().contains("ec2:AttachNetworkInterface"),
        "{}",
        denied.text()
    );
    c.call("DescribeTags", &[])
        .expect_error(403, "UnauthorizedOperation");
    c.call("GetSecurityGroupsForVpc", &[("VpcId", EXAMPLE_VPC)])
        .expect_error(403, "UnauthorizedOperation");
    assert_eq!(
        e.eni(&eni)
            .expect("created")
            .attachment
            .map(|a| a.device_index),
        None
    );
    e.set_policies(Vec::new());
    attach(&c, &eni, EXAMPLE_INSTANCE, 1).expect(200);
}
