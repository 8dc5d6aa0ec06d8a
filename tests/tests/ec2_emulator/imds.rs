//! IMDS and STS on the emulator's port: the IMDSv2 token (TTL header required), tokens checked,
//! a GET without one refused when the scenario requires v2 and served as IMDSv1 when not, the
//! §3.5 paths for the scenario's instance, the instance role's credentials; STS
//! `AssumeRoleWithWebIdentity` with its own answer and error shapes; keys issued by either
//! accepted by EC2 when the scenario restricts keys, their signatures verified.

use serde_json::Value;
use weft_tests::ec2::{EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, EXAMPLE_VPC, InstanceSpec, Scenario};

use super::{Client, start_with};

fn token(c: &Client) -> String {
    c.send(
        "PUT",
        "/latest/api/token",
        &[("x-aws-ec2-metadata-token-ttl-seconds", "21600".to_owned())],
        bytes::Bytes::new(),
    )
    .expect(200)
    .text()
}

fn get(c: &Client, path: &str, token: &str) -> String {
    c.get(path, &[("x-aws-ec2-metadata-token", token.to_owned())])
        .expect(200)
        .text()
}

#[test]
fn imdsv2_tokens_are_required_when_the_scenario_says_so() {
    let (e, c) = start_with(Scenario::example().imds(EXAMPLE_INSTANCE, true));
    c.send("PUT", "/latest/api/token", &[], bytes::Bytes::new())
        .expect(400);
    c.send(
        "PUT",
        "/latest/api/token",
        &[("x-aws-ec2-metadata-token-ttl-seconds", "0".to_owned())],
        bytes::Bytes::new(),
    )
    .expect(400);
    c.get("/latest/meta-data/instance-id", &[]).expect(401);
    c.get(
        "/latest/meta-data/instance-id",
        &[("x-aws-ec2-metadata-token", "forged".to_owned())],
    )
    .expect(401);
    let t = token(&c);
    assert_eq!(
        get(&c, "/latest/meta-data/instance-id", &t),
        EXAMPLE_INSTANCE
    );
    e.revoke_imds_tokens();
    c.get(
        "/latest/meta-data/instance-id",
        &[("x-aws-ec2-metadata-token", t)],
    )
    .expect(401);
    e.refuse_imds_tokens(Some(403));
    c.send(
        "PUT",
        "/latest/api/token",
        &[("x-aws-ec2-metadata-token-ttl-seconds", "300".to_owned())],
        bytes::Bytes::new(),
    )
    .expect(403);
    e.refuse_imds_tokens(None);
    e.set_imds_require_token(false);
    assert_eq!(
        c.get("/latest/meta-data/instance-id", &[])
            .expect(200)
            .text(),
        EXAMPLE_INSTANCE,
        "IMDSv1"
    );
}

#[test]
fn metadata_paths_describe_the_instance_as_it_is() {
    let (e, c) = start_with(Scenario::example().imds(EXAMPLE_INSTANCE, true));
    let t = token(&c);
    let doc: Value =
        serde_json::from_str(&get(&c, "/latest/dynamic/instance-identity/document", &t))
            .expect("JSON");
    assert_eq!(doc["region"], "us-east-1");
    assert_eq!(doc["instanceId"], EXAMPLE_INSTANCE);
    assert_eq!(doc["instanceType"], "m5.large");
    assert_eq!(doc["privateIp"], "10.0.0.4");
    assert_eq!(get(&c, "/latest/meta-data/instance-type", &t), "m5.large");
    assert_eq!(
        get(&c, "/latest/meta-data/placement/availability-zone", &t),
        "us-east-1a"
    );
    let mac = get(&c, "/latest/meta-data/mac", &t);
    assert_eq!(mac, e.instance_enis(EXAMPLE_INSTANCE)[0].mac);
    let base = format!("/latest/meta-data/network/interfaces/macs/{mac}");
    assert_eq!(get(&c, &format!("{base}/vpc-id"), &t), EXAMPLE_VPC);
    assert_eq!(
        get(&c, &format!("{base}/subnet-id"), &t),
        EXAMPLE_NODE_SUBNET
    );
    assert_eq!(
        get(&c, &format!("{base}/vpc-ipv4-cidr-blocks"), &t),
        "10.0.0.0/16\n10.1.0.0/16"
    );
    c.get(
        "/latest/meta-data/nothing-here",
        &[("x-aws-ec2-metadata-token", t.clone())],
    )
    .expect(404);
    e.add_instance(&InstanceSpec::new(
        "i-0b000000000000009",
        "m4.large",
        EXAMPLE_NODE_SUBNET,
    ))
    .expect("room for an instance");
    e.set_imds_instance("i-0b000000000000009");
    assert_eq!(get(&c, "/latest/meta-data/instance-type", &t), "m4.large");
    assert_eq!(e.count("IMDSToken"), 1);
}

