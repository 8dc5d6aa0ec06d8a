//! The VXLAN tunnel device: `ip link add weft_vxlan mtu <M> type vxlan external dstport
//! <port>` (collect-metadata: no VNI, remote or FDB of its own; each packet carries its tunnel
//! key), without ARP (nothing resolves neighbours over it: the eBPF side and the routes give
//! each packet its destination node). Named apart from Cilium's `cilium_vxlan`, so cleanup
//! never deletes Cilium's device.

use rtnetlink::{
    LinkVxlan,
    packet_route::link::{InfoData, InfoVxlan, LinkAttribute, LinkInfo, LinkMessage},
};

/// The device's name.
pub(super) const DEVICE: &str = "weft_vxlan";

/// The `RTM_NEWLINK` that makes the device.
pub(super) fn message(port: u16, mtu: u32) -> LinkMessage {
    LinkVxlan::new(DEVICE, 0)
        .append_info_data(InfoVxlan::CollectMetadata(true))
        .append_info_data(InfoVxlan::Port(port))
        .append_info_data(InfoVxlan::Learning(false))
        .mtu(mtu)
        .arp(false)
        .up()
        .build()
}

/// Whether `link` is a collect-metadata VXLAN device on `port`.
pub(super) fn matches(link: &LinkMessage, port: u16) -> bool {
    let Some(data) = link.attributes.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos.iter().find_map(|i| match i {
            LinkInfo::Data(InfoData::Vxlan(data)) => Some(data),
            _ => None,
        }),
        _ => None,
    }) else {
        return false;
    };
    data.contains(&InfoVxlan::CollectMetadata(true)) && data.contains(&InfoVxlan::Port(port))
}
