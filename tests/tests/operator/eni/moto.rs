//! moto (a third-party EC2, `moto[server]` from the tools venv) as the operator's EC2, so the
//! emulator is not the only judge of the wire: the node fills to `pre-allocate` through an
//! ENI the operator creates and attaches, and `status.eni.enis` is what moto's
//! `DescribeNetworkInterfaces` answers for the instance (IDs, primaries, device indexes, the
//! addresses handed out). moto does not implement GetSecurityGroupsForVpc (an HTML 500): the
//! operator falls back to DescribeSecurityGroups, as it must. moto's deviations that matter
//! (random addresses, no limits) are not relied on: the test compares with moto's own answer.

use std::{
    collections::BTreeSet,
    net::TcpListener,
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::{Value, json};
use weft_tests::operator::Operator;

use super::{Cluster, wait_for};

/// The tools venv (xtask/src/setup.rs `TOOLS_VENV`).
const VENV: &str = "/opt/weft-tools/venv/bin";

/// A moto server on a free loopback port, killed on drop.
struct Moto {
    child: Child,
    url: String,
}

impl Moto {
    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let server = format!("{VENV}/moto_server");
        assert!(
            std::path::Path::new(&server).exists(),
            "{server} is missing: run `cargo xtask setup` (it installs moto[server] in the tools venv)"
        );
        let child = Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let url = format!("http://127.0.0.1:{port}");
        wait_for("moto to listen", Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .map(drop)
                .map_err(|e| e.to_string())
        });
        Self { child, url }
    }

    /// Run `script` with boto3 against moto (`ec2` is the client); its stdout as JSON.
    fn boto3(&self, script: &str, args: &[&str]) -> Value {
        let prelude = "import json, sys, boto3\n\
            ec2 = boto3.client('ec2', endpoint_url=sys.argv[1], region_name='us-east-1', \
            aws_access_key_id='testing', aws_secret_access_key='testing')\n";
        let out = Command::new(format!("{VENV}/python3"))
            .arg("-c")
            .arg(format!("{prelude}{script}"))
            .arg(&self.url)
            .args(args)
            .output()
            .expect("run python3 from the tools venv");
        assert!(
            out.status.success(),
            "boto3 against moto failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
        })
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const FIXTURE: &str = r"
vpc = ec2.create_vpc(CidrBlock='10.0.0.0/16')['Vpc']['VpcId']
subnet = ec2.create_subnet(VpcId=vpc, CidrBlock='10.0.1.0/24', AvailabilityZone='us-east-1a')['Subnet']['SubnetId']
sg = ec2.create_security_group(GroupName='nodes', Description='nodes', VpcId=vpc)['GroupId']
instance = ec2.run_instances(ImageId='ami-12c6146b', MinCount=1, MaxCount=1, InstanceType='m5.large',
                             SubnetId=subnet, SecurityGroupIds=[sg])['Instances'][0]['InstanceId']
print(json.dumps({'vpc': vpc, 'subnet': subnet, 'sg': sg, 'instance': instance}))
";

const DESCRIBE: &str = r"
enis = ec2.describe_network_interfaces(Filters=[{'Name': 'attachment.instance-id', 'Values': [sys.argv[2]]}])['NetworkInterfaces']
print(json.dumps([{'id': e['NetworkInterfaceId'], 'primary': e['PrivateIpAddress'],
                   'index': e['Attachment']['DeviceIndex'],
                   'ips': [p['PrivateIpAddress'] for p in e['PrivateIpAddresses'] if not p['Primary']]}
                  for e in enis]))
";

#[test]
fn against_moto_a_node_fills_through_a_new_eni_and_the_status_is_what_moto_describes() {
    let moto = Moto::start();
    let fixture = moto.boto3(FIXTURE, &[]);
    let field = |k: &str| fixture[k].as_str().expect("fixture field").to_owned();
    let (vpc, subnet, sg, instance) = (
        field("vpc"),
        field("subnet"),
        field("sg"),
        field("instance"),
    );
    let cluster = Cluster::start();
    cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": "node-m"},
        "spec": {
            "instance-id": instance,
            "eni": {
                "instance-type": "m5.large", "vpc-id": vpc, "availability-zone": "us-east-1a",
                "node-subnet-id": subnet, "first-interface-index": 1, "security-groups": [sg],
            },
            "ipam": {},
        },
    }));
    let mut op = Operator::new(
        &cluster.kubeconfig,
        &[
            "--ipam=eni",
            "--leader-election=false",
            "--ec2-api-endpoint",
            &moto.url,
            "--aws-imds-endpoint",
            &moto.url,
            "--aws-region",
            "us-east-1",
            "--aws-vpc-id",
            &vpc,
        ],
    );
    op.env = vec![
        ("AWS_ACCESS_KEY_ID".into(), "testing".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "testing".into()),
    ];
    op.spawn();
    let node = || cluster.cilium_node("node-m").unwrap_or(Value::Null);
    let pool = |n: &Value| -> BTreeSet<String> {
        (n["spec"]["ipam"]["pool"].as_object())
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    };
    wait_for(
        "node-m's pool to hold 8 addresses",
        Duration::from_secs(90),
        || {
            let n = node();
            (pool(&n).len() == 8)
                .then_some(())
                .ok_or_else(|| format!("{n}\n--- operator ---\n{}", op.log()))
        },
    );
    // What moto holds, and what the operator shows, once it has caught up with it.
    let described = moto.boto3(DESCRIBE, &[&instance]);
    let described = described.as_array().expect("a list");
    assert_eq!(
        described.len(),
        2,
        "the primary ENI and one new one: {described:?}"
    );
    let new = described
        .iter()
        .find(|e| e["index"] == 1)
        .expect("an ENI at device index 1");
    let moto_ips: BTreeSet<String> = (new["ips"].as_array().into_iter().flatten())
        .filter_map(|ip| ip.as_str().map(str::to_owned))
        .collect();
    let n = node();
    assert_eq!(
        pool(&n),
        moto_ips,
        "the pool is the new ENI's secondaries in moto"
    );
    let shown = &n["status"]["eni"]["enis"];
    let shown_ids: BTreeSet<&str> = shown
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    let described_ids: BTreeSet<&str> = described.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(shown_ids, described_ids, "{n}");
    for eni in described {
        let id = eni["id"].as_str().expect("id");
        assert_eq!(shown[id]["ip"], eni["primary"], "{id}");
        assert_eq!(
            shown[id]["number"].as_i64().unwrap_or(0),
            eni["index"].as_i64().unwrap_or(-1),
            "{id}"
        );
    }
}
