//! Typed access to the IPCache map: prefixes go in as `IpNet` and come out sorted.
//!
//! Who writes what: `add_pod` / `remove_pod` keep one host-length entry per local pod address
//! with the endpoint's identity; the daemon keeps the node's own addresses at `host`
//! ([`Datapath::sync_host_ips`]) and `0.0.0.0/0`, `::/0` at `world`
//! ([`Datapath::ensure_world_ipcache`]). Remote nodes and CiliumEndpoints (the Kubernetes
//! watchers, later) use [`Datapath::upsert_ipcache`] / [`Datapath::remove_ipcache`] with
//! `remote-node` or the endpoint's identity and, in tunnel mode, its node as tunnel endpoint.

use std::net::IpAddr;

use agent_common::{
    IpcacheInfo, IpcacheKey,
    endpoint::{FAMILY_IPV4, FAMILY_IPV6},
    identity,
    ipcache::{IPCACHE_F_HAS_TUNNEL_EP, IPCACHE_F_IPV6_TUNNEL_EP, IPCACHE_STATIC_PREFIX},
    maps,
};
use aya::maps::{LpmTrie, MapData, lpm_trie::Key};
use ipnet::IpNet;
use serde::Serialize;

use super::{
    Datapath, DatapathError,
    endpoints::{is_not_found, map_err},
};

/// What the IPCache says about a prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpcacheEntry {
    /// Security identity (`agent_common::identity`).
    pub identity: u32,
    /// Node to tunnel to (tunnel mode); `None` for local and natively routed prefixes.
    pub tunnel_endpoint: Option<IpAddr>,
    /// Other `IPCACHE_F_*` bits (`HAS_TUNNEL_EP` / `IPV6_TUNNEL_EP` follow `tunnel_endpoint`).
    pub flags: u8,
}

impl IpcacheEntry {
    /// An entry with identity `identity` and nothing else.
    #[must_use]
    pub const fn identity(identity: u32) -> Self {
        Self {
            identity,
            tunnel_endpoint: None,
            flags: 0,
        }
    }

    fn info(self) -> IpcacheInfo {
        let mut flags = self.flags & !(IPCACHE_F_HAS_TUNNEL_EP | IPCACHE_F_IPV6_TUNNEL_EP);
        let mut tunnel_endpoint = [0u8; 16];
        match self.tunnel_endpoint {
            Some(IpAddr::V4(v4)) => {
                tunnel_endpoint[..4].copy_from_slice(&v4.octets());
                flags |= IPCACHE_F_HAS_TUNNEL_EP;
            }
            Some(IpAddr::V6(v6)) => {
                tunnel_endpoint = v6.octets();
                flags |= IPCACHE_F_HAS_TUNNEL_EP | IPCACHE_F_IPV6_TUNNEL_EP;
            }
            None => {}
        }
        IpcacheInfo {
            sec_identity: self.identity,
            tunnel_endpoint,
            pad: 0,
            key: 0,
            flags,
        }
    }
}

/// One IPCache entry, as the CLI prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IpcacheRow {
    /// The prefix.
    pub prefix: IpNet,
    /// Security identity.
    pub identity: u32,
    /// `reserved:<name>` for reserved identities.
    pub identity_name: Option<&'static str>,
    /// Tunnel endpoint, if any.
    pub tunnel_endpoint: Option<IpAddr>,
    /// `IPCACHE_F_*` bits.
    pub flags: u8,
}

/// The LPM key of `prefix` (host bits cleared).
fn lpm_key(prefix: IpNet) -> Key<IpcacheKey> {
    let prefix = prefix.trunc();
    let data = match prefix {
        IpNet::V4(n) => IpcacheKey::v4(n.network().octets()),
        IpNet::V6(n) => IpcacheKey::v6(n.network().octets()),
    };
    Key::new(IPCACHE_STATIC_PREFIX + u32::from(prefix.prefix_len()), data)
}

fn prefix_of(key: &Key<IpcacheKey>) -> Option<IpNet> {
    let data = key.data();
    let len = u8::try_from(key.prefix_len().checked_sub(IPCACHE_STATIC_PREFIX)?).ok()?;
    let ip = match data.family {
        FAMILY_IPV4 => IpAddr::from([data.ip[0], data.ip[1], data.ip[2], data.ip[3]]),
        FAMILY_IPV6 => IpAddr::from(data.ip),
        _ => return None,
    };
    IpNet::new(ip, len).ok()
}

impl IpcacheRow {
    /// The entry as written (the flags the tunnel endpoint implies are not part of it).
    #[must_use]
    pub const fn entry(&self) -> IpcacheEntry {
        IpcacheEntry {
            identity: self.identity,
            tunnel_endpoint: self.tunnel_endpoint,
            flags: self.flags & !(IPCACHE_F_HAS_TUNNEL_EP | IPCACHE_F_IPV6_TUNNEL_EP),
        }
    }
}

