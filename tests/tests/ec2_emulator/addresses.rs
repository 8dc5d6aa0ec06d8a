//! Subnet address accounting as AWS keeps it: 5 addresses reserved per subnet, never a
//! duplicate, `availableIpAddressCount` following every change, `InsufficientFreeAddressesInSubnet`
//! when full; /28 prefixes aligned and wholly free with both capacity errors
//! (`InsufficientCidrBlocks` on create, `InvalidParameterValue` "There aren't sufficient free
//! Ipv4 addresses or prefixes" on assign); IPv6 /80 prefixes.

use std::{collections::BTreeSet, net::Ipv4Addr};

use weft_tests::ec2::{EXAMPLE_POD_SUBNET, EXAMPLE_VPC, Scenario, Tags};

use super::{Client, create_eni, start, start_with};

fn free(c: &Client, subnet: &str) -> u64 {
    c.call("DescribeSubnets", &[("SubnetId.1", subnet)])
        .expect(200)
        .one("availableIpAddressCount")
        .parse()
        .expect("a number")
}

fn eni_ips(c: &Client, eni: &str) -> Vec<Ipv4Addr> {
    let r = c
        .call(
            "DescribeNetworkInterfaces",
            &[("NetworkInterfaceId.1", eni)],
        )
        .expect(200);
    let text = r.text();
    let set = &text[text.find("<privateIpAddressesSet>").expect("the set")..];
    super::values(set, "privateIpAddress")
        .iter()
        .map(|ip| ip.parse().expect("an address"))
        .collect()
}

#[test]
fn a_subnet_hands_out_every_address_but_five_once_then_says_it_is_full() {
    let (e, c) = start();
    // 10.0.1.0/26: 64 − 5 = 59.
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 59);
    let a = create_eni(
        &c,
        EXAMPLE_POD_SUBNET,
        &[("SecondaryPrivateIpAddressCount", "49")],
    );
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 9);
    let b = create_eni(
        &c,
        EXAMPLE_POD_SUBNET,
        &[("SecondaryPrivateIpAddressCount", "8")],
    );
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 0);
    let full = c
        .call(
            "CreateNetworkInterface",
            &[("SubnetId", EXAMPLE_POD_SUBNET)],
        )
        .expect_error(400, "InsufficientFreeAddressesInSubnet");
    assert!(full.text().contains(EXAMPLE_POD_SUBNET), "{}", full.text());

    let mut all: Vec<Ipv4Addr> = eni_ips(&c, &a);
    all.extend(eni_ips(&c, &b));
    let unique: BTreeSet<Ipv4Addr> = all.iter().copied().collect();
    assert_eq!((all.len(), unique.len()), (59, 59), "no address twice");
    let reserved: Vec<Ipv4Addr> = ["10.0.1.0", "10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.63"]
        .iter()
        .map(|s| s.parse().expect("ip"))
        .collect();
    assert!(
        reserved.iter().all(|r| !unique.contains(r)),
        "reserved addresses handed out: {unique:?}"
    );

    c.call(
        "UnassignPrivateIpAddresses",
        &[
            ("NetworkInterfaceId", &b),
            ("PrivateIpAddress.1", &all[55].to_string()),
        ],
    )
    .expect(200);
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 1);
    c.call("DeleteNetworkInterface", &[("NetworkInterfaceId", &a)])
        .expect(200);
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 51);
    assert_eq!(e.subnet_free(EXAMPLE_POD_SUBNET), 51);
}

#[test]
fn assigning_past_the_free_count_fails_whole() {
    let (e, c) = start();
    let eni = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    e.fill_subnet(EXAMPLE_POD_SUBNET, 3);
    c.call(
        "AssignPrivateIpAddresses",
        &[
            ("NetworkInterfaceId", &eni),
            ("SecondaryPrivateIpAddressCount", "4"),
        ],
    )
    .expect_error(400, "InsufficientFreeAddressesInSubnet");
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 3, "nothing was taken");
    c.call(
        "AssignPrivateIpAddresses",
        &[
            ("NetworkInterfaceId", &eni),
            ("SecondaryPrivateIpAddressCount", "3"),
        ],
    )
    .expect(200);
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 0);
    e.release_subnet_fillers(EXAMPLE_POD_SUBNET);
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 59 - 4);
}

