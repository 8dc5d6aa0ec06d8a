//! Bad input and faults: a pinned map of the wrong shape, a pod whose netns vanished, unknown
//! removals, and missing privileges. Each must fail clearly and leave nothing behind.

use std::{
    net::{IpAddr, Ipv4Addr},
    path::Path,
    process::Command,
};

use agent_common::maps;
use weft_agent::datapath::{
    AttachMode, Datapath, DatapathConfig, DatapathError, PodSpec, PoolIdPerFamily,
};
use weft_tests::{Node, ThreadNetNs, report, require_root, run, unique};

struct PinDir(std::path::PathBuf);

impl Drop for PinDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn pinned_map_of_the_wrong_shape_is_refused_with_the_fix() {
    require_root();
    let _netns = ThreadNetNs::new();
    let dir = PinDir(Path::new("/sys/fs/bpf").join(unique("weft-test-")));
    // Load once so bpffs is mounted and the dir exists, then replace the endpoints pin with a
    // map of another value size, as an older weft with another layout would have left it.
    drop(
        Datapath::load(&DatapathConfig {
            pin_dir: dir.0.clone(),
            ..Default::default()
        })
        .expect("first load"),
    );
    let pin = dir.0.join(maps::ENDPOINTS);
    std::fs::remove_file(&pin).expect("unpin");
    run(Command::new("bpftool")
        .args(["map", "create"])
        .arg(&pin)
        .args([
            "type",
            "hash",
            "key",
            "20",
            "value",
            "16",
            "entries",
            "16",
            "name",
            "weft_eps_v1",
        ]));
    let err = Datapath::load(&DatapathConfig {
        pin_dir: dir.0.clone(),
        ..Default::default()
    })
    .expect_err("must refuse");
    assert!(
        matches!(
            err,
            DatapathError::PinnedMapMismatch {
                what: "value size",
                pinned: 16,
                expected: 32,
                ..
            }
        ),
        "{err:?}"
    );
    let text = report(&err);
    assert!(
        text.contains(&pin.display().to_string()) && text.contains("rm "),
        "{text}"
    );
    // The foreign map is left untouched (never silently reused or replaced).
    let out = run(Command::new("bpftool")
        .args(["-j", "map", "show", "pinned"])
        .arg(&pin));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"bytes_value\":16"));
}

#[test]
fn pod_whose_netns_vanished_leaves_nothing_behind() {
    // TCX: a half-made attachment would leave a link pin.
    let mut node = Node::with_attach_mode(AttachMode::Tcx);
    let missing = Path::new("/var/run/netns").join(unique("gone"));
    let addrs = [IpAddr::V4(Ipv4Addr::new(10, 77, 0, 50))];
    let spec = PodSpec {
        container_id: "vanished",
        netns: &missing,
        ifname: "eth0",
        addrs: &addrs,
        gateway_v4: Some(weft_tests::GATEWAY_V4),
        gateway_v6: None,
        identity: 300,
        pool_id: PoolIdPerFamily::default(),
        flags: 0,
        mtu: None,
    };
    let err = node
        .runtime
        .block_on(node.datapath.add_pod(&spec))
        .expect_err("netns is gone");
    let text = report(&err);
    assert!(
        text.contains(&missing.display().to_string()),
        "error names the netns: {text}"
    );
    assert!(
        node.links_named("wft").is_empty(),
        "half-made veth left: {:?}",
        node.links_named("")
    );
    assert!(node.datapath.list_endpoints().expect("list").is_empty());
    assert!(
        node.datapath
            .attached_interfaces()
            .expect("links")
            .is_empty()
    );
}

#[test]
fn removing_unknown_things_is_a_no_op() {
    let mut node = Node::new();
    let pod = node.add_pod(1);
    assert!(
        !node
            .datapath
            .remove_endpoint("10.77.9.9".parse().expect("ip"))
            .expect("no-op")
    );
    assert!(
        !node
            .runtime
            .block_on(node.datapath.remove_pod("never-existed", "eth0"))
            .expect("no-op")
    );
    assert!(!node.datapath.remove_iface(999_999).expect("no-op"));
    assert_eq!(
        node.datapath.list_endpoints().expect("list").len(),
        2,
        "pod {} untouched",
        pod.id
    );
}

#[test]
fn unprivileged_agent_names_what_it_needs() {
    require_root();
    let agent = weft_tests::bin_path("weft-agent");
    let dir = PinDir(Path::new("/sys/fs/bpf").join(unique("weft-test-")));
    std::fs::create_dir_all(&dir.0).expect("pin dir");
    for pin_dir in [dir.0.clone(), dir.0.join("sub")] {
        let out = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
            ])
            .arg(&agent)
            .arg("--pin-dir")
            .arg(&pin_dir)
            // A command that loads the datapath (`bpf …` only opens existing pins).
            .args(["pod", "del", "--id", "nobody"])
            .output()
            .expect("setpriv");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "unprivileged agent succeeded?");
        assert!(
            stderr.contains("root") && stderr.contains("CAP_"),
            "unclear error: {stderr}"
        );
    }
}

#[test]
fn pins_of_retired_map_layouts_are_removed_on_load() {
    require_root();
    let _netns = ThreadNetNs::new();
    let dir = PinDir(Path::new("/sys/fs/bpf").join(unique("weft-test-")));
    std::fs::create_dir_all(&dir.0).expect("pin dir");
    let old = dir.0.join("weft_ctrs_v1");
    run(Command::new("bpftool")
        .args(["map", "create"])
        .arg(&old)
        .args([
            "type",
            "percpu_array",
            "key",
            "4",
            "value",
            "16",
            "entries",
            "6",
            "name",
            "weft_ctrs_v1",
        ]));
    let _dp = Datapath::load(&DatapathConfig {
        pin_dir: dir.0.clone(),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{}", report(&e)));
    assert!(!old.exists(), "the v1 counters pin is gone");
    assert!(
        dir.0.join(maps::COUNTERS).exists(),
        "the current one is pinned"
    );
}
