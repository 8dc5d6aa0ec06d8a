//! Pure pieces of the CNI operations: the IPAM owner of a request (including containerd's
//! `<namespace>-<name>` container ids), the CNI result of a wired pod, and the endpoints-map
//! masquerade bits. No IO and no locks here.

use std::net::IpAddr;

use agent_common::endpoint::{ENDPOINT_F_NO_SNAT_V4, ENDPOINT_F_NO_SNAT_V6};
use ipnet::IpNet;

use crate::{
    cni::{
        proto::PodRequest,
        types::{CniError, CniResult, Interface, IpConfig, Route, code},
    },
    datapath::{endpoints::format_mac, host_ifname, netlink::PodIface},
    ipam::manager::Allocated,
    store::Snapshot,
};

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
