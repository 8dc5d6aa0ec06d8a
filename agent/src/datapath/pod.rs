//! The host side of a pod as one transaction: veth pair and addresses (`netlink`), the
//! `from_container` attachment, the interface entry, and one endpoint and one IPCache entry
//! (the pod's identity) per address. Either all of it exists afterwards or none of it does.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::Path,
};

use agent_common::{EndpointInfo, EndpointKey, MacAddr, maps};
use tracing::warn;

use super::{
    AttachMode, Datapath, DatapathError,
    endpoints::key_of,
    ipcache::{IpcacheEntry, host_prefix},
    netlink::{self, PodIface, PodIfaceSpec},
};
use crate::faults::{self, Point};

/// What a pod needs from the datapath.
#[derive(Clone, Debug)]
pub struct PodSpec<'a> {
    /// Container (sandbox) id; names the host-side veth.
    pub container_id: &'a str,
    /// The pod's network namespace file.
    pub netns: &'a Path,
    /// Interface name inside the pod (`eth0`).
    pub ifname: &'a str,
    /// The pod's addresses (one or both families).
    pub addrs: &'a [IpAddr],
    /// IPv4 gateway (the node's router IP).
    pub gateway_v4: Option<Ipv4Addr>,
    /// IPv6 gateway (the node's router IP).
    pub gateway_v6: Option<Ipv6Addr>,
    /// Security identity of the pod.
    pub identity: u32,
    /// Pool id of each family's addresses (`EndpointInfo::pool_id`).
    pub pool_id: PoolIdPerFamily,
    /// `ENDPOINT_F_*` bits (for example per-pool masquerade skips).
    pub flags: u32,
    /// MTU of the veth pair (`None`: kernel default).
    pub mtu: Option<u32>,
}

/// The pool id (`EndpointInfo::pool_id`) of each family: a dual-stack pod's IPv4 and IPv6
/// addresses may come from different pools, and each address's endpoint entry carries its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolIdPerFamily {
    /// Pool id of the IPv4 address.
    pub v4: u32,
    /// Pool id of the IPv6 address.
    pub v6: u32,
}

impl PoolIdPerFamily {
    /// The same pool id for both families.
    #[must_use]
    pub const fn both(id: u32) -> Self {
        Self { v4: id, v6: id }
    }

    /// The pool id of `ip`'s family.
    #[must_use]
    pub const fn of(&self, ip: IpAddr) -> u32 {
        match ip {
            IpAddr::V4(_) => self.v4,
            IpAddr::V6(_) => self.v6,
        }
    }
}

/// The prefix of every host-side veth weft creates (Cilium's is `lxc`).
pub const HOST_IFNAME_PREFIX: &str = "wft";
/// Hex digits after [`HOST_IFNAME_PREFIX`] in a host-side veth name.
const HOST_IFNAME_DIGITS: usize = 12;

