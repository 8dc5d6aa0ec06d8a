//! The IPv4 native-routing CIDR in force, applied on every sync: `ipam::native_routing` says
//! which (configured, or in eni/azure mode detected from the own CiliumNode's status) and
//! whether a configured one fits the VPC or subnet; here the masquerade exclusions follow it
//! (pods keep their address towards the VPC), the detection is logged when it changes, and a
//! configured CIDR that does not fit is logged once with Cilium's text (the configured one
//! stays in force; Cilium stops instead). A CIDR once detected stays while the status no
//! longer reports one.

use ipnet::Ipv4Net;
use tracing::{error, info};

use super::{State, netdev::reload_masq};
use crate::{
    crd::node::CiliumNode,
    ipam::{
        input::NodeInput,
        mode::IpamMode,
        native_routing::{self, NativeRouting},
    },
    masq::Masquerade,
};

/// Bring the masquerade exclusions' native-routing CIDR in line with the own CiliumNode.
pub(super) fn sync(
    state: &mut State,
    mode: IpamMode,
    configured: Option<Ipv4Net>,
    node: Option<&CiliumNode>,
) {
    let Some(node) = node else {
        return;
    };
    let (routing, mismatch) = native_routing::ipv4(mode, configured, &NodeInput::from(node));
    if let Some(mismatch) = mismatch
        && state
            .reported_overlaps
            .insert(format!("native routing: {mismatch}"))
    {
        error!(%mismatch, "ipv4-native-routing-cidr does not fit the cloud's network; it stays in force");
    }
    if routing == NativeRouting::None {
        return;
    }
    let Some(masq) = state.net.masq.as_ref() else {
        return;
    };
    if masq.config().native_routing_cidr_v4 == routing.cidr() {
        return;
    }
    if let NativeRouting::Detected(cidr) = routing {
        info!(%cidr, %mode, "ipv4-native-routing-cidr detected from the CiliumNode's status");
    }
    let mut config = masq.config().clone();
    config.native_routing_cidr_v4 = routing.cidr();
    state.net.masq = Some(Masquerade::new(config));
    reload_masq(state);
}
