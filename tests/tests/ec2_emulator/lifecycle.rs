//! An ENI's life as the operator drives it: created with description, groups and tags (and
//! once only per `ClientToken`), attached, marked delete-on-termination, never deleted while
//! attached, its primary address never unassigned, deleted or detached with its instance;
//! Elastic IPs found by tag and associated once.

use weft_tests::ec2::{EXAMPLE_INSTANCE, EXAMPLE_POD_SUBNET, EXAMPLE_SG};

use super::{attach, create_eni, start};

#[test]
fn create_answers_the_whole_eni_and_client_tokens_make_it_once() {
    let (e, c) = start();
    let params = [
        ("SubnetId", EXAMPLE_POD_SUBNET),
        ("Description", "Cilium-CNI (i-0a000000000000001)"),
        ("SecurityGroupId.1", EXAMPLE_SG),
        ("SecondaryPrivateIpAddressCount", "2"),
        ("TagSpecification.1.ResourceType", "network-interface"),
        ("TagSpecification.1.Tag.1.Key", "io.cilium/cluster-name"),
        ("TagSpecification.1.Tag.1.Value", "weft"),
        ("ClientToken", "weft-token-1"),
    ];
    let r = c.call("CreateNetworkInterface", &params).expect(200);
    let id = r.one("networkInterfaceId");
    assert_eq!(r.one("description"), "Cilium-CNI (i-0a000000000000001)");
    assert_eq!(r.one("groupId"), EXAMPLE_SG);
    assert_eq!(r.one("status"), "available");
    assert_eq!(r.one("subnetId"), EXAMPLE_POD_SUBNET);
    assert_eq!(r.one("vpcId"), weft_tests::ec2::EXAMPLE_VPC);
    assert_eq!(
        (r.one("key"), r.one("value")),
        ("io.cilium/cluster-name".to_owned(), "weft".to_owned())
    );
    assert_eq!(r.all("primary"), ["true", "false", "false"]);
    assert_eq!(r.one("clientToken"), "weft-token-1");
    assert!(r.one("macAddress").starts_with("02:"), "{}", r.text());

    let again = c.call("CreateNetworkInterface", &params).expect(200);
    assert_eq!(
        again.one("networkInterfaceId"),
        id,
        "the same token answers the same ENI"
    );
    assert_eq!(e.enis().len(), 2, "the primary and one created");
    let mut changed = params.to_vec();
    changed[3] = ("SecondaryPrivateIpAddressCount", "3");
    c.call("CreateNetworkInterface", &changed)
        .expect_error(400, "IdempotentParameterMismatch");
}

#[test]
fn attached_enis_and_primary_addresses_are_protected() {
    let (e, c) = start();
    let eni = create_eni(
        &c,
        EXAMPLE_POD_SUBNET,
        &[("SecondaryPrivateIpAddressCount", "1")],
    );
    attach(&c, &eni, EXAMPLE_INSTANCE, 1).expect(200);
    let in_use = c
        .call("DeleteNetworkInterface", &[("NetworkInterfaceId", &eni)])
        .expect_error(400, "InvalidParameterValue");
    assert!(
        in_use.text().contains("currently in use"),
        "{}",
        in_use.text()
    );

    let ips = e.eni(&eni).expect("exists").ips;
    let primary = c
        .call(
            "UnassignPrivateIpAddresses",
            &[
                ("NetworkInterfaceId", &eni),
                ("PrivateIpAddress.1", &ips[0].to_string()),
            ],
        )
        .expect_error(400, "InvalidParameterValue");
    assert!(primary.text().contains("primary"), "{}", primary.text());
    c.call(
        "UnassignPrivateIpAddresses",
        &[
            ("NetworkInterfaceId", &eni),
            ("PrivateIpAddress.1", "10.0.1.60"),
        ],
    )
    .expect_error(400, "InvalidParameterValue");
    c.call(
        "UnassignPrivateIpAddresses",
        &[
            ("NetworkInterfaceId", &eni),
            ("PrivateIpAddress.1", &ips[1].to_string()),
        ],
    )
    .expect(200);
    assert_eq!(e.eni(&eni).expect("exists").ips, [ips[0]]);
}