/// Whether `name` has the shape of [`host_ifname`]: [`HOST_IFNAME_PREFIX`] and 12 lower-case
/// hex digits (`weft-agent cleanup` deletes exactly these links).
#[must_use]
pub fn is_host_ifname(name: &str) -> bool {
    name.strip_prefix(HOST_IFNAME_PREFIX).is_some_and(|hash| {
        hash.len() == HOST_IFNAME_DIGITS
            && hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Host-side veth name for an attachment: `wft` + 12 hex digits of a stable hash of
/// `<container id>:<ifname>` (15 characters, the kernel's limit), like Cilium's `lxc<hash>`.
#[must_use]
pub fn host_ifname(container_id: &str, ifname: &str) -> String {
    // FNV-1a over the bytes, then the splitmix64 finalizer so near-identical ids differ in
    // every digit. Stable across builds and platforms.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in container_id.bytes().chain([b':']).chain(ifname.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^= hash >> 31;
    format!("{HOST_IFNAME_PREFIX}{:012x}", hash >> 16)
}

impl Datapath {
    /// Wire a pod: veth pair, addresses and routes, `from_container`, map entries.
    ///
    /// # Errors
    /// Any step failed; everything done before it has been undone.
    pub async fn add_pod(&mut self, spec: &PodSpec<'_>) -> Result<PodIface, DatapathError> {
        let iface = Self::create_pod_iface(spec).await?;
        let host = host_ifname(spec.container_id, spec.ifname);
        if let Err(error) = self.program_pod(spec, &iface) {
            delete_veth_quietly(&host).await;
            return Err(error);
        }
        Ok(iface)
    }

    /// The netlink half of [`Datapath::add_pod`]: the veth pair, the pod's addresses and
    /// routes, the node's route to the pod. Touches no map and no program, so it needs no
    /// access to the datapath and runs beside other pods' wiring.
    ///
    /// # Errors
    /// A netlink step failed (nothing is left behind), or the host-side veth exists already
    /// ([`netlink::NetlinkError::AlreadyExists`]).
    pub async fn create_pod_iface(spec: &PodSpec<'_>) -> Result<PodIface, DatapathError> {
        let host = host_ifname(spec.container_id, spec.ifname);
        netlink::create_pod_iface(&PodIfaceSpec {
            netns: spec.netns,
            host_ifname: &host,
            pod_ifname: spec.ifname,
            addrs: spec.addrs,
            gateway_v4: spec.gateway_v4,
            gateway_v6: spec.gateway_v6,
            mtu: spec.mtu,
        })
        .await
        .map_err(|source| DatapathError::Netlink {
            host_ifname: host,
            source: Box::new(source),
        })
    }

    /// Delete a pod's host-side veth (its peer and routes go with it); `Ok(false)` when it
    /// does not exist. Needs no access to the datapath.
    ///
    /// # Errors
    /// Netlink failed.
    pub async fn delete_pod_iface(host: &str) -> Result<bool, DatapathError> {
        netlink::delete_pod_iface(host)
            .await
            .map_err(|source| DatapathError::Netlink {
                host_ifname: host.to_owned(),
                source: Box::new(source),
            })
    }

    /// The eBPF half of [`Datapath::add_pod`], once [`Datapath::create_pod_iface`] made
    /// `iface`: `from_container` on the host veth, the interface entry, and an endpoint and
    /// an IPCache entry per address. On error its own entries and attachment are undone; the
    /// veth is the caller's to delete.
    ///
    /// # Errors
    /// The attachment or a map write failed.
    pub fn program_pod(
        &mut self,
        spec: &PodSpec<'_>,
        iface: &PodIface,
    ) -> Result<(), DatapathError> {
        let host = host_ifname(spec.container_id, spec.ifname);
        let programmed = self.try_program_pod(spec, &host, iface);
        if programmed.is_err() {
            self.unprogram(&host, iface.host_ifindex, spec.addrs);
        }
        programmed
    }

    fn try_program_pod(
        &mut self,
        spec: &PodSpec<'_>,
        host: &str,
        iface: &PodIface,
    ) -> Result<(), DatapathError> {
        faults::hit(Point::Routes)?;
        self.attach_from_container(host)?;
        self.upsert_iface(iface.host_ifindex, iface.host_mac)?;
        let info = EndpointInfo {
            ifindex: iface.host_ifindex,
            flags: spec.flags,
            pod_mac: iface.pod_mac,
            pad0: [0; 2],
            node_mac: iface.host_mac,
            pad1: [0; 2],
            sec_identity: spec.identity,
            pool_id: 0,
        };
        for ip in spec.addrs {
            let info = EndpointInfo {
                pool_id: spec.pool_id.of(*ip),
                ..info
            };
            self.upsert_endpoint(*ip, &info)?;
            faults::hit(Point::MapUpdate)?;
            self.upsert_ipcache(host_prefix(*ip), &IpcacheEntry::identity(spec.identity))?;
        }
        Ok(())
    }

    /// Program the datapath of a pod an earlier agent wired, whatever of it survived in bpffs:
    /// `from_container` on its veth (a lost TCX link is attached again, a netlink filter left by
    /// another load is replaced), its interface entry, and its endpoint and IPCache entries. An
    /// entry that survived keeps its identity; a lost one starts at `spec.identity`.
    /// `Ok(false)`: the host-side veth is gone, nothing was changed.
    ///
    /// # Errors
    /// Netlink, the attachment or a map write failed.
    pub async fn restore_pod(
        &mut self,
        spec: &PodSpec<'_>,
        pod_mac: MacAddr,
    ) -> Result<bool, DatapathError> {
        let host = host_ifname(spec.container_id, spec.ifname);
        let link =
            netlink::link_index_and_mac(&host)
                .await
                .map_err(|source| DatapathError::Netlink {
                    host_ifname: host.clone(),
                    source: Box::new(source),
                })?;
        let Some((host_ifindex, host_mac)) = link else {
            return Ok(false);
        };
        self.attach_from_container(&host)?;
        self.upsert_iface(host_ifindex, host_mac)?;
        for ip in spec.addrs {
            let kept = self
                .hash_get::<EndpointKey, EndpointInfo>(maps::ENDPOINTS, &key_of(*ip))?
                .filter(|info| info.ifindex == host_ifindex)
                .map_or(spec.identity, |info| info.sec_identity);
            let info = EndpointInfo {
                ifindex: host_ifindex,
                flags: spec.flags,
                pod_mac,
                pad0: [0; 2],
                node_mac: host_mac,
                pad1: [0; 2],
                sec_identity: kept,
                pool_id: spec.pool_id.of(*ip),
            };
            self.upsert_endpoint(*ip, &info)?;
            self.upsert_ipcache(host_prefix(*ip), &IpcacheEntry::identity(kept))?;
        }
        Ok(true)
    }

    /// Unwire the attachment (`container_id`, `ifname`): endpoints behind its veth, interface
    /// entry, tc attachment and the veth itself. Unknown attachment: `Ok(false)`, no change.
    ///
    /// # Errors
    /// A map or netlink operation failed (what could be removed has been).
    pub async fn remove_pod(
        &mut self,
        container_id: &str,
        ifname: &str,
    ) -> Result<bool, DatapathError> {
        let host = host_ifname(container_id, ifname);
        let ifindex =
            netlink::link_index(&host)
                .await
                .map_err(|source| DatapathError::Netlink {
                    host_ifname: host.clone(),
                    source: Box::new(source),
                })?;
        let Some(ifindex) = ifindex else {
            // The veth is gone already; drop a stale pin if one is left.
            return self.detach_from_container(&host);
        };
        let addrs: Vec<IpAddr> = self
            .list_endpoints()?
            .into_iter()
            .filter(|row| row.ifindex == ifindex)
            .map(|row| row.ip)
            .collect();
        for ip in &addrs {
            self.remove_endpoint(*ip)?;
            self.remove_ipcache(host_prefix(*ip))?;
        }
        self.remove_iface(ifindex)?;
        self.detach_from_container(&host)?;
        netlink::delete_pod_iface(&host)
            .await
            .map_err(|source| DatapathError::Netlink {
                host_ifname: host.clone(),
                source: Box::new(source),
            })?;
        Ok(true)
    }

    /// Remove what the datapath holds for the addresses of a known attachment, by key (no
    /// walk of the endpoints map): each address's endpoint and IPCache host entries, the
    /// interface entry of the veth they point at while it is still that veth's (the same MAC:
    /// a dead veth's ifindex may belong to a new pod's by now), and a TCX `from_container`
    /// link of `host`. The addresses are the attachment's until released, so no one else's
    /// entry goes. The veth itself (and a netlink filter with it) is left to
    /// [`Datapath::delete_pod_iface`].
    ///
    /// # Errors
    /// A map read or delete failed (what could be removed before it has been).
    pub fn unprogram_pod(&mut self, host: &str, addrs: &[IpAddr]) -> Result<(), DatapathError> {
        let mut ifaces: Vec<(u32, MacAddr)> = Vec::new();
        for ip in addrs {
            if let Some(info) =
                self.hash_get::<EndpointKey, EndpointInfo>(maps::ENDPOINTS, &key_of(*ip))?
            {
                ifaces.push((info.ifindex, info.node_mac));
            }
            self.remove_endpoint(*ip)?;
            self.remove_ipcache(host_prefix(*ip))?;
        }
        ifaces.dedup();
        for (ifindex, mac) in ifaces {
            if self.iface_mac(ifindex)? == Some(mac) {
                self.remove_iface(ifindex)?;
            }
        }
        // A pinned TCX link outlives its interface as a pin file; a netlink tc filter goes
        // with the veth, which every caller deletes next (sparing a DEL the RTNL round trips
        // of a filter dump and delete while other pods' veths are being deleted).
        if self.attach_mode.of_pods() != AttachMode::Netlink {
            self.detach_from_container(host)?;
        }
        Ok(())
    }

    /// Best-effort undo of a half-programmed pod (errors are logged: the original error wins).
    fn unprogram(&mut self, host: &str, ifindex: u32, addrs: &[IpAddr]) {
        for ip in addrs {
            if let Err(error) = self.remove_endpoint(*ip) {
                warn!(%error, %ip, "undo: removing endpoint");
            }
            if let Err(error) = self.remove_ipcache(host_prefix(*ip)) {
                warn!(%error, %ip, "undo: removing IPCache entry");
            }
        }
        if let Err(error) = self.remove_iface(ifindex) {
            warn!(%error, host, "undo: removing interface entry");
        }
        if let Err(error) = self.detach_from_container(host) {
            warn!(%error, host, "undo: unpinning link");
        }
    }
}

/// Delete a veth after a failed step (errors are logged: the original error wins).
pub async fn delete_veth_quietly(host: &str) {
    if let Err(error) = netlink::delete_pod_iface(host).await {
        warn!(%error, host, "undo: deleting veth");
    }
}

#[cfg(test)]
mod tests {
    use super::host_ifname;

    /// Host-side veth names are persisted (the kernel keeps the veths across agent upgrades,
    /// records name them): a change of the hash orphans every pod's veth on upgrade. Golden
    /// values, not the function compared with itself.
    #[test]
    fn host_veth_names_are_stable_across_builds() {
        let id = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        assert_eq!(host_ifname(id, "eth0"), "wft3a7ffe3da8c5");
        assert_eq!(host_ifname(id, "net1"), "wftb2a61b9724d7");
        assert_eq!(host_ifname("default-web", "eth0"), "wft6a7eb06cf971");
    }
}
