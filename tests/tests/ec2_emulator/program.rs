//! The `ec2-emulator` program as other processes use it: started with a YAML scenario file
//! (whose relative `policyFile` is read beside it), its URL read from the first line of stdout,
//! serving EC2 and IMDS there with the policy enforced, logging requests to stderr, and exiting
//! 0 on SIGTERM.

use std::{
    io::{BufRead as _, BufReader, Read as _},
    net::SocketAddr,
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use weft_tests::unique;

use super::Client;

const SCENARIO: &str = r"
region: eu-west-1
vpcs:
  - {id: vpc-0f000000000000001, cidr: 10.20.0.0/16}
subnets:
  - {id: subnet-0f000000000000001, vpc: vpc-0f000000000000001, cidr: 10.20.0.0/24, az: eu-west-1a, tags: {weft: nodes}}
securityGroups:
  - {id: sg-0f000000000000001, vpc: vpc-0f000000000000001}
instances:
  - {id: i-0f000000000000001, type: m5.large, subnet: subnet-0f000000000000001, secondaryIps: 2}
imds: {requireToken: true}
policyFile: policy.json
";

#[test]
fn program_prints_its_url_serves_and_exits_0_on_sigterm() {
    let dir = std::env::temp_dir().join(unique("ec2-emulator-"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("policy.json"),
        r#"{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:Describe*", "Resource": "*"}]}"#,
    )
    .expect("write the policy");
    let file = dir.join("scenario.yaml");
    std::fs::write(&file, SCENARIO).expect("write the scenario");

    let mut child = Command::new(env!("CARGO_BIN_EXE_ec2-emulator"))
        .arg("--scenario")
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start ec2-emulator: {e}"));
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(read.map(|_| line));
    });
    let line = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(line)) => line,
        other => {
            let _ = child.kill();
            panic!("no URL line from ec2-emulator: {other:?}");
        }
    };
    let addr: SocketAddr = line
        .trim_end()
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("not a URL line: {line:?}"));

    let mut client = Client::to(addr);
    client.region = "eu-west-1".to_owned();
    let r = client.call("DescribeInstances", &[]).expect(200);
    assert_eq!(r.all("instanceId"), ["i-0f000000000000001"]);
    assert_eq!(
        r.all("privateIpAddress").first().map(String::as_str),
        Some("10.20.0.4")
    );
    client
        .call(
            "CreateNetworkInterface",
            &[("SubnetId", "subnet-0f000000000000001")],
        )
        .expect_error(403, "UnauthorizedOperation");
    client.get("/latest/meta-data/instance-id", &[]).expect(401);

    kill(
        Pid::from_raw(i32::try_from(child.id()).expect("pid")),
        Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "ec2-emulator did not exit on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    assert!(status.success(), "exit {status:?}; stderr:\n{stderr}");
    assert!(
        stderr.contains("DescribeInstances -> 200"),
        "requests are logged:\n{stderr}"
    );
    assert!(
        stderr.contains("CreateNetworkInterface -> 403 UnauthorizedOperation"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