#[test]
fn delete_on_termination_decides_what_outlives_the_instance() {
    let (e, c) = start();
    let kept = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    let gone = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    attach(&c, &kept, EXAMPLE_INSTANCE, 1).expect(200);
    let attachment = attach(&c, &gone, EXAMPLE_INSTANCE, 2)
        .expect(200)
        .one("attachmentId");
    c.call(
        "ModifyNetworkInterfaceAttribute",
        &[
            ("NetworkInterfaceId", &gone),
            ("Attachment.AttachmentId", &attachment),
            ("Attachment.DeleteOnTermination", "true"),
        ],
    )
    .expect(200);
    c.call(
        "ModifyNetworkInterfaceAttribute",
        &[
            ("NetworkInterfaceId", &kept),
            ("Attachment.AttachmentId", &attachment),
            ("Attachment.DeleteOnTermination", "true"),
        ],
    )
    .expect_error(400, "InvalidAttachmentID.NotFound");
    let described = c
        .call(
            "DescribeNetworkInterfaces",
            &[("NetworkInterfaceId.1", &gone)],
        )
        .expect(200);
    assert_eq!(described.one("deleteOnTermination"), "true");
    let before = e.subnet_free(EXAMPLE_POD_SUBNET);

    e.terminate_instance(EXAMPLE_INSTANCE)
        .expect("known instance");
    assert!(e.eni(&gone).is_none(), "deleted with the instance");
    let left = c
        .call(
            "DescribeNetworkInterfaces",
            &[
                ("Filter.1.Name", "status"),
                ("Filter.1.Value.1", "available"),
            ],
        )
        .expect(200);
    assert_eq!(
        left.all("networkInterfaceId"),
        [kept],
        "the other is detached, not deleted"
    );
    assert_eq!(e.subnet_free(EXAMPLE_POD_SUBNET), before + 1);
    let none = c
        .call(
            "DescribeNetworkInterfaces",
            &[
                ("Filter.1.Name", "attachment.instance-id"),
                ("Filter.1.Value.1", EXAMPLE_INSTANCE),
            ],
        )
        .expect(200);
    assert!(
        none.all("networkInterfaceId").is_empty(),
        "a gone instance has no ENIs"
    );
}

#[test]
fn elastic_ips_are_found_by_tag_and_associated_once() {
    let (e, c) = start();
    let primary = e.instance_enis(EXAMPLE_INSTANCE)[0].id.clone();
    let found = c
        .call(
            "DescribeAddresses",
            &[
                ("Filter.1.Name", "tag:weft"),
                ("Filter.1.Value.1", "egress"),
            ],
        )
        .expect(200);
    assert_eq!(found.all("allocationId"), ["eipalloc-0a000000000000001"]);
    assert!(found.all("associationId").is_empty());
    let assoc = c
        .call(
            "AssociateAddress",
            &[
                ("AllocationId", "eipalloc-0a000000000000001"),
                ("NetworkInterfaceId", &primary),
                ("AllowReassociation", "false"),
            ],
        )
        .expect(200)
        .one("associationId");
    let eni = c
        .call(
            "DescribeNetworkInterfaces",
            &[("NetworkInterfaceId.1", &primary)],
        )
        .expect(200);
    assert_eq!(eni.one("publicIp"), "203.0.113.10");
    let listed = c.call("DescribeAddresses", &[]).expect(200);
    assert_eq!(listed.all("associationId"), [assoc]);
    c.call(
        "AssociateAddress",
        &[
            ("AllocationId", "eipalloc-0a000000000000001"),
            ("NetworkInterfaceId", &primary),
            ("AllowReassociation", "false"),
        ],
    )
    .expect_error(400, "Resource.AlreadyAssociated");
}

#[test]
fn create_tags_tags_every_resource_or_none() {
    let (e, c) = start();
    let eni = create_eni(&c, EXAMPLE_POD_SUBNET, &[]);
    c.call(
        "CreateTags",
        &[
            ("ResourceId.1", &eni),
            ("ResourceId.2", "eni-00000000000000bad"),
            ("Tag.1.Key", "k"),
            ("Tag.1.Value", "v"),
        ],
    )
    .expect_error(400, "InvalidID");
    assert!(
        e.eni(&eni).expect("exists").tags.is_empty(),
        "a refused request changes nothing"
    );
    c.call(
        "CreateTags",
        &[
            ("ResourceId.1", &eni),
            ("ResourceId.2", EXAMPLE_INSTANCE),
            ("Tag.1.Key", "k"),
            ("Tag.1.Value", "v"),
        ],
    )
    .expect(200);
    let tagged = c
        .call(
            "DescribeTags",
            &[("Filter.1.Name", "key"), ("Filter.1.Value.1", "k")],
        )
        .expect(200);
    assert_eq!(
        tagged.all("resourceType"),
        ["instance", "network-interface"]
    );
}
