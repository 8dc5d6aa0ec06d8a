//! Readers of the agent's pinned maps under a pin directory (counters, endpoints, interfaces),
//! for checking the datapath after a runtime drove the plugin. Read-only: nothing here
//! updates or unpins a map.

use std::{collections::BTreeMap, net::IpAddr, path::Path};

use agent_common::{
    counters::Counter,
    endpoint::{EndpointInfo, EndpointKey, FAMILY_IPV4, FAMILY_IPV6},
    maps, reason,
};
use aya::maps::{HashMap as BpfHashMap, Map, MapData, PerCpuArray};

/// Packets per counter reason, read from the pinned counters map under `pin_dir`.
#[must_use]
pub fn pinned_counters(pin_dir: &Path) -> BTreeMap<&'static str, u64> {
    let counters: PerCpuArray<MapData, Counter> =
        PerCpuArray::try_from(pinned(pin_dir, maps::COUNTERS))
            .unwrap_or_else(|e| panic!("{}: {e}", maps::COUNTERS));
    (0..reason::COUNT)
        .map(|why| {
            let per_cpu = counters
                .get(&why, 0)
                .unwrap_or_else(|e| panic!("read counter {why}: {e}"));
            (reason::name(why), per_cpu.iter().map(|c| c.packets).sum())
        })
        .collect()
}

/// Every endpoint (IP → host veth ifindex) in the pinned endpoints map under `pin_dir`.
#[must_use]
pub fn pinned_endpoints(pin_dir: &Path) -> BTreeMap<IpAddr, u32> {
    let endpoints: BpfHashMap<MapData, EndpointKey, EndpointInfo> =
        BpfHashMap::try_from(pinned(pin_dir, maps::ENDPOINTS))
            .unwrap_or_else(|e| panic!("{}: {e}", maps::ENDPOINTS));
    endpoints
        .iter()
        .map(|entry| {
            let (key, info) = entry.unwrap_or_else(|e| panic!("iterate endpoints: {e}"));
            let ip = match key.family {
                FAMILY_IPV4 => IpAddr::from([key.ip[0], key.ip[1], key.ip[2], key.ip[3]]),
                FAMILY_IPV6 => IpAddr::from(key.ip),
                other => panic!("endpoint key with family {other}"),
            };
            (ip, info.ifindex)
        })
        .collect()
}

/// The ifindexes in the pinned interfaces map under `pin_dir`.
#[must_use]
pub fn pinned_ifaces(pin_dir: &Path) -> Vec<u32> {
    let ifaces: BpfHashMap<MapData, u32, agent_common::endpoint::IfaceInfo> =
        BpfHashMap::try_from(pinned(pin_dir, maps::IFACES))
            .unwrap_or_else(|e| panic!("{}: {e}", maps::IFACES));
    ifaces
        .keys()
        .map(|k| k.unwrap_or_else(|e| panic!("iterate ifaces: {e}")))
        .collect()
}

fn pinned(pin_dir: &Path, name: &str) -> Map {
    let path = pin_dir.join(name);
    let data = MapData::from_pin(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Map::from_map_data(data).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
