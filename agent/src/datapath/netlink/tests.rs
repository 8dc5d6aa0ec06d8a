//! Root-only tests of the pod-interface wiring, each in private namespaces.
use std::{
    process::Command,
    sync::atomic::{AtomicU32, Ordering},
};

use nix::sched::CloneFlags;
use serde_json::Value;

use super::*;
use crate::datapath::netns::NetNsError;

/// Runs `test` on a fresh thread whose netns is private (the "node"), on
/// a current-thread runtime, so tests never touch the root netns.
fn on_private_node<F: Future<Output = ()>>(test: impl FnOnce() -> F + Send + 'static) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "netlink tests need root (CAP_NET_ADMIN, CAP_SYS_ADMIN) for veths and namespaces; run them as root"
    );
    let node = std::thread::spawn(move || {
        nix::sched::unshare(CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        rt.expect("tokio runtime").block_on(test());
    });
    if let Err(panic) = node.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Runs `ip -j <args>`; from the node thread it sees the node netns.
fn ip_json(args: &[&str]) -> Value {
    let out = Command::new("ip")
        .arg("-j")
        .args(args)
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("ip -j output is JSON")
}

/// Whether some object in the JSON array has all `fields` with these values.
fn has(list: &Value, fields: &[(&str, Value)]) -> bool {
    let items = list.as_array().expect("a JSON array");
    items
        .iter()
        .any(|item| fields.iter().all(|(k, v)| &item[*k] == v))
}

/// A pod netns made with `ip netns add`, deleted on drop.
struct PodNs {
    name: String,
    path: PathBuf,
}

impl PodNs {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("weft-nltest-{}-{n}", std::process::id());
        let status = Command::new("ip").args(["netns", "add", &name]).status();
        assert!(
            status.expect("run ip netns add").success(),
            "ip netns add {name}"
        );
        let path = PathBuf::from(format!("/var/run/netns/{name}"));
        Self { name, path }
    }

    fn ip_json(&self, args: &[&str]) -> Value {
        ip_json(&[&["-n", self.name.as_str()], args].concat())
    }
}

impl Drop for PodNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

const POD_V4: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));
const POD_V6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 1, 2, 3));

fn spec<'a>(netns: &'a Path, host_ifname: &'a str, addrs: &'a [IpAddr]) -> PodIfaceSpec<'a> {
    PodIfaceSpec {
        netns,
        host_ifname,
        pod_ifname: "eth0",
        addrs,
        gateway_v4: Some(Ipv4Addr::new(10, 1, 0, 1)),
        gateway_v6: Some(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
        mtu: Some(1400),
    }
}

