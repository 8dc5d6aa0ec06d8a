//! boto3 as an independent client: botocore's own serializer and XML parser drive the
//! emulator (create an ENI with tags and a client token, attach, delete-on-termination, assign
//! addresses and a /28, page through DescribeNetworkInterfaces, read subnets, instance types,
//! security groups, route tables and Elastic IPs, an index conflict and a throttle parsed as
//! error codes, STS web identity; every request's SigV4 signature verified against botocore's
//! signer, a wrong secret refused), so our XML is judged by a parser we did not write. boto3
//! lives in the tools venv `cargo xtask setup` keeps; without it the test fails naming setup.

use std::{path::Path, process::Command};

use serde_json::Value;
use weft_tests::ec2::{
    EXAMPLE_INSTANCE, EXAMPLE_POD_SUBNET, EXAMPLE_SG, EXAMPLE_VPC, Ec2Emulator, Fault, Scenario,
    Tags,
};

/// The tools venv's Python (xtask/src/setup.rs `TOOLS_VENV`).
const PYTHON: &str = "/opt/weft-tools/venv/bin/python3";

const SCRIPT: &str = r#"
import json, sys
import boto3, botocore
from botocore.config import Config

url, subnet, sg, instance, vpc = sys.argv[1:]
cfg = Config(retries={"total_max_attempts": 1})
ec2 = boto3.client("ec2", endpoint_url=url, region_name="us-east-1", config=cfg,
                   aws_access_key_id="AKIDBOTO3", aws_secret_access_key="boto3-secret")
out = {}

def code(call, **kw):
    try:
        call(**kw)
    except botocore.exceptions.ClientError as e:
        return [e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Message"]]
    return None

out["throttled"] = code(ec2.describe_vpcs)
vpcs = ec2.describe_vpcs(VpcIds=[vpc])["Vpcs"]
out["vpc_cidrs"] = [a["CidrBlock"] for a in vpcs[0]["CidrBlockAssociationSet"]]

eni = ec2.create_network_interface(
    SubnetId=subnet, Description="Cilium-CNI (%s)" % instance, Groups=[sg],
    SecondaryPrivateIpAddressCount=1, ClientToken="boto3-token",
    TagSpecifications=[{"ResourceType": "network-interface", "Tags": [{"Key": "io.cilium/cilium-managed", "Value": "true"}]}],
)["NetworkInterface"]
eni_id = eni["NetworkInterfaceId"]
out["created"] = {"id": eni_id, "ips": [p["PrivateIpAddress"] for p in eni["PrivateIpAddresses"]],
                  "primary": [p["Primary"] for p in eni["PrivateIpAddresses"]],
                  "tags": eni["TagSet"], "groups": [g["GroupId"] for g in eni["Groups"]], "status": eni["Status"]}
again = ec2.create_network_interface(
    SubnetId=subnet, Description="Cilium-CNI (%s)" % instance, Groups=[sg],
    SecondaryPrivateIpAddressCount=1, ClientToken="boto3-token",
    TagSpecifications=[{"ResourceType": "network-interface", "Tags": [{"Key": "io.cilium/cilium-managed", "Value": "true"}]}],
)["NetworkInterface"]
out["idempotent"] = again["NetworkInterfaceId"] == eni_id

att = ec2.attach_network_interface(NetworkInterfaceId=eni_id, InstanceId=instance, DeviceIndex=1, NetworkCardIndex=0)
ec2.modify_network_interface_attribute(NetworkInterfaceId=eni_id,
    Attachment={"AttachmentId": att["AttachmentId"], "DeleteOnTermination": True})
other = ec2.create_network_interface(SubnetId=subnet)["NetworkInterface"]["NetworkInterfaceId"]
out["conflict"] = code(ec2.attach_network_interface, NetworkInterfaceId=other, InstanceId=instance, DeviceIndex=1, NetworkCardIndex=0)
ec2.delete_network_interface(NetworkInterfaceId=other)

assigned = ec2.assign_private_ip_addresses(NetworkInterfaceId=eni_id, SecondaryPrivateIpAddressCount=2)
out["assigned"] = [a["PrivateIpAddress"] for a in assigned["AssignedPrivateIpAddresses"]]
prefix = ec2.assign_private_ip_addresses(NetworkInterfaceId=eni_id, Ipv4PrefixCount=1)
out["prefixes"] = [p["Ipv4Prefix"] for p in prefix["AssignedIpv4Prefixes"]]
ec2.unassign_private_ip_addresses(NetworkInterfaceId=eni_id, PrivateIpAddresses=out["assigned"][:1])
out["unassign_primary"] = code(ec2.unassign_private_ip_addresses, NetworkInterfaceId=eni_id, PrivateIpAddresses=out["created"]["ips"][:1])

pages = ec2.get_paginator("describe_network_interfaces").paginate(
    Filters=[{"Name": "private-ip-address", "Values": ["*"]}], PaginationConfig={"PageSize": 5})
sizes, seen = [], []
for page in pages:
    sizes.append(len(page["NetworkInterfaces"]))
    seen.extend(n["NetworkInterfaceId"] for n in page["NetworkInterfaces"])
out["page_sizes"] = sizes
out["seen"] = seen
mine = ec2.describe_network_interfaces(NetworkInterfaceIds=[eni_id])["NetworkInterfaces"][0]
out["described"] = {"device": mine["Attachment"]["DeviceIndex"], "instance": mine["Attachment"]["InstanceId"],
                    "dot": mine["Attachment"]["DeleteOnTermination"],
                    "ips": [p["PrivateIpAddress"] for p in mine["PrivateIpAddresses"]],
                    "prefixes": [p["Ipv4Prefix"] for p in mine.get("Ipv4Prefixes", [])],
                    "mac": mine["MacAddress"], "vpc": mine["VpcId"], "subnet": mine["SubnetId"]}

sn = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
out["subnets"] = {s["SubnetId"]: [s["CidrBlock"], s["AvailableIpAddressCount"], s["AvailabilityZone"]] for s in sn}
types = ec2.describe_instance_types(InstanceTypes=["m5.large", "m4.large", "m5.metal", "t2.xlarge"])["InstanceTypes"]
out["types"] = {t["InstanceType"]: [t["NetworkInfo"]["MaximumNetworkInterfaces"], t["NetworkInfo"]["Ipv4AddressesPerInterface"],
                                    t.get("Hypervisor"), t["BareMetal"]] for t in types}
out["sg_for_vpc"] = [g["GroupId"] for g in ec2.get_security_groups_for_vpc(VpcId=vpc)["SecurityGroupForVpcs"]]
out["sgs"] = [g["GroupId"] for g in ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"]]
rts = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["RouteTables"]
out["route_subnets"] = [a["SubnetId"] for a in rts[0]["Associations"] if a["AssociationState"]["State"] == "associated"]
res = ec2.describe_instances(InstanceIds=[instance])["Reservations"]
out["instance_enis"] = [n["NetworkInterfaceId"] for n in res[0]["Instances"][0]["NetworkInterfaces"]]
addrs = ec2.describe_addresses(Filters=[{"Name": "tag:weft", "Values": ["egress"]}])["Addresses"]
assoc = ec2.associate_address(AllocationId=addrs[0]["AllocationId"], NetworkInterfaceId=eni_id, AllowReassociation=False)
out["association"] = assoc["AssociationId"]
out["tags"] = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [eni_id]}])["Tags"]

