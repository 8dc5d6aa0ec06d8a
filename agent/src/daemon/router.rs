//! The router (gateway) address of each family: restored from the state directory or
//! allocated with owner `router` once every endpoint address is restored. Must not touch the
//! endpoint records.

use std::{net::IpAddr, path::Path, sync::Arc, time::Instant};

use tracing::{info, warn};

use super::State;

/// Owner of the router (gateway) addresses, as in Cilium.
pub const ROUTER_OWNER: &str = "router";
/// The router addresses (and their pools) under the state directory.
pub const ROUTER_FILE: &str = "router.json";

/// Restore the router addresses from the state dir, or allocate them (owner `router`).
pub(super) fn ensure_router(state: &mut State, state_dir: &Path) {
    if !state.router.is_empty() || state.ipam.ready().is_err() {
        return;
    }
    let path = state_dir.join(ROUTER_FILE);
    let saved: Vec<(IpAddr, String)> = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let now = Instant::now();
    let mut restored = Vec::new();
    for (ip, pool) in &saved {
        match state.ipam.restore(*ip, ROUTER_OWNER, pool, now) {
            Ok(()) => restored.push((*ip, pool.clone())),
            Err(error) => {
                warn!(%error, %ip, "router address no longer available; allocating a new one");
            }
        }
    }
    if restored.len() != saved.len() || saved.is_empty() {
        for (ip, pool) in &restored {
            state.ipam.release(*ip, pool);
        }
        let snapshot = Arc::clone(&state.snapshot);
        let pools: Vec<_> = snapshot.pools.values().cloned().collect();
        match state
            .ipam
            .allocate(ROUTER_OWNER, snapshot.as_ref(), &pools, &mut state.rng, now)
        {
            Ok(list) => restored = list.into_iter().map(|a| (a.ip, a.pool)).collect(),
            Err(error) => {
                warn!(%error, "allocating router addresses; retrying on the next change");
                return;
            }
        }
    }
    if let Ok(body) = serde_json::to_vec(&restored)
        && let Err(error) = std::fs::write(&path, body)
    {
        warn!(%error, path = %path.display(), "saving router addresses");
    }
    state.router = restored.into_iter().map(|(ip, _)| ip).collect();
    info!(router = ?state.router, "router addresses");
}
