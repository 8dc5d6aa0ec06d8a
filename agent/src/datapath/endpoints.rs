//! Typed access to the endpoints, interfaces and counters maps. Addresses go in as `IpAddr`
//! and are encoded with the family-tagged `EndpointKey` of agent-common.

use std::net::IpAddr;

use agent_common::{Counter, EndpointInfo, EndpointKey, IfaceInfo, MacAddr, maps, reason};
use aya::{
    Pod,
    maps::{HashMap, MapData, MapError, PerCpuArray},
};
use serde::Serialize;

use super::{Datapath, DatapathError};

/// One endpoints-map entry, as the CLI prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EndpointRow {
    /// Pod address.
    pub ip: IpAddr,
    /// Host-side veth ifindex.
    pub ifindex: u32,
    /// Pod MAC.
    pub pod_mac: String,
    /// Host-side veth MAC (the pod's gateway MAC).
    pub node_mac: String,
    /// Security identity.
    pub identity: u32,
    /// IP pool id.
    pub pool_id: u32,
    /// `ENDPOINT_F_*` bits.
    pub flags: u32,
}

/// Counter totals of one reason, summed over CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CounterRow {
    /// Reason name (`agent_common::reason::name`).
    pub reason: &'static str,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

/// The endpoints-map key of `ip`.
#[must_use]
pub fn key_of(ip: IpAddr) -> EndpointKey {
    match ip {
        IpAddr::V4(v4) => EndpointKey::v4(v4.octets()),
        IpAddr::V6(v6) => EndpointKey::v6(v6.octets()),
    }
}

fn ip_of(key: &EndpointKey) -> Option<IpAddr> {
    match key.family {
        agent_common::endpoint::FAMILY_IPV4 => {
            Some(IpAddr::from([key.ip[0], key.ip[1], key.ip[2], key.ip[3]]))
        }
        agent_common::endpoint::FAMILY_IPV6 => Some(IpAddr::from(key.ip)),
        _ => None,
    }
}

/// `aa:bb:cc:dd:ee:ff`.
#[must_use]
pub fn format_mac(mac: MacAddr) -> String {
    mac.map(|b| format!("{b:02x}")).join(":")
}

