//! Native devices: where pod traffic leaves and enters the node. `attach_netdev` records the
//! device and its masquerade addresses in the native-devices map and attaches `to_netdev`
//! (egress) and `from_netdev` (ingress) with the same attach code as `from_container` (TCX
//! links pinned under `links/<program>/<dev>`, or netlink filters).

use std::net::{Ipv4Addr, Ipv6Addr};

use agent_common::{
    NetdevInfo, maps,
    nat::{NETDEV_F_MASQ_V4, NETDEV_F_MASQ_V6},
};
use aya::maps::{HashMap, MapData, MapError};
use serde::Serialize;

use super::{
    Datapath, DatapathError,
    attach::{FROM_NETDEV, TO_NETDEV},
    endpoints::{is_not_found, map_err},
};

/// Masquerade addresses of a native device (`None`: that family is not masqueraded there).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetdevConfig {
    /// IPv4 address pod traffic leaving through the device is masqueraded to.
    pub masq_v4: Option<Ipv4Addr>,
    /// IPv6 address pod traffic leaving through the device is masqueraded to.
    pub masq_v6: Option<Ipv6Addr>,
}

impl NetdevConfig {
    fn info(self) -> NetdevInfo {
        let mut flags = 0;
        if self.masq_v4.is_some() {
            flags |= NETDEV_F_MASQ_V4;
        }
        if self.masq_v6.is_some() {
            flags |= NETDEV_F_MASQ_V6;
        }
        NetdevInfo {
            masq_v4: self.masq_v4.unwrap_or(Ipv4Addr::UNSPECIFIED).octets(),
            masq_v6: self.masq_v6.unwrap_or(Ipv6Addr::UNSPECIFIED).octets(),
            flags,
        }
    }
}

/// One native device, as the CLI prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NetdevRow {
    /// ifindex.
    pub ifindex: u32,
    /// Name, if the device still exists.
    pub ifname: Option<String>,
    /// IPv4 masquerade address.
    pub masq_v4: Option<Ipv4Addr>,
    /// IPv6 masquerade address.
    pub masq_v6: Option<Ipv6Addr>,
}

impl Datapath {
    fn netdevs(&mut self) -> Result<HashMap<&mut MapData, u32, NetdevInfo>, DatapathError> {
        self.hash_map(maps::NETDEVS)
    }

    /// Make `ifname` a native device: record its masquerade addresses, then attach
    /// `to_netdev` (egress) and `from_netdev` (ingress). Idempotent; a second call updates the
    /// addresses.
    ///
    /// # Errors
    /// The device does not exist, or a map write or attachment failed.
    pub fn attach_netdev(
        &mut self,
        ifname: &str,
        config: &NetdevConfig,
    ) -> Result<(), DatapathError> {
        let ifindex =
            nix::net::if_::if_nametoindex(ifname).map_err(|source| DatapathError::NoDevice {
                ifname: ifname.to_owned(),
                source,
            })?;
        self.upsert_netdev(ifindex, config)?;
        self.attach_hook(TO_NETDEV, ifname)?;
        self.attach_hook(FROM_NETDEV, ifname)
    }

    /// Detach both programs from `ifname` and forget it; `Ok(false)` if it was not attached.
    ///
    /// # Errors
    /// A pin, filter or map entry exists but cannot be removed.
    pub fn detach_netdev(&mut self, ifname: &str) -> Result<bool, DatapathError> {
        let egress = self.detach_hook(TO_NETDEV, ifname)?;
        let ingress = self.detach_hook(FROM_NETDEV, ifname)?;
        let mut known = false;
        if let Ok(ifindex) = nix::net::if_::if_nametoindex(ifname) {
            known = self.remove_netdev(ifindex)?;
        }
        Ok(egress || ingress || known)
    }

    /// Record native device `ifindex` without attaching anything (tests run the programs
    /// with `BPF_PROG_TEST_RUN` on `lo`).
    ///
    /// # Errors
    /// The map write failed.
    pub fn upsert_netdev(
        &mut self,
        ifindex: u32,
        config: &NetdevConfig,
    ) -> Result<(), DatapathError> {
        self.netdevs()?
            .insert(ifindex, config.info(), 0)
            .map_err(map_err(maps::NETDEVS, "inserting"))
    }

    fn remove_netdev(&mut self, ifindex: u32) -> Result<bool, DatapathError> {
        match self.netdevs()?.remove(&ifindex) {
            Ok(()) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(source) => Err(DatapathError::Map {
                map: maps::NETDEVS,
                action: "removing",
                source: Box::new(source),
            }),
        }
    }

    /// ifindexes of every native device.
    ///
    /// # Errors
    /// Iterating the map failed.
    pub fn netdev_indexes(&mut self) -> Result<Vec<u32>, DatapathError> {
        self.netdevs()?
            .keys()
            .collect::<Result<Vec<u32>, MapError>>()
            .map_err(map_err(maps::NETDEVS, "iterating"))
    }

    /// Every native device with its masquerade addresses, by ifindex.
    ///
    /// # Errors
    /// Iterating the map failed.
    pub fn list_netdevs(&mut self) -> Result<Vec<NetdevRow>, DatapathError> {
        let mut rows = Vec::new();
        for entry in &self.netdevs()? {
            let (ifindex, info) = entry.map_err(map_err(maps::NETDEVS, "iterating"))?;
            rows.push(NetdevRow {
                ifindex,
                ifname: nix::net::if_::if_indextoname(ifindex)
                    .ok()
                    .map(|n| n.to_string_lossy().into_owned()),
                masq_v4: (info.flags & NETDEV_F_MASQ_V4 != 0).then(|| info.masq_v4.into()),
                masq_v6: (info.flags & NETDEV_F_MASQ_V6 != 0).then(|| info.masq_v6.into()),
            });
        }
        rows.sort_by_key(|r| r.ifindex);
        Ok(rows)
    }
}