fn row(prefix: IpNet, info: &IpcacheInfo) -> IpcacheRow {
    let tunnel_endpoint = if info.flags & IPCACHE_F_HAS_TUNNEL_EP == 0 {
        None
    } else if info.flags & IPCACHE_F_IPV6_TUNNEL_EP != 0 {
        Some(IpAddr::from(info.tunnel_endpoint))
    } else {
        let t = info.tunnel_endpoint;
        Some(IpAddr::from([t[0], t[1], t[2], t[3]]))
    };
    IpcacheRow {
        prefix,
        identity: info.sec_identity,
        identity_name: identity::reserved_name(info.sec_identity),
        tunnel_endpoint,
        flags: info.flags,
    }
}

/// `ip` as a host prefix (/32 or /128).
#[must_use]
pub fn host_prefix(ip: IpAddr) -> IpNet {
    IpNet::from(ip)
}

impl Datapath {
    fn ipcache(&mut self) -> Result<LpmTrie<&mut MapData, IpcacheKey, IpcacheInfo>, DatapathError> {
        let map = self
            .ebpf
            .map_mut(maps::IPCACHE)
            .ok_or(DatapathError::Missing {
                kind: "map",
                name: maps::IPCACHE,
            })?;
        LpmTrie::try_from(map).map_err(map_err(maps::IPCACHE, "opening"))
    }

    /// Insert or replace the entry for `prefix`.
    ///
    /// # Errors
    /// The write failed (for example the map is full).
    pub fn upsert_ipcache(
        &mut self,
        prefix: IpNet,
        entry: &IpcacheEntry,
    ) -> Result<(), DatapathError> {
        self.ipcache()?
            .insert(&lpm_key(prefix), entry.info(), 0)
            .map_err(map_err(maps::IPCACHE, "inserting"))
    }

    /// Remove the entry for exactly `prefix`; `Ok(false)` if there was none.
    ///
    /// # Errors
    /// The delete failed for another reason than a missing key.
    pub fn remove_ipcache(&mut self, prefix: IpNet) -> Result<bool, DatapathError> {
        match self.ipcache()?.remove(&lpm_key(prefix)) {
            Ok(()) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(source) => Err(DatapathError::Map {
                map: maps::IPCACHE,
                action: "removing",
                source: Box::new(source),
            }),
        }
    }

    /// Identity of the longest prefix holding `ip` (what the datapath sees), if any.
    ///
    /// # Errors
    /// The lookup failed for another reason than a miss.
    pub fn ipcache_identity(&mut self, ip: IpAddr) -> Result<Option<u32>, DatapathError> {
        match self.ipcache()?.get(&lpm_key(host_prefix(ip)), 0) {
            Ok(info) => Ok(Some(info.sec_identity)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(source) => Err(DatapathError::Map {
                map: maps::IPCACHE,
                action: "looking up",
                source: Box::new(source),
            }),
        }
    }

    /// Every entry, IPv4 first, then by prefix.
    ///
    /// # Errors
    /// Iterating the map failed.
    pub fn list_ipcache(&mut self) -> Result<Vec<IpcacheRow>, DatapathError> {
        let mut rows = Vec::new();
        for entry in &self.ipcache()? {
            let (key, info) = entry.map_err(map_err(maps::IPCACHE, "iterating"))?;
            if let Some(prefix) = prefix_of(&key) {
                rows.push(row(prefix, &info));
            }
        }
        rows.sort_by_key(|r| r.prefix);
        Ok(rows)
    }

    /// `0.0.0.0/0` and `::/0` → `world`: what a destination outside every known prefix is.
    ///
    /// # Errors
    /// A write failed.
    pub fn ensure_world_ipcache(&mut self) -> Result<(), DatapathError> {
        for prefix in [
            IpNet::V4(ipnet::Ipv4Net::default()),
            IpNet::V6(ipnet::Ipv6Net::default()),
        ] {
            self.upsert_ipcache(prefix, &IpcacheEntry::identity(identity::WORLD))?;
        }
        Ok(())
    }

    /// Make `ips` exactly this node's addresses in the IPCache (`host` identity): upsert each
    /// as a host prefix and remove host-identity host prefixes not in the list.
    ///
    /// # Errors
    /// A map operation failed.
    pub fn sync_host_ips(&mut self, ips: &[IpAddr]) -> Result<(), DatapathError> {
        for ip in ips {
            self.upsert_ipcache(host_prefix(*ip), &IpcacheEntry::identity(identity::HOST))?;
        }
        let stale: Vec<IpNet> = self
            .list_ipcache()?
            .into_iter()
            .filter(|r| {
                r.identity == identity::HOST && r.prefix.prefix_len() == r.prefix.max_prefix_len()
            })
            .filter(|r| !ips.contains(&r.prefix.addr()))
            .map(|r| r.prefix)
            .collect();
        for prefix in stale {
            self.remove_ipcache(prefix)?;
        }
        Ok(())
    }
}
