//! Pure pieces of the CNI operations: the IPAM owner of a request (including containerd's
//! `<namespace>-<name>` container ids), the CNI result of a wired pod, and pool ids for the
//! endpoints map. No IO and no locks here, except in [`pool_ids`], which owns the file that
//! persists the assigned ids.

#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "the CNI operations use it once daemon/ops.rs holds a PoolIds (issue 17)"
    )
)]
pub(super) mod pool_ids;

use std::net::IpAddr;

use agent_common::endpoint::{ENDPOINT_F_NO_SNAT_V4, ENDPOINT_F_NO_SNAT_V6};
use ipnet::IpNet;

use crate::{
    cni::{
        proto::PodRequest,
        types::{CniError, CniResult, Interface, IpConfig, Route, code},
    },
    datapath::{PoolIdPerFamily, endpoints::format_mac, host_ifname, netlink::PodIface},
    ipam::manager::Allocated,
    store::Snapshot,
};

/// The endpoints-map pool id of every address of a pod whose first address came from `pool`
/// (0 = the default pool): a 32-bit FNV hash of the name, the same for both families.
/// Superseded by [`pool_ids::PoolIds::for_addrs`] (assigned, persisted, per family) once
/// the CNI operations hold a [`pool_ids::PoolIds`].
#[must_use]
pub fn pool_id(pool: &str, default_pool: &str) -> PoolIdPerFamily {
    if pool == default_pool {
        return PoolIdPerFamily::both(0);
    }
    let mut hash: u32 = 0x811c_9dc5;
    for b in pool.bytes() {
        hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    PoolIdPerFamily::both(hash.max(1))
}

/// The endpoints-map `ENDPOINT_F_NO_SNAT_*` bits of addresses (address, keeps its source).
pub(super) fn no_snat_flags(addrs: impl IntoIterator<Item = (IpAddr, bool)>) -> u32 {
    addrs
        .into_iter()
        .filter(|(_, skip_masquerade)| *skip_masquerade)
        .fold(0, |flags, (ip, _)| {
            flags
                | if ip.is_ipv4() {
                    ENDPOINT_F_NO_SNAT_V4
                } else {
                    ENDPOINT_F_NO_SNAT_V6
                }
        })
}

/// The IPAM owner of `pod`: `namespace/name` from `CNI_ARGS`. Without them (containerd's
/// `ctr run --cni` passes none) the Pod whose `<namespace>-<name>` equals the container id,
/// which is what `ctr -n <namespace> run --cni IMAGE <name>` produces; else the container id.
///
/// # Errors
/// More than one Pod matches (`a-b/c` and `a/b-c` for `a-b-c`): the error names them.
pub(super) fn owner_of(pod: &PodRequest, snapshot: &Snapshot) -> Result<String, CniError> {
    if !pod.pod_namespace.is_empty() && !pod.pod_name.is_empty() {
        return Ok(pod.owner());
    }
    let pods = pods_named_by(&pod.container_id, snapshot.pods.keys());
    match pods.as_slice() {
        [] => Ok(pod.owner()),
        [one] => Ok(one.clone()),
        many => Err(CniError::new(
            &pod.cni_version,
            code::IPAM_FAILED,
            format!("container id {} names more than one pod", pod.container_id),
            format!(
                "pods {} all match <namespace>-<name>; pass K8S_POD_NAMESPACE and K8S_POD_NAME \
                 in CNI_ARGS, or rename one",
                many.join(", ")
            ),
        )),
    }
}

/// `namespace/name` of every pod whose `<namespace>-<name>` is `container_id`.
fn pods_named_by<'a>(
    container_id: &str,
    pods: impl IntoIterator<Item = &'a (String, String)>,
) -> Vec<String> {
    pods.into_iter()
        .filter(|(ns, name)| {
            container_id
                .strip_prefix(ns.as_str())
                .and_then(|rest| rest.strip_prefix('-'))
                == Some(name.as_str())
        })
        .map(|(ns, name)| format!("{ns}/{name}"))
        .collect()
}

/// The CNI result of a wired pod: host and pod interfaces, one address per family with the
/// router address of that family as gateway, and a default route per family.
pub(super) fn build_result(
    version: &str,
    pod: &PodRequest,
    iface: &PodIface,
    allocated: &[Allocated],
    router: &[IpAddr],
) -> CniResult {
    let legacy = version == "0.4.0";
    let ips = allocated
        .iter()
        .map(|a| IpConfig {
            version: legacy.then(|| if a.ip.is_ipv4() { "4" } else { "6" }.to_owned()),
            address: IpNet::from(a.ip),
            gateway: router
                .iter()
                .copied()
                .find(|r| r.is_ipv4() == a.ip.is_ipv4()),
            interface: 1,
        })
        .collect();
    let default_routes = allocated
        .iter()
        .filter_map(|a| {
            let gw = router
                .iter()
                .copied()
                .find(|r| r.is_ipv4() == a.ip.is_ipv4())?;
            let dst = if a.ip.is_ipv4() { "0.0.0.0/0" } else { "::/0" };
            Some(Route {
                dst: dst.parse().ok()?,
                gw: Some(gw),
            })
        })
        .collect();
    CniResult {
        cni_version: version.to_owned(),
        interfaces: vec![
            Interface {
                name: host_ifname(&pod.container_id, &pod.ifname),
                mac: format_mac(iface.host_mac),
                sandbox: None,
            },
            Interface {
                name: pod.ifname.clone(),
                mac: format_mac(iface.pod_mac),
                sandbox: Some(pod.netns.display().to_string()),
            },
        ],
        ips,
        routes: default_routes,
        dns: serde_json::json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::pods_named_by;

    /// Pool ids are persisted in the pinned endpoints map (and the per-pool masquerade
    /// exclusions): a change of the hash would misattribute every running pod's pool on
    /// upgrade. Golden values, not the function compared with itself.
    #[test]
    fn pool_ids_are_stable_across_builds() {
        use super::pool_id;
        assert_eq!(pool_id("default", "default").v4, 0);
        assert_eq!(pool_id("blue", "default").v4, 2_197_550_541);
        assert_eq!(pool_id("mars", "default").v6, 3_749_382_760);
        assert_eq!(pool_id("default", "blue").v4, 2_470_140_894);
    }

    #[test]
    fn container_ids_name_pods_as_namespace_dash_name() {
        let pods: Vec<(String, String)> = [
            ("mars", "rover"),
            ("default", "web"),
            ("kube-system", "dns"),
        ]
        .map(|(ns, name)| (ns.to_owned(), name.to_owned()))
        .into();
        assert_eq!(pods_named_by("mars-rover", &pods), ["mars/rover"]);
        assert_eq!(pods_named_by("kube-system-dns", &pods), ["kube-system/dns"]);
        assert!(pods_named_by("mars-rove", &pods).is_empty());
        assert!(pods_named_by("marsrover", &pods).is_empty());
        assert!(pods_named_by("0123abcd", &pods).is_empty());
        let twins = [("a-b", "c"), ("a", "b-c")].map(|(ns, name)| (ns.to_owned(), name.to_owned()));
        assert_eq!(pods_named_by("a-b-c", &twins).len(), 2);
    }
}