sts = boto3.client("sts", endpoint_url=url, region_name="us-east-1", config=cfg)
creds = sts.assume_role_with_web_identity(RoleArn="arn:aws:iam::123456789012:role/weft", RoleSessionName="boto3",
                                          WebIdentityToken="boto3-jwt")["Credentials"]
out["sts_key"] = creds["AccessKeyId"]
as_role = boto3.client("ec2", endpoint_url=url, region_name="us-east-1", config=cfg,
                       aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                       aws_session_token=creds["SessionToken"])
out["as_role_vpcs"] = len(as_role.describe_vpcs()["Vpcs"])
forged = boto3.client("ec2", endpoint_url=url, region_name="us-east-1", config=cfg,
                      aws_access_key_id="AKIDBOTO3", aws_secret_access_key="not-the-secret")
out["forged"] = code(forged.describe_vpcs)
out["sts_bad"] = code(sts.assume_role_with_web_identity, RoleArn="arn:aws:iam::123456789012:role/weft",
                      RoleSessionName="boto3", WebIdentityToken="forged")
print(json.dumps(out, default=str))
"#;

#[test]
fn boto3_drives_the_emulator_and_parses_every_answer() {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: run `cargo xtask setup` (it keeps boto3 in the tools venv)"
    );
    let s = Scenario::example()
        .web_identity("arn:aws:iam::123456789012:role/weft", &["boto3-jwt"])
        .secret_key("AKIDBOTO3", "boto3-secret")
        .access_keys(&["AKIDBOTO3"]);
    let e = Ec2Emulator::start(s);
    for _ in 0..6 {
        e.create_detached_eni(EXAMPLE_POD_SUBNET, Tags::new())
            .expect("room");
    }
    e.inject(Fault::throttle(Some("DescribeVpcs")).times(1));
    let out = Command::new(PYTHON)
        .args([
            "-c",
            SCRIPT,
            &e.url(),
            EXAMPLE_POD_SUBNET,
            EXAMPLE_SG,
            EXAMPLE_INSTANCE,
            EXAMPLE_VPC,
        ])
        .output()
        .unwrap_or_else(|err| panic!("cannot run {PYTHON}: {err}: run `cargo xtask setup`"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named 'boto3'"),
        "boto3 is missing from the tools venv: run `cargo xtask setup`\n{stderr}"
    );
    assert!(out.status.success(), "the boto3 script failed:\n{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).expect("the script prints JSON");
    check_answers(&r);
    check_state(&r, &e);
}

/// What boto3 parsed from the calls' answers and errors.
fn check_answers(r: &Value) {
    assert_eq!(r["throttled"][0], "RequestLimitExceeded");
    assert_eq!(r["throttled"][1], 503);
    assert_eq!(
        r["vpc_cidrs"],
        serde_json::json!(["10.0.0.0/16", "10.1.0.0/16"])
    );
    assert_eq!(r["created"]["primary"], serde_json::json!([true, false]));
    assert_eq!(r["created"]["tags"][0]["Key"], "io.cilium/cilium-managed");
    assert_eq!(r["created"]["groups"], serde_json::json!([EXAMPLE_SG]));
    assert_eq!(r["created"]["status"], "available");
    assert_eq!(r["idempotent"], true);
    assert_eq!(r["conflict"][0], "InvalidParameterValue");
    assert_eq!(r["conflict"][1], 400);
    assert!(
        r["conflict"][2]
            .as_str()
            .is_some_and(|m| m.contains("interface attached at device")),
        "{}",
        r["conflict"]
    );
    assert_eq!(r["assigned"].as_array().map(Vec::len), Some(2));
    assert_eq!(r["unassign_primary"][0], "InvalidParameterValue");
    assert_eq!(
        r["page_sizes"],
        serde_json::json!([5, 3]),
        "the primary, 6 detached, one created"
    );
}

/// What boto3 read against what the emulator holds.
fn check_state(r: &Value, e: &Ec2Emulator) {
    let id = r["created"]["id"].as_str().expect("an id");
    let eni = e.eni(id).expect("exists");
    let ips: Vec<String> = eni.ips.iter().map(ToString::to_string).collect();
    assert_eq!(
        r["described"]["ips"],
        serde_json::json!(ips),
        "boto3 reads what the emulator holds"
    );
    assert_eq!(
        r["described"]["prefixes"],
        serde_json::json!(
            eni.prefixes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        )
    );
    assert_eq!(r["prefixes"], r["described"]["prefixes"]);
    assert_eq!(r["described"]["device"], 1);
    assert_eq!(r["described"]["instance"], EXAMPLE_INSTANCE);
    assert_eq!(r["described"]["dot"], true);
    assert_eq!(r["described"]["mac"], eni.mac);
    assert_eq!(r["described"]["vpc"], EXAMPLE_VPC);
    let mut seen: Vec<String> = r["seen"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|v| v.as_str().expect("id").to_owned())
        .collect();
    seen.sort();
    let mut all: Vec<String> = e.enis().into_iter().map(|n| n.id).collect();
    all.sort();
    assert_eq!(seen, all, "paging saw every ENI once");

    assert_eq!(
        r["subnets"][EXAMPLE_POD_SUBNET][1].as_u64(),
        Some(e.subnet_free(EXAMPLE_POD_SUBNET)),
        "{}",
        r["subnets"]
    );
    assert_eq!(
        r["types"]["m5.large"],
        serde_json::json!([3, 10, "nitro", false])
    );
    assert_eq!(
        r["types"]["m4.large"],
        serde_json::json!([2, 10, "xen", false])
    );
    assert_eq!(
        r["types"]["t2.xlarge"],
        serde_json::json!([3, 15, "xen", false])
    );
    assert_eq!(
        r["types"]["m5.metal"],
        serde_json::json!([15, 50, null, true])
    );
    assert_eq!(r["sg_for_vpc"], serde_json::json!([EXAMPLE_SG]));
    assert_eq!(r["sgs"], serde_json::json!([EXAMPLE_SG]));
    assert_eq!(r["route_subnets"].as_array().map(Vec::len), Some(2));
    assert_eq!(r["instance_enis"].as_array().map(Vec::len), Some(2));
    assert!(
        r["association"]
            .as_str()
            .is_some_and(|a| a.starts_with("eipassoc-"))
    );
    assert_eq!(r["tags"][0]["ResourceType"], "network-interface");
    assert!(r["sts_key"].as_str().is_some_and(|k| k.starts_with("ASIA")));
    assert_eq!(r["sts_bad"][0], "InvalidIdentityToken");
    assert_eq!(
        r["as_role_vpcs"], 1,
        "botocore's signature with STS credentials verifies"
    );
    assert_eq!(r["forged"][0], "SignatureDoesNotMatch");
    assert_eq!(r["forged"][1], 403);
}
