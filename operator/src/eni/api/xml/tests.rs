//! Decoding answers shaped as EC2 sends them (element names from the API reference, the
//! namespace of AWS or moto's variant, unknown elements sprinkled in), and the failures: a
//! truncated document, the wrong document, a missing list or ID, a bad number.

use super::*;

const NS: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";

fn doc(action: &str, inner: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{action}Response xmlns=\"{NS}\">\
         <requestId>59dbff89-35bd-4eac-99ed-be587EXAMPLE</requestId>{inner}</{action}Response>"
    )
}

#[test]
fn vpcs_with_secondary_cidrs() {
    let body = doc(
        "DescribeVpcs",
        "<vpcSet><item><vpcId>vpc-1</vpcId><ownerId>123</ownerId><state>available</state>\
         <cidrBlock>10.0.0.0/16</cidrBlock><cidrBlockAssociationSet>\
         <item><cidrBlock>10.0.0.0/16</cidrBlock><associationId>a1</associationId>\
         <cidrBlockState><state>associated</state></cidrBlockState></item>\
         <item><cidrBlock>100.64.0.0/16</cidrBlock><cidrBlockState><state>disassociated</state></cidrBlockState></item>\
         </cidrBlockAssociationSet><isDefault>false</isDefault></item>\
         <item><vpcId>vpc-2</vpcId><cidrBlock>172.31.0.0/16</cidrBlock><cidrBlockAssociationSet/></item></vpcSet>",
    );
    let page = vpcs(&body).unwrap();
    assert_eq!(
        page.items,
        [
            Vpc {
                id: "vpc-1".into(),
                primary_cidr: "10.0.0.0/16".into(),
                cidrs: vec!["10.0.0.0/16".into(), "100.64.0.0/16".into()],
            },
            Vpc {
                id: "vpc-2".into(),
                primary_cidr: "172.31.0.0/16".into(),
                cidrs: vec![],
            }
        ]
    );
    assert_eq!(page.next_token, None);
}

#[test]
fn subnets_with_tags_and_moto_namespace() {
    // moto's namespace lacks the trailing slash; a negative count is moto's too.
    let body = "<DescribeSubnetsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15\">\
        <requestId>r</requestId><subnetSet><item><subnetId>subnet-a</subnetId><state>available</state>\
        <vpcId>vpc-1</vpcId><cidrBlock>10.0.1.0/24</cidrBlock><availableIpAddressCount>-3</availableIpAddressCount>\
        <availabilityZone>us-east-1a</availabilityZone><tagSet><item><key>Name</key><value>a</value></item>\
        <item><key>kubernetes.io/role/cni</key><value/></item></tagSet></item></subnetSet>\
        <nextToken>tok-2</nextToken></DescribeSubnetsResponse>";
    let page = subnets(body).unwrap();
    assert_eq!(
        page.items,
        [Subnet {
            id: "subnet-a".into(),
            cidr: "10.0.1.0/24".into(),
            available_addresses: -3,
            availability_zone: "us-east-1a".into(),
            vpc_id: "vpc-1".into(),
            tags: Tags::from([
                ("Name".into(), "a".into()),
                ("kubernetes.io/role/cni".into(), String::new())
            ]),
        }]
    );
    assert_eq!(page.next_token.as_deref(), Some("tok-2"));
}

#[test]
fn route_tables_and_associations() {
    let body = doc(
        "DescribeRouteTables",
        "<routeTableSet><item><routeTableId>rtb-1</routeTableId><vpcId>vpc-1</vpcId>\
         <routeSet><item><destinationCidrBlock>10.0.0.0/16</destinationCidrBlock></item></routeSet>\
         <associationSet>\
         <item><routeTableAssociationId>rtbassoc-0</routeTableAssociationId><main>true</main>\
         <associationState><state>associated</state></associationState></item>\
         <item><subnetId>subnet-a</subnetId><associationState><state>associated</state></associationState></item>\
         <item><subnetId>subnet-b</subnetId><associationState><state>disassociating</state></associationState></item>\
         </associationSet></item></routeTableSet>",
    );
    let tables = route_tables(&body).unwrap().items;
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0].id, "rtb-1");
    assert_eq!(tables[0].associations.len(), 3);
    assert_eq!(
        tables[0].associated_subnets().collect::<Vec<_>>(),
        ["subnet-a"]
    );
}

