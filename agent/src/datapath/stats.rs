//! What the datapath is doing, read straight from the pins under the bpffs directory: the
//! per-CPU counters summed, the number of entries of every pinned map, and which programs are
//! attached to which interface. It opens its own handles to the pinned maps, so the metrics
//! scrape and `weft-agent status` never need the agent's loaded [`super::Datapath`] (and the
//! lock the daemon keeps it under). Read-only: nothing here writes a map or a link.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

use agent_common::{
    Counter, EndpointInfo, EndpointKey, IfaceInfo, IpcacheInfo, IpcacheKey, MasqInfo, MasqKey,
    NatEntry4, NatEntry6, NatTuple4, NatTuple6, NetdevInfo, StackInfo, StackKey, TunnelInfo, maps,
    reason,
};
use aya::{
    Pod,
    maps::{Array, HashMap, LpmTrie, Map, MapData, MapError, MapInfo, PerCpuArray},
};
use serde::Serialize;

use super::{
    AttachMode, CounterRow, DatapathError,
    attach::{HOOKS, Hook},
    endpoints::map_err,
};

/// Entries of one pinned map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapStat {
    /// Map name (the pin's file name, e.g. `weft_eps_v1`).
    pub name: &'static str,
    /// Entries now (array maps: their fixed size).
    pub entries: u64,
    /// `max_entries`.
    pub capacity: u32,
}

/// One program attached to one interface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProgramAttachment {
    /// Program name (`from_container`, `to_netdev`, `from_netdev`, `from_overlay`).
    pub program: &'static str,
    /// Interface name (`if<index>` when the index no longer resolves).
    pub ifname: String,
}

/// A read of the datapath's pins.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DatapathStats {
    /// Counter totals per reason (every reason below `reason::COUNT`).
    pub counters: Vec<CounterRow>,
    /// Every pinned map that exists, in `maps::PINNED_MAPS` order.
    pub maps: Vec<MapStat>,
    /// Attachments, by program then interface.
    pub attachments: Vec<ProgramAttachment>,
}

impl DatapathStats {
    /// Entries of map `name` (0 when not pinned).
    #[must_use]
    pub fn entries(&self, name: &str) -> u64 {
        self.maps
            .iter()
            .find(|m| m.name == name)
            .map_or(0, |m| m.entries)
    }
}

/// Read counters, map sizes and attachments from the pins under `pin_dir`. With netlink tc
/// attachments (no link pins) the interfaces come from the interfaces and native-devices maps.
///
/// # Errors
/// A pinned map cannot be opened or iterated, or the links directory cannot be read.
pub fn read_stats(pin_dir: &Path, attach_mode: AttachMode) -> Result<DatapathStats, DatapathError> {
    let mut stats = DatapathStats::default();
    let pin = |name| pin_dir.join(name);
    if pin(maps::COUNTERS).exists() {
        stats.counters = counters(&pin(maps::COUNTERS))?;
    }
    for name in maps::PINNED_MAPS {
        let path = pin(name);
        if !path.exists() {
            continue;
        }
        let info = MapInfo::from_pin(&path).map_err(map_err(name, "reading the pin's info"))?;
        let entries = match name {
            maps::ENDPOINTS => count_hash::<EndpointKey, EndpointInfo>(&path, name)?,
            maps::IFACES => count_hash::<u32, IfaceInfo>(&path, name)?,
            maps::NAT4 => count_hash::<NatTuple4, NatEntry4>(&path, name)?,
            maps::NAT6 => count_hash::<NatTuple6, NatEntry6>(&path, name)?,
            maps::NETDEVS => count_hash::<u32, NetdevInfo>(&path, name)?,
            maps::STACK_FLOWS => count_hash::<StackKey, StackInfo>(&path, name)?,
            maps::IPCACHE => count_lpm::<IpcacheKey, IpcacheInfo>(&path, name)?,
            maps::MASQ_EXCLUDE => count_lpm::<MasqKey, MasqInfo>(&path, name)?,
            _ => u64::from(info.max_entries()),
        };
        stats.maps.push(MapStat {
            name,
            entries,
            capacity: info.max_entries(),
        });
    }
    let (netlink, tcx): (Vec<Hook>, Vec<Hook>) = HOOKS
        .into_iter()
        .partition(|hook| attach_mode.for_hook(*hook) == AttachMode::Netlink);
    stats.attachments = netlink_attachments(pin_dir, &netlink)?;
    stats.attachments.extend(link_attachments(pin_dir, &tcx)?);
    Ok(stats)
}

