//! The router (gateway) address of each family, picked as Cilium picks it once every endpoint
//! address is restored: the one saved in `router.json` under the state directory, else the own
//! CiliumNode's (`spec.addresses` entry of type `CiliumInternalIP`, or the
//! `network.cilium.io/ipv4-cilium-host` / `ipv6-cilium-host` annotation) when the node's
//! allocation holds it, else a new one (owner `router`). It is reserved before any pod
//! allocates, saved atomically, and written back to the CiliumNode as `CiliumInternalIP`.
//! Must not touch the endpoint records.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Instant,
};

use tracing::{info, warn};

use super::State;
use crate::{
    crd::node::CiliumNode,
    ipam::{Family, input::PoolInput},
    store::writeback::CILIUM_INTERNAL_IP,
};

/// Owner of the router (gateway) addresses, as in Cilium.
pub const ROUTER_OWNER: &str = "router";
/// The router addresses (and their pools) under the state directory.
pub const ROUTER_FILE: &str = "router.json";
/// The CiliumNode annotation that names the IPv4 router address (Cilium's).
pub const ANNOTATION_V4: &str = "network.cilium.io/ipv4-cilium-host";
/// The CiliumNode annotation that names the IPv6 router address (Cilium's).
pub const ANNOTATION_V6: &str = "network.cilium.io/ipv6-cilium-host";

/// Why the saved router addresses cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// `router.json` exists but cannot be read.
    #[error("reading the router addresses in {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// `router.json` does not parse (truncated or edited).
    #[error(
        "the router addresses in {path} are corrupt: move the file away to take the router \
         address from the CiliumNode's CiliumInternalIP (or allocate a new one); pods created \
         before keep their old gateway until they are recreated"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

/// The router addresses saved in `state_dir` with their pools; none when there is no file.
///
/// # Errors
/// The file exists but cannot be read or does not parse.
pub(super) fn load(state_dir: &Path) -> Result<Vec<(IpAddr, String)>, RouterError> {
    let path = state_dir.join(ROUTER_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(RouterError::Read { path, source }),
    };
    serde_json::from_slice(&bytes).map_err(|source| RouterError::Corrupt { path, source })
}

/// The router addresses the own CiliumNode names: `CiliumInternalIP` entries first, then the
/// annotations. Entries that do not parse are skipped.
#[must_use]
pub(crate) fn from_node(node: Option<&CiliumNode>) -> Vec<IpAddr> {
    let Some(node) = node else {
        return Vec::new();
    };
    let internal = node
        .spec
        .addresses
        .iter()
        .filter(|a| a.address_type == CILIUM_INTERNAL_IP)
        .map(|a| a.ip.as_str());
    let annotated = [ANNOTATION_V4, ANNOTATION_V6]
        .into_iter()
        .filter_map(|key| node.metadata.annotations.get(key).map(String::as_str));
    internal
        .chain(annotated)
        .filter_map(|ip| ip.trim().parse().ok())
        .collect()
}

/// The `CiliumInternalIP` write-back: the router addresses, when the own CiliumNode does not
/// name exactly them yet.
#[must_use]
pub(super) fn write_back(router: &[IpAddr], node: Option<&CiliumNode>) -> Option<Vec<IpAddr>> {
    let node = node?;
    if router.is_empty() {
        return None;
    }
    let mut named: Vec<&str> = node
        .spec
        .addresses
        .iter()
        .filter(|a| a.address_type == CILIUM_INTERNAL_IP)
        .map(|a| a.ip.as_str())
        .collect();
    let mut wanted: Vec<String> = router.iter().map(ToString::to_string).collect();
    named.sort_unstable();
    wanted.sort();
    (named != wanted).then(|| router.to_vec())
}