#[test]
fn issued_credentials_are_accepted_by_ec2() {
    let mut s = Scenario::example()
        .access_keys(&["AKIDONLYTHISONE"])
        .web_identity(
            "arn:aws:iam::123456789012:role/weft-operator",
            &["eyJ.weft.jwt"],
        );
    s.imds.role = Some("weft-node".to_owned());
    let (_e, mut c) = start_with(s);
    c.call("DescribeVpcs", &[]).expect_error(401, "AuthFailure");

    let sts = |role: &str, token: &str| {
        c.form(
            &[
                ("Action", "AssumeRoleWithWebIdentity"),
                ("Version", "2011-06-15"),
                ("RoleArn", role),
                ("RoleSessionName", "weft"),
                ("WebIdentityToken", token),
            ],
            &[],
        )
    };
    let bad = sts("arn:aws:iam::123456789012:role/weft-operator", "forged")
        .expect_error(400, "InvalidIdentityToken");
    assert!(bad.text().contains("<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type>"), "{}", bad.text());
    sts("arn:aws:iam::123456789012:role/other", "eyJ.weft.jwt").expect_error(403, "AccessDenied");
    let ok = sts(
        "arn:aws:iam::123456789012:role/weft-operator",
        "eyJ.weft.jwt",
    )
    .expect(200);
    assert!(ok.text().contains("<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult>"), "{}", ok.text());
    assert!(!ok.one("SessionToken").is_empty());
    assert!(ok.one("Expiration").ends_with('Z'));
    // The key is accepted and, its secret being known, its signature checked (this client
    // signs by shape only; boto3.rs signs for real with STS credentials).
    c.access_key = ok.one("AccessKeyId");
    c.call("DescribeVpcs", &[])
        .expect_error(403, "SignatureDoesNotMatch");

    let role = c
        .get("/latest/meta-data/iam/security-credentials/", &[])
        .expect(200)
        .text();
    assert_eq!(role, "weft-node");
    let creds: Value = serde_json::from_str(
        &c.get("/latest/meta-data/iam/security-credentials/weft-node", &[])
            .expect(200)
            .text(),
    )
    .expect("JSON");
    assert_eq!(creds["Code"], "Success");
    c.access_key = creds["AccessKeyId"].as_str().expect("a key").to_owned();
    c.call("DescribeVpcs", &[])
        .expect_error(403, "SignatureDoesNotMatch");
    c.access_key = "AKIDNOBODYKNOWS".to_owned();
    c.call("DescribeVpcs", &[]).expect_error(401, "AuthFailure");
}

/// `GET path` (IMDSv1) to the emulator from the local address `from`: the body.
fn get_from(e: &weft_tests::ec2::Ec2Emulator, from: &str, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(format!("{from}:0").parse().expect("address"))
            .expect("bind");
        socket.connect(e.addr()).await.expect("connect")
    });
    let mut stream = stream.into_std().expect("std stream");
    stream.set_nonblocking(false).expect("blocking");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: imds\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

#[test]
fn imds_answers_for_the_instance_whose_primary_address_asks() {
    let mut other = InstanceSpec::new(
        "i-0a0000000000000ff",
        "m5.large",
        "subnet-0a000000000000010",
    );
    other.primary_ip = Some("127.0.0.10".parse().expect("address"));
    let mut scenario = Scenario::example()
        .subnet(
            "subnet-0a000000000000010",
            EXAMPLE_VPC,
            "127.0.0.0/24",
            "us-east-1a",
            weft_tests::ec2::Tags::new(),
        )
        .imds(EXAMPLE_INSTANCE, false);
    scenario.instances.push(other);
    let (e, _c) = start_with(scenario);
    assert_eq!(
        get_from(&e, "127.0.0.10", "/latest/meta-data/instance-id"),
        "i-0a0000000000000ff",
        "the asking instance"
    );
    assert_eq!(
        get_from(&e, "127.0.0.1", "/latest/meta-data/instance-id"),
        EXAMPLE_INSTANCE,
        "no instance has the address: the one the scenario names"
    );
}
