//! `delegated-plugin`: another plugin allocates; every allocation and restore of the agent
//! fails with Cilium's `Operation not supported`, and nothing is written back.

use std::{net::IpAddr, time::Instant};

use super::{
    Failure, IpamConfig, IpamError, IpamUsage,
    backend::{Backend, Handed, Request},
};
use crate::{
    crd::ipam::NodeIpamWrite,
    ipam::{
        Family, Random,
        input::{NodeInput, NodeOutput},
    },
};

/// No allocator.
#[derive(Debug, Default)]
pub(super) struct Delegated;

impl Backend for Delegated {
    fn observe_node(&mut self, _node: &NodeInput, _config: &IpamConfig) {}

    fn ready(&self, _config: &IpamConfig) -> Result<(), IpamError> {
        Err(Failure::NotSupported.into())
    }

    fn allocate(
        &mut self,
        _request: &Request<'_>,
        _rng: &mut dyn Random,
        _now: Instant,
    ) -> Result<Handed, IpamError> {
        Err(Failure::NotSupported.into())
    }

    fn restore(
        &mut self,
        _ip: IpAddr,
        _owner: &str,
        _pool: &str,
        _now: Instant,
    ) -> Result<(), IpamError> {
        Err(Failure::NotSupported.into())
    }

    fn release(&mut self, _ip: IpAddr, _pool: &str) {}

    fn node_write(&mut self, _node: &NodeOutput, _now: Instant) -> NodeIpamWrite {
        NodeIpamWrite::default()
    }

    fn status(&self) -> String {
        "delegated to plugin".to_owned()
    }

    fn usage(&mut self, _families: &[Family], _default_pool: &str, _now: Instant) -> IpamUsage {
        IpamUsage {
            status: self.status(),
            ..IpamUsage::default()
        }
    }
}