fn open(path: &Path, name: &'static str) -> Result<Map, DatapathError> {
    let data = MapData::from_pin(path).map_err(map_err(name, "opening the pin"))?;
    Map::from_map_data(data).map_err(map_err(name, "opening the pin"))
}

fn count_keys<K: Pod>(
    keys: impl Iterator<Item = Result<K, MapError>>,
    name: &'static str,
) -> Result<u64, DatapathError> {
    let mut n = 0;
    for key in keys {
        key.map_err(map_err(name, "iterating"))?;
        n += 1;
    }
    Ok(n)
}

fn count_hash<K: Pod, V: Pod>(path: &Path, name: &'static str) -> Result<u64, DatapathError> {
    let map: HashMap<MapData, K, V> =
        HashMap::try_from(open(path, name)?).map_err(map_err(name, "opening the pin"))?;
    count_keys(map.keys(), name)
}

fn count_lpm<K: Pod, V: Pod>(path: &Path, name: &'static str) -> Result<u64, DatapathError> {
    let map: LpmTrie<MapData, K, V> =
        LpmTrie::try_from(open(path, name)?).map_err(map_err(name, "opening the pin"))?;
    count_keys(map.keys(), name)
}

fn counters(path: &Path) -> Result<Vec<CounterRow>, DatapathError> {
    let name = maps::COUNTERS;
    let map: PerCpuArray<MapData, Counter> =
        PerCpuArray::try_from(open(path, name)?).map_err(map_err(name, "opening the pin"))?;
    (0..reason::COUNT)
        .map(|why| {
            let per_cpu = map.get(&why, 0).map_err(map_err(name, "reading"))?;
            Ok(CounterRow {
                reason: reason::name(why),
                packets: per_cpu.iter().map(|c| c.packets).sum(),
                bytes: per_cpu.iter().map(|c| c.bytes).sum(),
            })
        })
        .collect()
}

/// TCX: one link pin per attachment at `<pin_dir>/links/<program>/<ifname>`.
fn link_attachments(
    pin_dir: &Path,
    hooks: &[Hook],
) -> Result<Vec<ProgramAttachment>, DatapathError> {
    let mut out = Vec::new();
    for hook in hooks {
        let dir: PathBuf = pin_dir.join("links").join(hook.program);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => return Err(DatapathError::Pin { path: dir, source }),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| DatapathError::Pin {
                path: dir.clone(),
                source,
            })?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        out.extend(names.into_iter().map(|ifname| ProgramAttachment {
            program: hook.program,
            ifname,
        }));
    }
    Ok(out)
}

/// Netlink tc: the maps are the record (`from_container` on every interface of the interfaces
/// map, `to_netdev` and `from_netdev` on every native device, `from_overlay` on the tunnel
/// map's device).
fn netlink_attachments(
    pin_dir: &Path,
    hooks: &[Hook],
) -> Result<Vec<ProgramAttachment>, DatapathError> {
    let keys = |name: &'static str| -> Result<Vec<u32>, DatapathError> {
        let path = pin_dir.join(name);
        if !path.exists() {
            return Ok(Vec::new());
        }
        let mut keys: Vec<u32> = match name {
            maps::IFACES => HashMap::<MapData, u32, IfaceInfo>::try_from(open(&path, name)?)
                .map_err(map_err(name, "opening the pin"))?
                .keys()
                .collect::<Result<_, _>>(),
            maps::TUNNEL => Array::<MapData, TunnelInfo>::try_from(open(&path, name)?)
                .map_err(map_err(name, "opening the pin"))?
                .get(&0, 0)
                .map(|t| (t.ifindex != 0).then_some(t.ifindex).into_iter().collect()),
            _ => HashMap::<MapData, u32, NetdevInfo>::try_from(open(&path, name)?)
                .map_err(map_err(name, "opening the pin"))?
                .keys()
                .collect::<Result<_, _>>(),
        }
        .map_err(map_err(name, "iterating"))?;
        keys.sort_unstable();
        Ok(keys)
    };
    let ifname = |index: u32| {
        nix::net::if_::if_indextoname(index).map_or_else(
            |_| format!("if{index}"),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    let mut out = Vec::new();
    for hook in hooks {
        let map = match hook.program {
            maps::PROG_FROM_CONTAINER => maps::IFACES,
            maps::PROG_FROM_OVERLAY => maps::TUNNEL,
            _ => maps::NETDEVS,
        };
        out.extend(keys(map)?.into_iter().map(|i| ProgramAttachment {
            program: hook.program,
            ifname: ifname(i),
        }));
    }
    Ok(out)
}