#[test]
fn security_groups_of_both_actions() {
    let get = doc(
        "GetSecurityGroupsForVpc",
        "<securityGroupForVpcSet><item><groupId>sg-1</groupId><groupName>default</groupName>\
         <primaryVpcId>vpc-1</primaryVpcId><tagSet><item><key>k</key><value>v</value></item></tagSet>\
         </item></securityGroupForVpcSet><nextToken/>",
    );
    let page = security_groups("GetSecurityGroupsForVpc", &get).unwrap();
    assert_eq!(
        page.items,
        [SecurityGroup {
            id: "sg-1".into(),
            vpc_id: "vpc-1".into(),
            tags: Tags::from([("k".into(), "v".into())]),
        }]
    );
    assert_eq!(page.next_token, None, "an empty nextToken ends the listing");
    let describe = doc(
        "DescribeSecurityGroups",
        "<securityGroupInfo><item><ownerId>1</ownerId><groupId>sg-2</groupId><vpcId>vpc-1</vpcId>\
         <ipPermissions/></item></securityGroupInfo>",
    );
    let groups = security_groups("DescribeSecurityGroups", &describe)
        .unwrap()
        .items;
    assert_eq!(groups[0].id, "sg-2");
    assert_eq!(groups[0].vpc_id, "vpc-1");
    assert!(groups[0].tags.is_empty());
}

const ENI: &str = "<item><networkInterfaceId>eni-1</networkInterfaceId><subnetId>subnet-a</subnetId>\
    <vpcId>vpc-1</vpcId><availabilityZone>us-east-1a</availabilityZone><description>Cilium-CNI (i-1)</description>\
    <ownerId>123</ownerId><requesterManaged>false</requesterManaged><status>in-use</status>\
    <macAddress>02:00:00:00:00:01</macAddress><privateIpAddress>10.0.1.10</privateIpAddress>\
    <sourceDestCheck>true</sourceDestCheck><groupSet><item><groupId>sg-1</groupId><groupName>a</groupName></item>\
    <item><groupId>sg-2</groupId></item></groupSet>\
    <attachment><attachmentId>eni-attach-1</attachmentId><instanceId>i-1</instanceId><instanceOwnerId>123</instanceOwnerId>\
    <deviceIndex>1</deviceIndex><networkCardIndex>0</networkCardIndex><status>attached</status>\
    <deleteOnTermination>true</deleteOnTermination></attachment>\
    <association><publicIp>3.3.3.3</publicIp><ipOwnerId>amazon</ipOwnerId></association>\
    <tagSet><item><key>io.cilium/cilium-managed</key><value>true</value></item></tagSet>\
    <privateIpAddressesSet><item><privateIpAddress>10.0.1.10</privateIpAddress><primary>true</primary></item>\
    <item><privateIpAddress>10.0.1.11</privateIpAddress><primary>false</primary></item></privateIpAddressesSet>\
    <ipv4PrefixSet><item><ipv4Prefix>10.0.1.32/28</ipv4Prefix></item></ipv4PrefixSet>\
    <ipv6PrefixSet><item><ipv6Prefix>2600:1f18::/80</ipv6Prefix></item></ipv6PrefixSet>\
    <ipv6AddressesSet/><interfaceType>interface</interfaceType></item>";

fn eni_1() -> NetworkInterface {
    NetworkInterface {
        id: "eni-1".into(),
        primary_ip: Some("10.0.1.10".into()),
        mac: "02:00:00:00:00:01".into(),
        description: "Cilium-CNI (i-1)".into(),
        subnet_id: "subnet-a".into(),
        vpc_id: "vpc-1".into(),
        availability_zone: "us-east-1a".into(),
        status: "in-use".into(),
        attachment: Some(Attachment {
            device_index: Some(1),
            instance_id: Some("i-1".into()),
            attachment_id: Some("eni-attach-1".into()),
        }),
        private_ips: vec!["10.0.1.10".into(), "10.0.1.11".into()],
        ipv4_prefixes: vec!["10.0.1.32/28".into()],
        ipv6_prefixes: vec!["2600:1f18::/80".into()],
        ipv6_addresses: vec![],
        public_ip: Some("3.3.3.3".into()),
        security_groups: vec!["sg-1".into(), "sg-2".into()],
        tags: Tags::from([("io.cilium/cilium-managed".into(), "true".into())]),
    }
}

