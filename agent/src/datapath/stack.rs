//! Typed access to the stack-flows map (`agent_common::stack`): pod sockets with a flow through
//! the host stack, whose flows to local pods take the stack too. The datapath records and ages
//! them (LRU); userspace lists them, and tests pre-fill them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use agent_common::{StackInfo, StackKey, maps, stack::STACK_FAMILY_IPV6};

use super::{Datapath, DatapathError, endpoints::map_err};

/// One recorded pod socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackFlow {
    /// The pod's address.
    pub addr: IpAddr,
    /// The pod's port.
    pub port: u16,
    /// IP protocol number.
    pub proto: u8,
    /// Where its first recorded flow through the stack went, as the pod addressed it.
    pub peer: IpAddr,
    /// That flow's destination port.
    pub peer_port: u16,
}

/// The key of `addr`'s socket `port`/`proto`.
#[must_use]
pub fn stack_key(addr: IpAddr, port: u16, proto: u8) -> StackKey {
    match addr {
        IpAddr::V4(v4) => StackKey::v4(v4.octets(), port, proto),
        IpAddr::V6(v6) => StackKey::v6(v6.octets(), port, proto),
    }
}

fn addr_of(family: u8, bytes: [u8; 16]) -> IpAddr {
    if family == STACK_FAMILY_IPV6 {
        IpAddr::V6(Ipv6Addr::from(bytes))
    } else {
        IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))
    }
}

impl Datapath {
    /// Record a pod socket as the datapath does (tests and tools).
    ///
    /// # Errors
    /// The write failed.
    pub fn upsert_stack_flow(&mut self, flow: &StackFlow) -> Result<(), DatapathError> {
        let peer = match flow.peer {
            IpAddr::V4(v4) => {
                let mut bytes = [0; 16];
                bytes[..4].copy_from_slice(&v4.octets());
                bytes
            }
            IpAddr::V6(v6) => v6.octets(),
        };
        let info = StackInfo {
            peer,
            peer_port: flow.peer_port,
            pad: [0; 2],
        };
        self.hash_insert(
            maps::STACK_FLOWS,
            &stack_key(flow.addr, flow.port, flow.proto),
            &info,
        )
    }

    /// Every recorded pod socket, in map order.
    ///
    /// # Errors
    /// Iterating the map failed.
    pub fn list_stack_flows(&mut self) -> Result<Vec<StackFlow>, DatapathError> {
        let map = self.hash_map::<StackKey, StackInfo>(maps::STACK_FLOWS)?;
        let mut flows = Vec::new();
        for entry in &map {
            let (key, info) = entry.map_err(map_err(maps::STACK_FLOWS, "iterating"))?;
            flows.push(StackFlow {
                addr: addr_of(key.family, key.addr),
                port: key.port,
                proto: key.proto,
                peer: addr_of(key.family, info.peer),
                peer_port: info.peer_port,
            });
        }
        Ok(flows)
    }
}

#[cfg(test)]
mod tests {
    use agent_common::stack::STACK_FAMILY_IPV4;

    use super::*;

    #[test]
    fn keys_of_both_families_round_trip_through_the_address_helper() {
        let v4: IpAddr = "10.77.0.11".parse().expect("ip");
        let key = stack_key(v4, 40000, 6);
        assert_eq!(key.family, STACK_FAMILY_IPV4);
        assert_eq!(addr_of(key.family, key.addr), v4);
        let v6: IpAddr = "fd00:77::11".parse().expect("ip");
        let key = stack_key(v6, 53, 17);
        assert_eq!(
            (key.family, key.port, key.proto),
            (STACK_FAMILY_IPV6, 53, 17)
        );
        assert_eq!(addr_of(key.family, key.addr), v6);
    }
}
