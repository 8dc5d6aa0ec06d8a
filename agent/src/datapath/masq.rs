//! Typed access to the per-pool masquerade-exclusion map. The desired set is computed
//! elsewhere (`crate::masq` reads the ip-masq-agent file and the native-routing CIDRs); this
//! module only makes the map equal to it — new and changed entries first, stale ones last, so
//! an exclusion that stays is never missing, not even for a moment.

use std::{collections::BTreeMap, net::IpAddr};

use agent_common::{
    MasqInfo, MasqKey,
    endpoint::{FAMILY_IPV4, FAMILY_IPV6},
    maps,
    masq::{
        MASQ_F_IP_MASQ_AGENT, MASQ_F_NATIVE_ROUTING, MASQ_F_POOL, MASQ_STATIC_PREFIX, POOL_ANY,
    },
};
use aya::maps::{LpmTrie, MapData, lpm_trie::Key};
use ipnet::IpNet;
use serde::Serialize;

use super::{
    Datapath, DatapathError,
    endpoints::{is_not_found, map_err},
};

/// One exclusion: traffic from pods of `pool_id` to `cidr` keeps the pod address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MasqExclusion {
    /// Pool id as in the endpoints map (0 = default pool), or `POOL_ANY` for every pool.
    pub pool_id: u32,
    /// Destination prefix (host bits are cleared when written).
    pub cidr: IpNet,
    /// Origin, `MASQ_F_*` bits (entries for the same pool and prefix are merged).
    pub flags: u32,
}

/// One exclusion-map entry, as the CLI prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MasqRow {
    /// `*` for every pool, else the pool id.
    pub pool: String,
    /// Pool id (`POOL_ANY` = 4294967295 for every pool).
    pub pool_id: u32,
    /// Destination prefix.
    pub cidr: IpNet,
    /// Where the entry came from: `ip-masq-agent`, `native-routing-cidr`, `pool`.
    pub origin: Vec<&'static str>,
}

/// What a sync changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MasqSync {
    /// Entries written (new or with other flags).
    pub written: usize,
    /// Stale entries removed.
    pub removed: usize,
}

fn lpm_key(pool_id: u32, cidr: IpNet) -> Key<MasqKey> {
    let cidr = cidr.trunc();
    let data = match cidr {
        IpNet::V4(n) => MasqKey::v4(pool_id, n.network().octets()),
        IpNet::V6(n) => MasqKey::v6(pool_id, n.network().octets()),
    };
    Key::new(MASQ_STATIC_PREFIX + u32::from(cidr.prefix_len()), data)
}

fn decode(key: &Key<MasqKey>) -> Option<(u32, IpNet)> {
    let data = key.data();
    let len = u8::try_from(key.prefix_len().checked_sub(MASQ_STATIC_PREFIX)?).ok()?;
    let ip = match data.family {
        FAMILY_IPV4 => IpAddr::from([data.ip[0], data.ip[1], data.ip[2], data.ip[3]]),
        FAMILY_IPV6 => IpAddr::from(data.ip),
        _ => return None,
    };
    Some((data.pool_id, IpNet::new(ip, len).ok()?))
}

/// Names of the `MASQ_F_*` bits set in `flags`.
#[must_use]
pub fn origin_names(flags: u32) -> Vec<&'static str> {
    [
        (MASQ_F_IP_MASQ_AGENT, "ip-masq-agent"),
        (MASQ_F_NATIVE_ROUTING, "native-routing-cidr"),
        (MASQ_F_POOL, "pool"),
    ]
    .into_iter()
    .filter(|(bit, _)| flags & bit != 0)
    .map(|(_, name)| name)
    .collect()
}

impl Datapath {
    fn masq_map(&mut self) -> Result<LpmTrie<&mut MapData, MasqKey, MasqInfo>, DatapathError> {
        let map = self
            .ebpf
            .map_mut(maps::MASQ_EXCLUDE)
            .ok_or(DatapathError::Missing {
                kind: "map",
                name: maps::MASQ_EXCLUDE,
            })?;
        LpmTrie::try_from(map).map_err(map_err(maps::MASQ_EXCLUDE, "opening"))
    }

    fn masq_entries(&mut self) -> Result<BTreeMap<(u32, IpNet), u32>, DatapathError> {
        let mut entries = BTreeMap::new();
        for entry in &self.masq_map()? {
            let (key, info) = entry.map_err(map_err(maps::MASQ_EXCLUDE, "iterating"))?;
            if let Some(k) = decode(&key) {
                entries.insert(k, info.flags);
            }
        }
        Ok(entries)
    }

    /// Make the exclusion map hold exactly `wanted`: write new and changed entries, then
    /// remove the rest.
    ///
    /// # Errors
    /// A map operation failed; entries already written stay (the old ones are still there).
    pub fn sync_masq_exclusions(
        &mut self,
        wanted: &[MasqExclusion],
    ) -> Result<MasqSync, DatapathError> {
        let mut desired: BTreeMap<(u32, IpNet), u32> = BTreeMap::new();
        for e in wanted {
            *desired.entry((e.pool_id, e.cidr.trunc())).or_default() |= e.flags;
        }
        let current = self.masq_entries()?;
        let mut stats = MasqSync::default();
        let mut map = self.masq_map()?;
        for (&(pool_id, cidr), &flags) in &desired {
            if current.get(&(pool_id, cidr)) != Some(&flags) {
                map.insert(&lpm_key(pool_id, cidr), MasqInfo { flags }, 0)
                    .map_err(map_err(maps::MASQ_EXCLUDE, "inserting"))?;
                stats.written += 1;
            }
        }
        for &(pool_id, cidr) in current.keys() {
            if !desired.contains_key(&(pool_id, cidr)) {
                match map.remove(&lpm_key(pool_id, cidr)) {
                    Ok(()) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(source) => {
                        return Err(DatapathError::Map {
                            map: maps::MASQ_EXCLUDE,
                            action: "removing",
                            source: Box::new(source),
                        });
                    }
                }
                stats.removed += 1;
            }
        }
        Ok(stats)
    }

    /// Every exclusion: per pool (every-pool entries first), then by prefix.
    ///
    /// # Errors
    /// Iterating the map failed.
    pub fn list_masq(&mut self) -> Result<Vec<MasqRow>, DatapathError> {
        let mut rows: Vec<MasqRow> = self
            .masq_entries()?
            .into_iter()
            .map(|((pool_id, cidr), flags)| MasqRow {
                pool: if pool_id == POOL_ANY {
                    "*".to_owned()
                } else {
                    pool_id.to_string()
                },
                pool_id,
                cidr,
                origin: origin_names(flags),
            })
            .collect();
        rows.sort_by_key(|r| (r.pool_id != POOL_ANY, r.pool_id, r.cidr));
        Ok(rows)
    }
}