#[test]
fn network_interfaces_full_and_detached() {
    let detached = "<item><networkInterfaceId>eni-2</networkInterfaceId><subnetId>subnet-a</subnetId>\
        <status>available</status><privateIpAddress>10.0.1.20</privateIpAddress>\
        <privateIpAddressesSet><item><privateIpAddress>10.0.1.20</privateIpAddress></item></privateIpAddressesSet>\
        <association><publicIp></publicIp></association></item>";
    let body = doc(
        "DescribeNetworkInterfaces",
        &format!(
            "<networkInterfaceSet>{ENI}{detached}</networkInterfaceSet><nextToken>n2</nextToken>"
        ),
    );
    let page = network_interfaces(&body).unwrap();
    assert_eq!(page.items[0], eni_1());
    let eni2 = &page.items[1];
    assert_eq!(eni2.attachment, None);
    assert_eq!(eni2.public_ip, None, "an empty publicIp is no public IP");
    assert!(eni2.ipv4_prefixes.is_empty() && eni2.tags.is_empty());
    assert_eq!(page.next_token.as_deref(), Some("n2"));

    let empty = doc("DescribeNetworkInterfaces", "<networkInterfaceSet/>");
    assert!(network_interfaces(&empty).unwrap().items.is_empty());
}

#[test]
fn created_interface_reads_network_interface() {
    let body = doc(
        "CreateNetworkInterface",
        &format!(
            "<networkInterface>{}</networkInterface><clientToken>tok</clientToken>",
            ENI.trim_start_matches("<item>").trim_end_matches("</item>")
        ),
    );
    assert_eq!(created_interface(&body).unwrap(), eni_1());
}

#[test]
fn instances_flatten_reservations() {
    let body = doc(
        "DescribeInstances",
        "<reservationSet><item><reservationId>r-1</reservationId><instancesSet>\
         <item><instanceId>i-1</instanceId><instanceType>m5.large</instanceType><networkInterfaceSet>\
         <item><networkInterfaceId>eni-1</networkInterfaceId></item><item><networkInterfaceId>eni-3</networkInterfaceId></item>\
         </networkInterfaceSet></item><item><instanceId>i-2</instanceId><networkInterfaceSet/></item></instancesSet></item>\
         <item><instancesSet><item><instanceId>i-3</instanceId></item></instancesSet></item></reservationSet>",
    );
    let page = instances(&body).unwrap();
    assert_eq!(
        page.items,
        [
            Instance {
                id: "i-1".into(),
                interface_ids: vec!["eni-1".into(), "eni-3".into()]
            },
            Instance {
                id: "i-2".into(),
                interface_ids: vec![]
            },
            Instance {
                id: "i-3".into(),
                interface_ids: vec![]
            },
        ]
    );
}