#[test]
fn create_configures_both_sides_and_delete_removes_them() {
    on_private_node(|| async {
        let pod = PodNs::new();
        let iface = create_pod_iface(&spec(&pod.path, "wfttest0", &[POD_V4, POD_V6]))
            .await
            .unwrap();
        assert_eq!(
            link_index("wfttest0").await.unwrap(),
            Some(iface.host_ifindex)
        );
        assert_ne!(iface.host_mac, iface.pod_mac);

        let link = pod.ip_json(&["link", "show", "dev", "eth0"]);
        assert!(has(
            &link,
            &[("ifindex", iface.pod_ifindex.into()), ("mtu", 1400.into())]
        ));
        let addrs = &pod.ip_json(&["addr", "show", "dev", "eth0"])[0]["addr_info"];
        assert!(has(
            addrs,
            &[("local", "10.1.2.3".into()), ("prefixlen", 32.into())]
        ));
        let v6 = [("local", "fd00::1:2:3".into()), ("prefixlen", 128.into())];
        assert!(has(
            addrs,
            &[v6[0].clone(), v6[1].clone(), ("nodad", true.into())]
        ));
        let tentative = [v6[0].clone(), ("tentative", true.into())];
        assert!(!has(addrs, &tentative), "usable at once: {addrs}");
        let routes = pod.ip_json(&["route"]);
        let default_v4 = [("dst", "default".into()), ("gateway", "10.1.0.1".into())];
        assert!(has(&routes, &default_v4), "{routes}");
        let on_link = [("dst", "10.1.0.1".into()), ("scope", "link".into())];
        assert!(has(&routes, &on_link), "{routes}");
        let routes6 = pod.ip_json(&["-6", "route"]);
        let default_v6 = [("dst", "default".into()), ("gateway", "fd00::1".into())];
        assert!(has(&routes6, &default_v6), "{routes6}");

        let node_routes = ip_json(&["route", "show", "dev", "wfttest0"]);
        let to_pod = [("dst", "10.1.2.3".into()), ("scope", "link".into())];
        assert!(has(&node_routes, &to_pod), "{node_routes}");
        let node_routes6 = ip_json(&["-6", "route", "show", "dev", "wfttest0"]);
        assert!(
            has(&node_routes6, &[("dst", "fd00::1:2:3".into())]),
            "{node_routes6}"
        );
        // The node knows each pod address's MAC from the start (no resolution to wait for).
        let neighbours = ip_json(&["neigh", "show", "dev", "wfttest0", "nud", "permanent"]);
        let pod_mac = iface.pod_mac.map(|b| format!("{b:02x}")).join(":");
        for addr in ["10.1.2.3", "fd00::1:2:3"] {
            let entry = [("dst", addr.into()), ("lladdr", pod_mac.clone().into())];
            assert!(has(&neighbours, &entry), "{addr}: {neighbours}");
        }

        assert!(delete_pod_iface("wfttest0").await.unwrap());
        assert_eq!(link_index("wfttest0").await.unwrap(), None);
        assert!(!delete_pod_iface("wfttest0").await.unwrap());
        let pod_links = pod.ip_json(&["link", "show"]);
        assert!(
            !has(&pod_links, &[("ifname", "eth0".into())]),
            "{pod_links}"
        );
    });
}

#[test]
fn missing_pod_netns_fails_without_leftovers() {
    on_private_node(|| async {
        let path = PathBuf::from(format!(
            "/var/run/netns/weft-nltest-gone-{}",
            std::process::id()
        ));
        let err = create_pod_iface(&spec(&path, "wfttest1", &[POD_V4]))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                NetlinkError::NetNs {
                    source: NetNsError::NotFound { .. }
                }
            ),
            "{err:?}"
        );
        assert_eq!(link_index("wfttest1").await.unwrap(), None);
    });
}

#[test]
fn failure_after_creation_deletes_the_veth_pair() {
    on_private_node(|| async {
        let pod = PodNs::new();
        // The second, identical address fails with EEXIST after the veth is in the pod.
        let err = create_pod_iface(&spec(&pod.path, "wfttest2", &[POD_V4, POD_V4]))
            .await
            .unwrap_err();
        assert!(matches!(err, NetlinkError::AddAddress { .. }), "{err:?}");
        assert_eq!(link_index("wfttest2").await.unwrap(), None);
        let pod_links = pod.ip_json(&["link", "show"]);
        assert_eq!(
            pod_links.as_array().map(Vec::len),
            Some(1),
            "only lo: {pod_links}"
        );
    });
}

#[test]
fn existing_host_link_is_refused_and_kept() {
    on_private_node(|| async {
        let (first, second) = (PodNs::new(), PodNs::new());
        let iface = create_pod_iface(&spec(&first.path, "wfttest3", &[POD_V4]))
            .await
            .unwrap();
        let err = create_pod_iface(&spec(&second.path, "wfttest3", &[POD_V4]))
            .await
            .unwrap_err();
        assert!(matches!(err, NetlinkError::AlreadyExists { .. }), "{err:?}");
        assert_eq!(
            link_index("wfttest3").await.unwrap(),
            Some(iface.host_ifindex)
        );
        let too_long = create_pod_iface(&spec(&first.path, "wft0123456789abc", &[])).await;
        assert!(matches!(too_long, Err(NetlinkError::InvalidIfname { .. })));
    });
}