/// Restore the router addresses (saved file, then CiliumNode), or allocate them (owner
/// `router`), then save them. Does nothing until IPAM is ready; a failure is logged and
/// retried on the next sync.
pub(super) fn ensure_router(state: &mut State, state_dir: &Path) {
    if !state.router.is_empty() || state.ipam.ready().is_err() {
        return;
    }
    let saved = match load(state_dir) {
        Ok(saved) => saved,
        Err(error) => {
            warn!(error = %super::chain(&error), "no router address until the file is fixed");
            return;
        }
    };
    let default_pool = state.ipam.config().default_pool.clone();
    let from_node: Vec<(IpAddr, String)> = from_node(state.snapshot.own_node())
        .into_iter()
        .map(|ip| (ip, default_pool.clone()))
        .collect();
    let now = Instant::now();
    let mut chosen: Vec<(IpAddr, String)> = Vec::new();
    let mut missing = Vec::new();
    for family in state.ipam.families() {
        let candidates = saved.iter().chain(&from_node);
        let restored = candidates
            .filter(|(ip, _)| Family::of(ip) == family)
            .find(
                |(ip, pool)| match state.ipam.restore(*ip, ROUTER_OWNER, pool, now) {
                    Ok(()) => true,
                    Err(error) => {
                        warn!(error = %super::chain(&error), %ip, "router address not available here");
                        false
                    }
                },
            );
        match restored {
            Some(entry) => chosen.push(entry.clone()),
            None => missing.push(family),
        }
    }
    if !missing.is_empty() {
        let snapshot = Arc::clone(&state.snapshot);
        let pools = PoolInput::all(snapshot.pools.values());
        match state.ipam.allocate_families(
            ROUTER_OWNER,
            &missing,
            snapshot.as_ref(),
            &pools,
            &mut state.rng,
            now,
        ) {
            Ok(list) => chosen.extend(list.into_iter().map(|a| (a.ip, a.pool))),
            Err(error) => {
                for (ip, pool) in &chosen {
                    state.ipam.release(*ip, pool);
                }
                warn!(error = %super::chain(&error), "allocating router addresses; retrying on the next change");
                return;
            }
        }
    }
    if chosen != saved {
        save(state_dir, &chosen);
    }
    state.router = chosen.into_iter().map(|(ip, _)| ip).collect();
    info!(router = ?state.router, "router addresses");
}

/// Replace `router.json` atomically (a failure is logged: the addresses are held anyway and
/// the CiliumNode names them).
fn save(state_dir: &Path, router: &[(IpAddr, String)]) {
    let path = state_dir.join(ROUTER_FILE);
    let written = serde_json::to_vec(router)
        .map_err(std::io::Error::other)
        .and_then(|body| crate::fsutil::write_private(&path, &body, true));
    if let Err(error) = written {
        warn!(%error, path = %path.display(), "saving router addresses");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(yaml: &str) -> CiliumNode {
        serde_norway::from_str(yaml).expect("CiliumNode")
    }

    #[test]
    fn the_node_names_its_router_by_internal_ip_then_annotation() {
        let n = node(
            "metadata:\n  name: n1\n  annotations:\n    network.cilium.io/ipv6-cilium-host: fd00::9\n\
             spec:\n  addresses:\n  - {type: InternalIP, ip: 192.0.2.10}\n  \
             - {type: CiliumInternalIP, ip: 10.244.3.9}\n  - {type: CiliumInternalIP, ip: bad}\n",
        );
        let ips: Vec<IpAddr> = vec!["10.244.3.9".parse().unwrap(), "fd00::9".parse().unwrap()];
        assert_eq!(from_node(Some(&n)), ips);
        assert!(from_node(None).is_empty());
    }

    #[test]
    fn the_write_back_happens_only_when_the_node_names_another_router() {
        let n = node(
            "metadata: {name: n1}\nspec:\n  addresses:\n  - {type: CiliumInternalIP, ip: 10.99.0.1}\n",
        );
        let router: Vec<IpAddr> = vec!["10.244.3.1".parse().unwrap()];
        assert_eq!(write_back(&router, Some(&n)), Some(router.clone()));
        let same = node(
            "metadata: {name: n1}\nspec:\n  addresses:\n  - {type: CiliumInternalIP, ip: 10.244.3.1}\n",
        );
        assert_eq!(write_back(&router, Some(&same)), None);
        assert_eq!(write_back(&[], Some(&n)), None, "no router yet");
    }

    #[test]
    fn the_router_file_is_readable_by_root_only() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("weft-router-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        save(&dir, &[("10.0.0.1".parse().unwrap(), "default".into())]);
        let meta = std::fs::metadata(dir.join(ROUTER_FILE)).expect("saved");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_truncated_router_file_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("weft-router-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(load(&dir).expect("no file").is_empty());
        std::fs::write(dir.join(ROUTER_FILE), br#"[["10.0.0.1","def"#).unwrap();
        let error = load(&dir).expect_err("truncated");
        assert!(
            error
                .to_string()
                .contains(&dir.join(ROUTER_FILE).display().to_string()),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
