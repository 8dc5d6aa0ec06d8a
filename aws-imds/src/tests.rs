//! IMDS against a scripted local server: the v2 token flow (one PUT, the token on every GET),
//! the v1 fallback on 403/404/405, refused and failing token requests, errors naming the path
//! and the endpoint, and the identity document.

use super::*;
use server::{Reply, TestServer};

mod server;

const DOC: &str = r#"{"accountId":"123456789012","architecture":"x86_64","availabilityZone":"us-east-1a",
  "imageId":"ami-1","instanceId":"i-0abc","instanceType":"m5.large","pendingTime":"2026-01-01T00:00:00Z",
  "privateIp":"10.0.0.4","region":"us-east-1","version":"2017-09-30"}"#;

#[tokio::test]
async fn v2_token_then_reads() {
    let server = TestServer::start().await;
    server.expect("PUT", TOKEN_PATH, Reply::ok("tok-1"));
    server.expect(
        "GET",
        "/latest/dynamic/instance-identity/document",
        Reply::ok(DOC),
    );
    server.expect("GET", "/latest/meta-data/instance-id", Reply::ok("i-0abc"));
    server.expect(
        "GET",
        "/latest/meta-data/instance-type",
        Reply::ok("m5.large\n"),
    );
    server.expect(
        "GET",
        "/latest/meta-data/mac",
        Reply::ok("02:00:00:00:00:01"),
    );
    server.expect(
        "GET",
        "/latest/meta-data/placement/availability-zone",
        Reply::ok("us-east-1a"),
    );
    server.expect(
        "GET",
        "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:01/vpc-id",
        Reply::ok("vpc-1"),
    );
    server.expect(
        "GET",
        "/latest/meta-data/network/interfaces/macs/02:00:00:00:00:01/subnet-id",
        Reply::ok("subnet-a"),
    );
    let imds = Imds::new(&format!("{}/", server.url));
    let doc = imds.identity_document().await.unwrap();
    assert_eq!(
        doc,
        IdentityDocument {
            region: "us-east-1".into(),
            instance_id: "i-0abc".into(),
            instance_type: "m5.large".into(),
            availability_zone: "us-east-1a".into(),
            account_id: "123456789012".into(),
        }
    );
    assert_eq!(imds.instance_id().await.unwrap(), "i-0abc");
    assert_eq!(imds.instance_type().await.unwrap(), "m5.large");
    let mac = imds.mac().await.unwrap();
    assert_eq!(imds.availability_zone().await.unwrap(), "us-east-1a");
    assert_eq!(imds.vpc_id(&mac).await.unwrap(), "vpc-1");
    assert_eq!(imds.subnet_id(&mac).await.unwrap(), "subnet-a");
    let seen = server.finish();
    assert_eq!(seen[0].header(TTL_HEADER), Some("21600"));
    assert_eq!(seen[0].header(TOKEN_HEADER), None);
    for get in &seen[1..] {
        assert_eq!(get.header(TOKEN_HEADER), Some("tok-1"), "{}", get.uri);
    }
}

#[tokio::test]
async fn refused_token_falls_back_to_v1() {
    for status in [403, 404, 405] {
        let server = TestServer::start().await;
        server.expect("PUT", TOKEN_PATH, Reply::new(status, "no"));
        server.expect("GET", "/latest/meta-data/instance-id", Reply::ok("i-1"));
        server.expect("GET", "/latest/meta-data/mac", Reply::ok("m"));
        let imds = Imds::new(&server.url);
        assert_eq!(imds.instance_id().await.unwrap(), "i-1");
        assert_eq!(imds.mac().await.unwrap(), "m");
        let seen = server.finish();
        assert!(seen[1..].iter().all(|s| s.header(TOKEN_HEADER).is_none()));
    }
}

#[tokio::test]
async fn errors_name_the_path_and_endpoint() {
    let server = TestServer::start().await;
    server.expect("PUT", TOKEN_PATH, Reply::new(500, "boom"));
    server.expect("PUT", TOKEN_PATH, Reply::ok("t"));
    server.expect(
        "GET",
        "/latest/meta-data/network/interfaces/macs/m/vpc-id",
        Reply::new(500, "moto does not serve this"),
    );
    server.expect(
        "GET",
        "/latest/dynamic/instance-identity/document",
        Reply::ok("<html/>"),
    );
    server.expect("GET", "/latest/meta-data/instance-id", Reply::ok("  \n"));
    let imds = Imds::new(&server.url);
    let url = &server.url;
    assert_eq!(
        imds.instance_id().await.unwrap_err().to_string(),
        format!("instance metadata {url}/latest/api/token: HTTP 500")
    );
    assert_eq!(
        imds.vpc_id("m").await.unwrap_err().to_string(),
        format!(
            "instance metadata {url}/latest/meta-data/network/interfaces/macs/m/vpc-id: HTTP 500"
        )
    );
    let doc = imds.identity_document().await.unwrap_err().to_string();
    assert!(
        doc.starts_with(&format!(
            "instance metadata {url}/latest/dynamic/instance-identity/document: unusable answer: not an identity document"
        )),
        "{doc}"
    );
    assert_eq!(
        imds.instance_id().await.unwrap_err().to_string(),
        format!("instance metadata {url}/latest/meta-data/instance-id: unusable answer: empty")
    );
    server.finish();

    let unreachable = Imds::new("http://127.0.0.1:1");
    let err = unreachable.instance_id().await.unwrap_err();
    assert!(
        matches!(&err, ImdsError::Transport { endpoint, path, .. }
            if endpoint == "http://127.0.0.1:1" && path == TOKEN_PATH),
        "{err}"
    );
}

#[tokio::test]
async fn an_expired_token_is_asked_for_again() {
    let server = TestServer::start().await;
    server.expect("PUT", TOKEN_PATH, Reply::ok("old"));
    server.expect("GET", "/latest/meta-data/instance-id", Reply::new(401, ""));
    server.expect("PUT", TOKEN_PATH, Reply::ok("new"));
    server.expect("GET", "/latest/meta-data/instance-id", Reply::ok("i-1"));
    let imds = Imds::new(&server.url);
    assert!(imds.instance_id().await.is_err());
    assert_eq!(imds.instance_id().await.unwrap(), "i-1");
    let seen = server.finish();
    assert_eq!(seen[3].header(TOKEN_HEADER), Some("new"));
}