#[test]
fn prefixes_are_aligned_slash_28s_from_free_space_with_both_capacity_errors() {
    let (e, c) = start();
    // 10.0.1.0/26: .0/28 holds reserved .0–.3 and .48/28 the broadcast: .16/28 and .32/28.
    let eni = create_eni(&c, EXAMPLE_POD_SUBNET, &[("Ipv4PrefixCount", "1")]);
    let r = c
        .call(
            "DescribeNetworkInterfaces",
            &[("NetworkInterfaceId.1", &eni)],
        )
        .expect(200);
    assert_eq!(r.all("ipv4Prefix"), ["10.0.1.16/28"]);
    assert_eq!(r.one("privateIpAddress"), "10.0.1.4");
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 59 - 1 - 16);

    c.call(
        "CreateNetworkInterface",
        &[("SubnetId", EXAMPLE_POD_SUBNET), ("Ipv4PrefixCount", "2")],
    )
    .expect_error(400, "InsufficientCidrBlocks");
    assert_eq!(
        free(&c, EXAMPLE_POD_SUBNET),
        59 - 1 - 16,
        "a refused create takes nothing"
    );

    let r = c
        .call(
            "AssignPrivateIpAddresses",
            &[("NetworkInterfaceId", &eni), ("Ipv4PrefixCount", "1")],
        )
        .expect(200);
    assert_eq!(r.all("ipv4Prefix"), ["10.0.1.32/28"]);
    let none = c
        .call(
            "AssignPrivateIpAddresses",
            &[("NetworkInterfaceId", &eni), ("Ipv4PrefixCount", "1")],
        )
        .expect_error(400, "InvalidParameterValue");
    assert!(
        none.text()
            .contains("There aren't sufficient free Ipv4 addresses or prefixes"),
        "Cilium matches this text: {}",
        none.text()
    );
    // Free addresses remain (.5–.15, .48–.62) but no whole /28.
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 59 - 1 - 32);

    c.call(
        "UnassignPrivateIpAddresses",
        &[
            ("NetworkInterfaceId", &eni),
            ("Ipv4Prefix.1", "10.0.1.32/28"),
        ],
    )
    .expect(200);
    assert_eq!(free(&c, EXAMPLE_POD_SUBNET), 59 - 1 - 16);
    e.hold_address(EXAMPLE_POD_SUBNET, "10.0.1.40".parse().expect("ip"));
    c.call(
        "AssignPrivateIpAddresses",
        &[("NetworkInterfaceId", &eni), ("Ipv4PrefixCount", "1")],
    )
    .expect_error(400, "InvalidParameterValue");
}

#[test]
fn ipv6_prefixes_are_slash_80s_of_the_subnet_block() {
    let s = Scenario::example()
        .subnet(
            "subnet-0e000000000000001",
            EXAMPLE_VPC,
            "10.0.9.0/24",
            "us-east-1a",
            Tags::new(),
        )
        .with_ipv6("2600:1f18:1:2::/64");
    let (_e, c) = start_with(s);
    let eni = create_eni(&c, "subnet-0e000000000000001", &[("Ipv6PrefixCount", "1")]);
    let r = c
        .call(
            "AssignIpv6Addresses",
            &[("NetworkInterfaceId", &eni), ("Ipv6PrefixCount", "1")],
        )
        .expect(200);
    assert_eq!(r.all("ipv6Prefix"), ["2600:1f18:1:2:2::/80"]);
    let d = c
        .call(
            "DescribeNetworkInterfaces",
            &[("NetworkInterfaceId.1", &eni)],
        )
        .expect(200);
    assert_eq!(
        d.all("ipv6Prefix"),
        ["2600:1f18:1:2:1::/80", "2600:1f18:1:2:2::/80"]
    );

    let v4only = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    c.call(
        "AssignIpv6Addresses",
        &[("NetworkInterfaceId", &v4only), ("Ipv6PrefixCount", "1")],
    )
    .expect_error(400, "InvalidParameterValue");
}
