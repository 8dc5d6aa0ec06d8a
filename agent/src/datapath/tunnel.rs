//! The eBPF side of tunnel routing: the tunnel map's one slot (the device `from_container`
//! redirects encapsulated packets to) and `from_overlay` on the device's tc ingress. The
//! device itself is made over rtnetlink (`netlink::tunnel`); this module touches neither it
//! nor any route.

use agent_common::{TunnelInfo, maps};
use aya::maps::Array;

use super::{Datapath, DatapathError, attach::FROM_OVERLAY, endpoints::map_err};

impl Datapath {
    fn tunnel_map(&mut self) -> Result<Array<&mut aya::maps::MapData, TunnelInfo>, DatapathError> {
        let name = maps::TUNNEL;
        let map = self
            .ebpf
            .map_mut(name)
            .ok_or(DatapathError::Missing { kind: "map", name })?;
        Array::try_from(map).map_err(map_err(name, "opening"))
    }

    /// Make `ifname` (ifindex `ifindex`) the tunnel device: attach `from_overlay` to its
    /// ingress, then record it, so pods encapsulate only once it delivers. Idempotent.
    ///
    /// # Errors
    /// The attachment or the map write failed.
    pub fn attach_tunnel(&mut self, ifname: &str, ifindex: u32) -> Result<(), DatapathError> {
        self.attach_hook(FROM_OVERLAY, ifname)?;
        self.tunnel_map()?
            .set(0, TunnelInfo { ifindex, flags: 0 }, 0)
            .map_err(map_err(maps::TUNNEL, "writing"))
    }

    /// Stop encapsulating (native routing): clear the tunnel map and detach `from_overlay`
    /// from `ifname` if it is attached. Whether anything was recorded.
    ///
    /// # Errors
    /// The map write or the detach failed.
    pub fn detach_tunnel(&mut self, ifname: &str) -> Result<bool, DatapathError> {
        let was = self.tunnel_ifindex()?;
        self.tunnel_map()?
            .set(0, TunnelInfo::default(), 0)
            .map_err(map_err(maps::TUNNEL, "writing"))?;
        let detached = self.detach_hook(FROM_OVERLAY, ifname)?;
        Ok(was.is_some() || detached)
    }

    /// The tunnel device's ifindex as recorded (`None`: native routing).
    ///
    /// # Errors
    /// Reading the map failed.
    pub fn tunnel_ifindex(&mut self) -> Result<Option<u32>, DatapathError> {
        let info = self
            .tunnel_map()?
            .get(&0, 0)
            .map_err(map_err(maps::TUNNEL, "reading"))?;
        Ok((info.ifindex != 0).then_some(info.ifindex))
    }
}