/// The MAC address `aa:bb:cc:dd:ee:ff` (as [`format_mac`] writes it), if it is one.
#[must_use]
pub fn parse_mac(text: &str) -> Option<MacAddr> {
    let mut mac = [0; 6];
    let mut parts = text.split(':');
    for byte in &mut mac {
        let part = parts.next()?;
        if part.len() != 2 {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Does `error` mean "no such key" (aya reports it either way, depending on the call)?
pub(super) fn is_not_found(error: &MapError) -> bool {
    match error {
        MapError::KeyNotFound => true,
        MapError::SyscallError(e) => e.io_error.raw_os_error() == Some(libc::ENOENT),
        _ => false,
    }
}

/// Wrap a map error with the map's name and what was attempted.
pub(super) fn map_err(
    map: &'static str,
    action: &'static str,
) -> impl FnOnce(MapError) -> DatapathError {
    move |source| DatapathError::Map {
        map,
        action,
        source: Box::new(source),
    }
}

impl Datapath {
    /// The loaded hash (or LRU hash) map `name`, typed.
    pub(super) fn hash_map<K: Pod, V: Pod>(
        &mut self,
        name: &'static str,
    ) -> Result<HashMap<&mut MapData, K, V>, DatapathError> {
        let map = self
            .ebpf
            .map_mut(name)
            .ok_or(DatapathError::Missing { kind: "map", name })?;
        HashMap::try_from(map).map_err(map_err(name, "opening"))
    }

    /// Insert or replace `key` → `value` in hash map `name`.
    pub(super) fn hash_insert<K: Pod, V: Pod>(
        &mut self,
        name: &'static str,
        key: &K,
        value: &V,
    ) -> Result<(), DatapathError> {
        self.hash_map::<K, V>(name)?
            .insert(key, value, 0)
            .map_err(map_err(name, "inserting"))
    }

    /// The value of `key` in hash map `name`, `None` on a miss.
    pub(super) fn hash_get<K: Pod, V: Pod>(
        &mut self,
        name: &'static str,
        key: &K,
    ) -> Result<Option<V>, DatapathError> {
        match self.hash_map::<K, V>(name)?.get(key, 0) {
            Ok(value) => Ok(Some(value)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(source) => Err(map_err(name, "looking up")(source)),
        }
    }

    fn endpoints(
        &mut self,
    ) -> Result<HashMap<&mut MapData, EndpointKey, EndpointInfo>, DatapathError> {
        self.hash_map(maps::ENDPOINTS)
    }

    fn ifaces(&mut self) -> Result<HashMap<&mut MapData, u32, IfaceInfo>, DatapathError> {
        self.hash_map(maps::IFACES)
    }

    /// Insert or replace the endpoint for `ip`.
    ///
    /// # Errors
    /// The map is full or the write failed.
    pub fn upsert_endpoint(
        &mut self,
        ip: IpAddr,
        info: &EndpointInfo,
    ) -> Result<(), DatapathError> {
        self.endpoints()?
            .insert(key_of(ip), info, 0)
            .map_err(|source| match &source {
                MapError::SyscallError(e) if e.io_error.raw_os_error() == Some(libc::E2BIG) => {
                    DatapathError::Full { ip }
                }
                _ => DatapathError::Map {
                    map: maps::ENDPOINTS,
                    action: "inserting",
                    source: Box::new(source),
                },
            })
    }

    /// Give the local endpoint at `ip` the security identity `identity`, in the endpoints map
    /// and its IPCache host entry; `Ok(false)` when there is no endpoint at `ip` or it already
    /// has that identity.
    ///
    /// # Errors
    /// Reading or writing a map failed.
    pub fn set_endpoint_identity(
        &mut self,
        ip: IpAddr,
        identity: u32,
    ) -> Result<bool, DatapathError> {
        let current = match self.endpoints()?.get(&key_of(ip), 0) {
            Ok(info) => info,
            Err(e) if is_not_found(&e) => return Ok(false),
            Err(source) => {
                return Err(DatapathError::Map {
                    map: maps::ENDPOINTS,
                    action: "reading",
                    source: Box::new(source),
                });
            }
        };
        if current.sec_identity == identity {
            return Ok(false);
        }
        let updated = EndpointInfo {
            sec_identity: identity,
            ..current
        };
        self.upsert_endpoint(ip, &updated)?;
        self.upsert_ipcache(
            super::ipcache::host_prefix(ip),
            &super::ipcache::IpcacheEntry::identity(identity),
        )?;
        Ok(true)
    }

    /// The endpoint at `ip`, if there is one.
    ///
    /// # Errors
    /// The read failed.
    pub fn endpoint(&mut self, ip: IpAddr) -> Result<Option<EndpointInfo>, DatapathError> {
        self.hash_get(maps::ENDPOINTS, &key_of(ip))
    }

    /// Remove the endpoint for `ip`; `Ok(false)` if there was none (a no-op).
    ///
    /// # Errors
    /// The delete failed for another reason than a missing key.
    pub fn remove_endpoint(&mut self, ip: IpAddr) -> Result<bool, DatapathError> {
        match self.endpoints()?.remove(&key_of(ip)) {
            Ok(()) => Ok(true),
            Err(MapError::KeyNotFound) => Ok(false),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
                Ok(false)
            }
            Err(source) => Err(DatapathError::Map {
                map: maps::ENDPOINTS,
                action: "removing",
                source: Box::new(source),
            }),
        }
    }

    /// Every endpoint, sorted by address.
    ///
    /// # Errors
    /// Iterating the map failed.
    pub fn list_endpoints(&mut self) -> Result<Vec<EndpointRow>, DatapathError> {
        let mut rows = Vec::new();
        for entry in &self.endpoints()? {
            let (key, info) = entry.map_err(map_err(maps::ENDPOINTS, "iterating"))?;
            let Some(ip) = ip_of(&key) else { continue };
            rows.push(EndpointRow {
                ip,
                ifindex: info.ifindex,
                pod_mac: format_mac(info.pod_mac),
                node_mac: format_mac(info.node_mac),
                identity: info.sec_identity,
                pool_id: info.pool_id,
                flags: info.flags,
            });
        }
        rows.sort_by_key(|r| r.ip);
        Ok(rows)
    }

    /// Record the MAC of host-side veth `ifindex` (source of ARP/ND replies).
    ///
    /// # Errors
    /// The write failed.
    pub fn upsert_iface(&mut self, ifindex: u32, mac: MacAddr) -> Result<(), DatapathError> {
        let info = IfaceInfo {
            mac,
            pad: [0; 2],
            flags: 0,
        };
        self.ifaces()?
            .insert(ifindex, info, 0)
            .map_err(map_err(maps::IFACES, "inserting"))
    }

    /// The MAC recorded for host-side veth `ifindex`, if it has an entry.
    ///
    /// # Errors
    /// The read failed.
    pub fn iface_mac(&mut self, ifindex: u32) -> Result<Option<MacAddr>, DatapathError> {
        Ok(self
            .hash_get::<u32, IfaceInfo>(maps::IFACES, &ifindex)?
            .map(|info| info.mac))
    }

    /// Forget host-side veth `ifindex`; `Ok(false)` if unknown.
    ///
    /// # Errors
    /// The delete failed for another reason than a missing key.
    pub fn remove_iface(&mut self, ifindex: u32) -> Result<bool, DatapathError> {
        match self.ifaces()?.remove(&ifindex) {
            Ok(()) => Ok(true),
            Err(MapError::KeyNotFound) => Ok(false),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
                Ok(false)
            }
            Err(source) => Err(DatapathError::Map {
                map: maps::IFACES,
                action: "removing",
                source: Box::new(source),
            }),
        }
    }

    /// ifindexes of every interface in the interfaces map.
    ///
    /// # Errors
    /// Iterating the map failed.
    pub fn iface_indexes(&mut self) -> Result<Vec<u32>, DatapathError> {
        self.ifaces()?
            .keys()
            .collect::<Result<Vec<u32>, MapError>>()
            .map_err(|source| DatapathError::Map {
                map: maps::IFACES,
                action: "iterating",
                source: Box::new(source),
            })
    }

    /// Counter totals by reason, summed over CPUs.
    ///
    /// # Errors
    /// Reading the map failed.
    pub fn counters(&mut self) -> Result<Vec<CounterRow>, DatapathError> {
        let map = self
            .ebpf
            .map_mut(maps::COUNTERS)
            .ok_or(DatapathError::Missing {
                kind: "map",
                name: maps::COUNTERS,
            })?;
        let counters: PerCpuArray<&mut MapData, Counter> =
            PerCpuArray::try_from(map).map_err(map_err(maps::COUNTERS, "opening"))?;
        let mut rows = Vec::new();
        for why in 0..reason::COUNT {
            let per_cpu = counters
                .get(&why, 0)
                .map_err(map_err(maps::COUNTERS, "reading"))?;
            rows.push(CounterRow {
                reason: reason::name(why),
                packets: per_cpu.iter().map(|c| c.packets).sum(),
                bytes: per_cpu.iter().map(|c| c.bytes).sum(),
            });
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::{format_mac, parse_mac};

    #[test]
    fn macs_read_back_as_written() {
        let mac = [0x02, 0xab, 0x00, 0x10, 0xfe, 0x7f];
        assert_eq!(parse_mac(&format_mac(mac)), Some(mac));
        for bad in [
            "",
            "02:ab:00:10:fe",
            "02:ab:00:10:fe:7f:00",
            "02:ab:00:10:fe:zz",
            "2:ab:0:10:fe:7f",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad:?}");
        }
    }
}