#[test]
fn instance_types_limits() {
    let body = doc(
        "DescribeInstanceTypes",
        "<instanceTypeSet><item><instanceType>m5.large</instanceType><currentGeneration>true</currentGeneration>\
         <hypervisor>nitro</hypervisor><bareMetal>false</bareMetal><networkInfo><networkPerformance>Up to 10 Gigabit</networkPerformance>\
         <maximumNetworkInterfaces>3</maximumNetworkInterfaces><maximumNetworkCards>1</maximumNetworkCards>\
         <ipv4AddressesPerInterface>10</ipv4AddressesPerInterface><ipv6AddressesPerInterface>10</ipv6AddressesPerInterface>\
         <ipv6Supported>true</ipv6Supported></networkInfo></item>\
         <item><instanceType>c5.metal</instanceType><bareMetal>true</bareMetal><networkInfo>\
         <maximumNetworkInterfaces>15</maximumNetworkInterfaces><ipv4AddressesPerInterface>50</ipv4AddressesPerInterface>\
         <ipv6AddressesPerInterface>50</ipv6AddressesPerInterface></networkInfo></item></instanceTypeSet>",
    );
    assert_eq!(
        instance_types(&body).unwrap().items,
        [
            InstanceTypeInfo {
                instance_type: "m5.large".into(),
                hypervisor: "nitro".into(),
                bare_metal: false,
                max_interfaces: 3,
                ipv4_per_interface: 10,
                ipv6_per_interface: 10,
            },
            InstanceTypeInfo {
                instance_type: "c5.metal".into(),
                hypervisor: String::new(),
                bare_metal: true,
                max_interfaces: 15,
                ipv4_per_interface: 50,
                ipv6_per_interface: 50,
            }
        ]
    );
}

#[test]
fn tags_addresses_and_single_values() {
    let body = doc(
        "DescribeTags",
        "<tagSet><item><resourceId>i-1</resourceId><resourceType>instance</resourceType>\
         <key>aws:eks:cluster-name</key><value>prod</value></item></tagSet>",
    );
    assert_eq!(
        resource_tags(&body).unwrap().items,
        [ResourceTag {
            resource_id: "i-1".into(),
            key: "aws:eks:cluster-name".into(),
            value: "prod".into()
        }]
    );
    let body = doc(
        "DescribeAddresses",
        "<addressesSet><item><publicIp>3.3.3.3</publicIp><allocationId>eipalloc-1</allocationId>\
         <domain>vpc</domain><tagSet><item><key>pool</key><value>a</value></item></tagSet></item>\
         <item><publicIp>4.4.4.4</publicIp><allocationId>eipalloc-2</allocationId>\
         <associationId>eipassoc-2</associationId></item></addressesSet>",
    );
    let addrs = addresses(&body).unwrap().items;
    assert_eq!(addrs[0].allocation_id, "eipalloc-1");
    assert_eq!(addrs[0].association_id, None);
    assert_eq!(addrs[0].tags.get("pool").map(String::as_str), Some("a"));
    assert_eq!(addrs[1].association_id.as_deref(), Some("eipassoc-2"));

    let body = doc(
        "AttachNetworkInterface",
        "<attachmentId>eni-attach-9</attachmentId><networkCardIndex>0</networkCardIndex>",
    );
    assert_eq!(
        single("AttachNetworkInterface", &body, "attachmentId").unwrap(),
        "eni-attach-9"
    );
    let body = doc(
        "AssociateAddress",
        "<return>true</return><associationId>eipassoc-1</associationId>",
    );
    assert_eq!(
        single("AssociateAddress", &body, "associationId").unwrap(),
        "eipassoc-1"
    );
    let body = doc(
        "AssignPrivateIpAddresses",
        "<networkInterfaceId>eni-1</networkInterfaceId><assignedPrivateIpAddressesSet>\
         <item><privateIpAddress>10.0.1.12</privateIpAddress></item></assignedPrivateIpAddressesSet>\
         <assignedIpv4PrefixSet><item><ipv4Prefix>10.0.1.48/28</ipv4Prefix></item></assignedIpv4PrefixSet>",
    );
    assert_eq!(assigned(&body).unwrap(), ["10.0.1.12", "10.0.1.48/28"]);
    for action in [
        "ModifyNetworkInterfaceAttribute",
        "DeleteNetworkInterface",
        "UnassignPrivateIpAddresses",
        "AssignIpv6Addresses",
    ] {
        acknowledged(action, &doc(action, "<return>true</return>")).unwrap();
    }
    let refused = acknowledged(
        "DeleteNetworkInterface",
        &doc("DeleteNetworkInterface", "<return>false</return>"),
    )
    .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "DeleteNetworkInterface: the answer has no usable return (it is false)"
    );
}

