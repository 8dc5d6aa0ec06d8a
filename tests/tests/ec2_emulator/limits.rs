//! Instance-type limits from the scenario's catalogue and the rules of attaching: the
//! interface count (`AttachmentLimitExceeded`), a taken device index (`InvalidParameterValue`
//! "… interface attached at device …", what Cilium retries on), addresses per interface with the
//! primary and every /28 counted (`PrivateIpAddressLimitExceeded`), a stopped instance
//! (`IncorrectInstanceState` "… is not 'running'"), another AZ, an ENI already in use.

use weft_tests::ec2::{
    EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, EXAMPLE_POD_SUBNET, EXAMPLE_VPC, Scenario, Tags,
};

use super::{attach, create_eni, start, start_with};

#[test]
fn an_m5_large_takes_three_interfaces_and_refuses_a_fourth() {
    let (e, c) = start();
    let first = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    let second = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    let third = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    let attachment = attach(&c, &first, EXAMPLE_INSTANCE, 1)
        .expect(200)
        .one("attachmentId");
    assert!(attachment.starts_with("eni-attach-"), "{attachment}");

    let conflict =
        attach(&c, &second, EXAMPLE_INSTANCE, 1).expect_error(400, "InvalidParameterValue");
    assert!(
        conflict.text().contains("interface attached at device"),
        "Cilium matches this text: {}",
        conflict.text()
    );
    attach(&c, &second, EXAMPLE_INSTANCE, 2).expect(200);
    let full = attach(&c, &third, EXAMPLE_INSTANCE, 3).expect_error(400, "AttachmentLimitExceeded");
    assert!(full.text().contains("m5.large"), "{}", full.text());

    let devices: Vec<u32> = e
        .instance_enis(EXAMPLE_INSTANCE)
        .iter()
        .filter_map(|n| n.attachment.as_ref().map(|a| a.device_index))
        .collect();
    assert_eq!(devices, [0, 1, 2]);
    let described = c
        .call(
            "DescribeNetworkInterfaces",
            &[
                ("Filter.1.Name", "attachment.instance-id"),
                ("Filter.1.Value.1", EXAMPLE_INSTANCE),
            ],
        )
        .expect(200);
    let mut devices = described.all("deviceIndex");
    devices.sort();
    assert_eq!(
        devices,
        ["0", "1", "2"],
        "attachments are visible to Describe"
    );
    let status = c
        .call(
            "DescribeNetworkInterfaces",
            &[("NetworkInterfaceId.1", &third)],
        )
        .expect(200)
        .one("status");
    assert_eq!(status, "available", "the refused ENI stays detached");
}

#[test]
fn an_m4_large_takes_two_and_an_index_past_the_count_is_refused() {
    let s = Scenario::example().instance(
        "i-0b000000000000001",
        "m4.large",
        EXAMPLE_NODE_SUBNET,
        Tags::new(),
    );
    let (_e, c) = start_with(s);
    let a = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    attach(&c, &a, "i-0b000000000000001", 2).expect_error(400, "AttachmentLimitExceeded");
    attach(&c, &a, "i-0b000000000000001", 1).expect(200);
    let b = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    attach(&c, &b, "i-0b000000000000001", 2).expect_error(400, "AttachmentLimitExceeded");
}

#[test]
fn addresses_per_interface_count_the_primary_and_each_prefix() {
    let (e, c) = start_with(with_big_subnet());
    let primary = e.instance_enis(EXAMPLE_INSTANCE)[0].id.clone();
    // m5.large: 10 per interface; the primary address holds one.
    let r = c
        .call(
            "AssignPrivateIpAddresses",
            &[
                ("NetworkInterfaceId", &primary),
                ("SecondaryPrivateIpAddressCount", "9"),
            ],
        )
        .expect(200);
    assert_eq!(
        r.all("privateIpAddress").len(),
        9,
        "only the new addresses are listed"
    );
    let over = c
        .call(
            "AssignPrivateIpAddresses",
            &[
                ("NetworkInterfaceId", &primary),
                ("SecondaryPrivateIpAddressCount", "1"),
            ],
        )
        .expect_error(400, "PrivateIpAddressLimitExceeded");
    assert!(over.text().contains(&primary), "{}", over.text());

    // A new ENI with 8 prefixes + its primary = 9 slots; a second /28 assign makes 10, a
    // third 11.
    let eni = create_eni(&c, "subnet-0c000000000000001", &[("Ipv4PrefixCount", "8")]);
    attach(&c, &eni, EXAMPLE_INSTANCE, 1).expect(200);
    c.call(
        "AssignPrivateIpAddresses",
        &[("NetworkInterfaceId", &eni), ("Ipv4PrefixCount", "1")],
    )
    .expect(200);
    c.call(
        "AssignPrivateIpAddresses",
        &[("NetworkInterfaceId", &eni), ("Ipv4PrefixCount", "1")],
    )
    .expect_error(400, "PrivateIpAddressLimitExceeded");
    c.call(
        "AssignPrivateIpAddresses",
        &[
            ("NetworkInterfaceId", &eni),
            ("SecondaryPrivateIpAddressCount", "1"),
        ],
    )
    .expect_error(400, "PrivateIpAddressLimitExceeded");
}

/// The example plus a /22 in the same AZ for prefix tests.
fn with_big_subnet() -> Scenario {
    Scenario::example().subnet(
        "subnet-0c000000000000001",
        EXAMPLE_VPC,
        "10.0.4.0/22",
        "us-east-1a",
        Tags::new(),
    )
}

#[test]
fn an_eni_with_more_addresses_than_the_type_allows_cannot_be_attached() {
    let (_e, c) = start();
    let eni = create_eni(
        &c,
        EXAMPLE_POD_SUBNET,
        &[("SecondaryPrivateIpAddressCount", "10")],
    );
    attach(&c, &eni, EXAMPLE_INSTANCE, 1).expect_error(400, "PrivateIpAddressLimitExceeded");
}

#[test]
fn a_stopped_instance_another_az_and_an_eni_in_use_are_refused() {
    let s = with_big_subnet()
        .subnet(
            "subnet-0d000000000000001",
            EXAMPLE_VPC,
            "10.0.8.0/24",
            "us-east-1b",
            Tags::new(),
        )
        .instance(
            "i-0b000000000000002",
            "m5.large",
            EXAMPLE_NODE_SUBNET,
            Tags::new(),
        )
        .with_instance(|i| i.running = false);
    let (e, c) = start_with(s);
    let eni = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    let stopped =
        attach(&c, &eni, "i-0b000000000000002", 1).expect_error(400, "IncorrectInstanceState");
    assert!(
        stopped.text().contains("is not 'running'"),
        "Cilium matches this text: {}",
        stopped.text()
    );
    e.set_running("i-0b000000000000002", true)
        .expect("known instance");
    attach(&c, &eni, "i-0b000000000000002", 1).expect(200);
    attach(&c, &eni, EXAMPLE_INSTANCE, 1).expect_error(400, "InvalidNetworkInterface.InUse");

    let far = create_eni(&c, "subnet-0d000000000000001", &[]);
    let az = attach(&c, &far, EXAMPLE_INSTANCE, 1).expect_error(400, "InvalidParameterValue");
    assert!(az.text().contains("availability zones"), "{}", az.text());
}
