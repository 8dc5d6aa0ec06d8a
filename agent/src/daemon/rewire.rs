//! Rebuilding the datapath of a recorded attachment from its record: at start-up for every
//! record whose sandbox lives (bpffs may have lost every pin: a node reboot with persistent
//! state, a private bpffs, a pin layout change), and for a repeated ADD whose attachment was
//! lost. The record holds what the maps need: the addresses, their pools and masquerade bits,
//! and the pod's MAC in the recorded CNI result.

use agent_common::identity;

use super::{EndpointRecord, pool_ids::PoolIds, result::no_snat_flags};
use crate::datapath::{Datapath, DatapathError, PodSpec, endpoints::parse_mac};

/// Why an attachment's datapath could not be rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum RewireError {
    /// The record's CNI result names no pod interface with a MAC address.
    #[error(
        "the endpoint record of {container_id}/{ifname} has no pod interface MAC in its result; \
         DEL and ADD the pod again"
    )]
    NoPodMac {
        /// The attachment's container id.
        container_id: String,
        /// Its interface name.
        ifname: String,
    },
    /// A pool id could not be assigned.
    #[error("assigning the pool ids of {container_id}/{ifname}")]
    PoolIds {
        /// The attachment's container id.
        container_id: String,
        /// Its interface name.
        ifname: String,
        /// What failed.
        #[source]
        source: super::pool_ids::PoolIdsError,
    },
    /// The datapath refused.
    #[error("rebuilding the datapath of {container_id}/{ifname}")]
    Datapath {
        /// The attachment's container id.
        container_id: String,
        /// Its interface name.
        ifname: String,
        /// What failed.
        #[source]
        source: DatapathError,
    },
}

/// Attach `from_container` to the record's veth and write its interface, endpoint and IPCache
/// entries (idempotent). `Ok(false)`: the host-side veth is gone; nothing was changed.
///
/// # Errors
/// The record has no pod MAC, or the datapath refused.
pub(super) async fn rewire(
    datapath: &mut Datapath,
    pool_ids: &mut PoolIds,
    record: &EndpointRecord,
    default_pool: &str,
) -> Result<bool, RewireError> {
    let no_mac = || RewireError::NoPodMac {
        container_id: record.container_id.clone(),
        ifname: record.ifname.clone(),
    };
    let pod_mac = record
        .result
        .as_ref()
        .and_then(|r| r.interfaces.iter().find(|i| i.sandbox.is_some()))
        .and_then(|i| parse_mac(&i.mac))
        .ok_or_else(no_mac)?;
    let addrs: Vec<_> = record.addrs.iter().map(|a| a.ip).collect();
    let flags = no_snat_flags(record.addrs.iter().map(|a| (a.ip, a.skip_masquerade)));
    let pool_id = pool_ids
        .for_addrs(
            record.addrs.iter().map(|a| (a.ip, a.pool.as_str())),
            default_pool,
        )
        .map_err(|source| RewireError::PoolIds {
            container_id: record.container_id.clone(),
            ifname: record.ifname.clone(),
            source,
        })?;
    let spec = PodSpec {
        container_id: &record.container_id,
        netns: &record.netns,
        ifname: &record.ifname,
        addrs: &addrs,
        gateway_v4: None,
        gateway_v6: None,
        identity: identity::INIT,
        pool_id,
        flags,
        mtu: None,
    };
    datapath
        .restore_pod(&spec, pod_mac)
        .await
        .map_err(|source| RewireError::Datapath {
            container_id: record.container_id.clone(),
            ifname: record.ifname.clone(),
            source,
        })
}