#[test]
fn bad_documents_name_the_action_and_the_element() {
    let full = doc(
        "DescribeNetworkInterfaces",
        &format!("<networkInterfaceSet>{ENI}</networkInterfaceSet>"),
    );
    let cases: Vec<(Result<Page<NetworkInterface>, Ec2Error>, &str)> = vec![
        (
            network_interfaces(&full[..full.len() / 2]),
            "DescribeNetworkInterfaces: the answer is not well-formed XML",
        ),
        (
            network_interfaces(""),
            "DescribeNetworkInterfaces: the answer is not well-formed XML",
        ),
        (
            network_interfaces("<html><body>Internal Server Error</body></html>"),
            "DescribeNetworkInterfaces: the answer has no usable DescribeNetworkInterfacesResponse (the document is <html>)",
        ),
        (
            network_interfaces(&doc("DescribeNetworkInterfaces", "")),
            "DescribeNetworkInterfaces: the answer has no usable networkInterfaceSet",
        ),
        (
            network_interfaces(&doc(
                "DescribeNetworkInterfaces",
                "<networkInterfaceSet><item><subnetId>s</subnetId></item></networkInterfaceSet>",
            )),
            "DescribeNetworkInterfaces: the answer has no usable networkInterfaceSet/item/networkInterfaceId",
        ),
        (
            network_interfaces(&doc(
                "DescribeNetworkInterfaces",
                "<networkInterfaceSet><item><networkInterfaceId>eni-1</networkInterfaceId>\
                 <attachment><deviceIndex>one</deviceIndex></attachment></item></networkInterfaceSet>",
            )),
            "DescribeNetworkInterfaces: the answer has no usable networkInterfaceSet/item/attachment/deviceIndex (not a number: \"one\")",
        ),
    ];
    for (result, want) in cases {
        assert_eq!(result.unwrap_err().to_string(), want);
    }
    let err = instance_types(&doc(
        "DescribeInstanceTypes",
        "<instanceTypeSet><item><instanceType>x</instanceType><networkInfo>\
         <maximumNetworkInterfaces>-1</maximumNetworkInterfaces></networkInfo></item></instanceTypeSet>",
    ))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "DescribeInstanceTypes: the answer has no usable instanceTypeSet/item/networkInfo/maximumNetworkInterfaces (not a number: \"-1\")"
    );
    assert!(matches!(
        single("AttachNetworkInterface", &doc("AttachNetworkInterface", ""), "attachmentId"),
        Err(Ec2Error::Missing { what, .. }) if what == "AttachNetworkInterfaceResponse/attachmentId"
    ));
}

#[test]
fn error_documents() {
    let ec2 = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>\
        <Code>InvalidParameterValue</Code><Message>Instance 'i-1' already has an interface attached at device index '1'.</Message>\
        </Error></Errors><RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>";
    assert_eq!(
        error_document(ec2),
        Some((
            "InvalidParameterValue".into(),
            "Instance 'i-1' already has an interface attached at device index '1'.".into(),
            "ea966190-f9aa-478e-9ede-example".into()
        ))
    );
    let sts = "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type>\
        <Code>InvalidIdentityToken</Code><Message>No OpenIDConnect provider found</Message></Error>\
        <RequestId>r-2</RequestId></ErrorResponse>";
    assert_eq!(
        error_document(sts),
        Some((
            "InvalidIdentityToken".into(),
            "No OpenIDConnect provider found".into(),
            "r-2".into()
        ))
    );
    assert_eq!(error_document("<html>500</html>"), None);
    assert_eq!(error_document("<Response><Errors><Error>"), None);
    assert_eq!(error_document(""), None);
}

#[test]
fn every_truncation_is_an_error_never_a_panic() {
    let full = doc(
        "DescribeNetworkInterfaces",
        &format!("<networkInterfaceSet>{ENI}</networkInterfaceSet><nextToken>n</nextToken>"),
    );
    assert!(network_interfaces(&full).is_ok());
    for end in (0..full.len()).filter(|&i| full.is_char_boundary(i)) {
        let cut = &full[..end];
        assert!(
            network_interfaces(cut).is_err(),
            "a document cut at {end} was accepted"
        );
        let _ = error_document(cut);
    }
}
