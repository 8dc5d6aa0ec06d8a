//! The IO side of the start-up checks (`ipam::sanity` has the rules): the node's networks read
//! through the netlink facade, and the IPAM mode the state directory was created with
//! (`<state-dir>/ipam-mode`, one line).
//!
//! Fatal at start-up: a pod range of the first snapshot's own CiliumNode that overlaps the
//! node's networks, a mode change under live pods other than cluster-pool → multi-pool, and
//! live pods' records of an address family the configuration turned off (they could never be
//! restored). Logged once each: CiliumNode entries that are not addresses.
//! Later — a pool CIDR the operator allocates after start, a node address added while the
//! agent runs — is not fatal: each new clash is logged once, and an ADD whose address falls
//! into a node network is refused (the address goes back), so the agent keeps serving pods
//! from the ranges that are fine.

use std::{
    collections::BTreeSet,
    io,
    net::IpAddr,
    path::{Path, PathBuf},
};

use tracing::{info, warn};

use super::{DaemonError, RECORDS_DIR, RecordError, Records};
use crate::{
    config::AgentConfig,
    crd::node::CiliumNode,
    datapath::netlink,
    ipam::{
        input::NodeInput,
        mode::IpamMode,
        problems::node_problems,
        sanity::{
            ModeDecision, NodeNetwork, SanityError, check_mode_change, check_record_families,
            node_networks, overlaps, pod_ranges,
        },
    },
};

/// File in the state directory that records the IPAM mode of its endpoint records.
pub const MODE_FILE: &str = "ipam-mode";

/// Why a start-up check refused to start, or could not run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A pod range overlaps the node's networks, or the mode changed under live pods.
    #[error(transparent)]
    Refused(#[from] SanityError),
    /// The mode file could not be read or written.
    #[error("reading or writing {path}")]
    StateFile {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: io::Error,
    },
    /// The mode file does not name a mode.
    #[error("{path} does not name an IPAM mode; delete it if no pod uses this node's network")]
    ModeFile {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: crate::ipam::mode::ModeError,
    },
    /// The endpoint records could not be listed.
    #[error("listing the endpoint records")]
    Records(#[from] RecordError),
}

/// The node's networks, without default routes and the agent's own pod devices.
///
/// # Errors
/// Netlink failed.
pub(super) async fn read_node_networks() -> Result<Vec<NodeNetwork>, DaemonError> {
    let all = netlink::host_networks()
        .await
        .map_err(|source| DaemonError::NodeNetworks { source })?;
    Ok(node_networks(all.into_iter().map(|n| NodeNetwork {
        cidr: n.cidr,
        device: n.device,
        address: n.address,
    })))
}

/// Refuse to start when `node`'s pod ranges (in `mode`) overlap `networks`.
///
/// # Errors
/// [`SanityError::Overlap`], naming every clash and the fix.
pub(super) fn check_overlaps(
    mode: IpamMode,
    node: Option<&CiliumNode>,
    networks: &[NodeNetwork],
) -> Result<(), CheckError> {
    let Some(node) = node else {
        return Ok(());
    };
    let found = overlaps(&pod_ranges(mode, &NodeInput::from(node)), networks);
    if found.is_empty() {
        return Ok(());
    }
    Err(SanityError::Overlap { overlaps: found }.into())
}

/// Log each clash of `node`'s pod ranges with `networks` not logged before (`reported`).
pub(super) fn warn_new_overlaps(
    mode: IpamMode,
    node: Option<&CiliumNode>,
    networks: &[NodeNetwork],
    reported: &mut BTreeSet<String>,
) {
    let Some(node) = node else {
        return;
    };
    for overlap in overlaps(&pod_ranges(mode, &NodeInput::from(node)), networks) {
        let text = overlap.to_string();
        if reported.insert(text.clone()) {
            warn!(problem = %text, "pod range overlaps the node's networks; addresses in the overlap are refused");
        }
    }
}

/// Log each unusable entry of `node` (a `spec.ipam.pool` key or `spec.addresses` ip that is
/// not an address) not logged before (`reported`), with its field path.
pub(super) fn warn_new_node_problems(
    mode: IpamMode,
    node: Option<&CiliumNode>,
    reported: &mut BTreeSet<String>,
) {
    let Some(node) = node else {
        return;
    };
    for problem in node_problems(mode, &NodeInput::from(node)) {
        let text = problem.to_string();
        if reported.insert(text.clone()) {
            warn!(problem = %text, "CiliumNode entry ignored");
        }
    }
}

/// Refuse to start when live pods' endpoint records hold addresses of a family `config` turned
/// off: they could never be restored, and every ADD would wait for them.
///
/// # Errors
/// [`SanityError::FamilyOff`] naming the records, the family and the fix; or the records
/// cannot be listed.
pub(super) fn check_restorable(
    state_dir: &Path,
    config: &AgentConfig,
    records: &Records,
) -> Result<(), CheckError> {
    let (all, _) = records.all()?;
    let addrs: Vec<(String, IpAddr)> = all
        .iter()
        .filter(|r| r.result.is_some() && r.netns.exists())
        .flat_map(|r| r.addrs.iter().map(|a| (r.owner.clone(), a.ip)))
        .collect();
    let dir = state_dir.join(RECORDS_DIR).display().to_string();
    check_record_families(config.enable_ipv4, config.enable_ipv6, &addrs, &dir)?;
    Ok(())
}

/// Check the configured `mode` against the one the state directory recorded, given the
/// endpoint records of live pods, and record it when allowed.
///
/// # Errors
/// [`SanityError::ModeChange`] with the migration path, or the mode file cannot be read or
/// written.
pub(super) fn check_mode(
    state_dir: &Path,
    mode: IpamMode,
    records: &Records,
) -> Result<(), CheckError> {
    let path = state_dir.join(MODE_FILE);
    let io_error = |source| CheckError::StateFile {
        path: path.clone(),
        source,
    };
    let recorded = match std::fs::read_to_string(&path) {
        Ok(text) => {
            Some(
                text.trim()
                    .parse::<IpamMode>()
                    .map_err(|source| CheckError::ModeFile {
                        path: path.clone(),
                        source,
                    })?,
            )
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(e)),
    };
    let (all, _) = records.all()?;
    let live = all
        .iter()
        .filter(|r| r.result.is_some() && r.netns.exists())
        .count();
    let state_name = state_dir.display().to_string();
    match check_mode_change(recorded, mode, live, &state_name)? {
        ModeDecision::Keep => Ok(()),
        ModeDecision::Record => {
            if let Some(from) = recorded {
                info!(%from, to = %mode, pods = live, "IPAM mode changed");
            }
            crate::fsutil::write_private(&path, format!("{mode}\n").as_bytes(), true)
                .map_err(io_error)
        }
    }
}
