//! weft's container image (`cargo xtask image`) run as the DaemonSet runs it. The OCI archive
//! is imported into a private containerd (Debian's, see `weft_tests::containerd`); the
//! DaemonSet's `install-cni` init container and then its `weft-agent` container run from it with
//! exactly what `deploy/agent/daemonset.yaml` says — read from that file, not from a copy: the
//! image, the command, the environment, the securityContext (capabilities with everything
//! else dropped, not privileged, read-only root, no new privileges, the runtime's seccomp
//! profile), the host network and the hostPath mounts with their propagation. Each hostPath is
//! a private directory of containerd's mount namespace (`/sys/fs/bpf` a bpffs of its own), so
//! the host's stay untouched; the ConfigMap volume holds `deploy/agent/configmap.yaml`'s data.
//!
//! The API server is weft's Kubernetes emulator, and weft-operator from the same image hands out
//! the pool blocks, with its Deployment's user and no capability (see [`image_operator`]). The
//! one thing the kubelet would add and this adds instead is the agent's credentials: a kubeconfig mounted read-only and named by
//! `KUBECONFIG`, standing in for the service-account token and `KUBERNETES_SERVICE_*` (the
//! emulator speaks plain HTTP).
//!
//! Then, from the node: the plugin the init container installed (a static executable, since
//! it runs with the node's C library) adds two pods as a runtime would, with the network
//! configuration it installed; they ping each other through the datapath (counters read from
//! the pins on the node's bpffs, which proves the pins outlive the container); the agent
//! process holds exactly the manifest's capabilities. A capability or mount the agent needs
//! and the manifest lacks makes a step fail here. Runs as root.

use std::{
    collections::BTreeMap,
    fs,
    net::IpAddr,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use agent_common::maps;
use serde_json::{Value, json};
use weft_tests::{
    ThreadNetNs,
    agent::{CniCall, http_get, ips_of, run_cni},
    containerd::{
        Containerd, pinned_counters,
        podspec::{self, Node},
    },
    kube::Emulator,
    operator::Operator,
    require_root, run, unique, wait_until,
};

/// The containerd namespace the kubelet's CRI uses.
const NAMESPACE: &str = "k8s.io";
/// The node the agent serves.
const NODE: &str = "node1";
/// Where the stand-in credentials are mounted in the agent's container.
const CREDENTIALS: &str = "/var/run/secrets/weft-test";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The first document of a YAML manifest as JSON.
fn manifest(path: &str) -> Value {
    let file = workspace().join(path);
    let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The archive `cargo xtask image` writes (`cargo xtask test` builds it before the tests).
fn archive() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace().join("target"), |dir| workspace().join(dir));
    let file = target.join(format!("image/weft-{}.oci.tar", env!("CARGO_PKG_VERSION")));
    assert!(
        file.is_file(),
        "{} is missing: run `cargo xtask image` (cargo xtask test does it before the tests)",
        file.display()
    );
    file
}

/// `ctr`'s mount namespace (where the hostPaths are) and the node's network namespace.
fn on_node(ctrd: &Containerd, netns: &Path) -> Command {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--mount=/proc/{}/ns/mnt", ctrd.pid()))
        .arg(format!("--net={}", netns.display()))
        .arg("--");
    cmd
}

/// The plugin configuration a runtime hands `weft-cni`: the installed list's plugin with the
/// list's `cniVersion` and `name`, as libcni builds it.
fn plugin_config(conflist: &Value) -> String {
    let mut plugin = conflist["plugins"][0].clone();
    plugin["cniVersion"] = conflist["cniVersion"].clone();
    plugin["name"] = conflist["name"].clone();
    plugin.to_string()
}

/// CNI ADD or DEL of pod `name` through the installed plugin, run on the node.
fn cni(ctrd: &Containerd, node: &Path, conflist: &Value, command: &str, name: &str) -> CniCall {
    let netns = format!("/var/run/netns/{name}");
    let args =
        format!("K8S_POD_NAMESPACE=default;K8S_POD_NAME={name};K8S_POD_INFRA_CONTAINER_ID={name}");
    let env = [
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", name),
        ("CNI_NETNS", netns.as_str()),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin"),
        ("CNI_ARGS", args.as_str()),
    ];
    let mut cmd = on_node(ctrd, node);
    cmd.arg("/opt/cni/bin/weft-cni");
    run_cni(cmd, &env, &plugin_config(conflist))
}

/// CNI ADD of pod `name`, repeated as the kubelet repeats a sandbox's set-up while the agent
/// answers code 11 (try again later: the operator has not handed out the pool block yet).
fn add(ctrd: &Containerd, node: &Path, conflist: &Value, name: &str, log: &Path) -> CniCall {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let call = cni(ctrd, node, conflist, "ADD", name);
        if call.stdout["code"] != 11 || Instant::now() > deadline {
            assert_eq!(
                call.code,
                0,
                "ADD {name}: {}\n--- agent ---\n{}",
                call.stdout,
                fs::read_to_string(log).unwrap_or_default()
            );
            return call;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The `Cap*:`, `NoNewPrivs:` and `Seccomp:` lines of `/proc/<pid>/status`.
fn status_field(pid: u32, field: &str) -> String {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .map_or_else(
            || panic!("no {field} in /proc/{pid}/status"),
            |v| v.trim().to_owned(),
        )
}

/// The PID of task `id`'s process (`ctr task ls`).
fn task_pid(ctrd: &Containerd, id: &str) -> u32 {
    let out = run(ctrd.ctr(NAMESPACE).args(["task", "ls"]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            (cols.first() == Some(&id)).then(|| cols.get(1)?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no task {id}"))
}

fn cluster(emu: &Emulator) {
    for ns in ["default", "kube-system"] {
        emu.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }
    emu.put(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
        "spec": {},
        "status": {"addresses": [
            {"type": "InternalIP", "address": "192.0.2.10"},
            {"type": "Hostname", "address": NODE},
        ]},
    }));
    for pod in ["pod-a", "pod-b"] {
        emu.put(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": "default"},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]},
        }));
    }
}

/// Each key of the ConfigMap as a file, as the kubelet projects a configMap volume.
fn config_map_dir(base: &Path, config_map: &Value) -> PathBuf {
    let dir = base.join("config");
    fs::create_dir_all(&dir).expect("config dir");
    for (key, value) in config_map["data"].as_object().expect("ConfigMap data") {
        fs::write(
            dir.join(key),
            value.as_str().expect("ConfigMap values are strings"),
        )
        .expect("config key");
    }
    dir
}

#[test]
fn the_daemonset_runs_weft_from_the_image_with_its_own_privileges_and_mounts() {
    require_root();
    let archive = archive();
    let daemonset = manifest("deploy/agent/daemonset.yaml");
    let config_map = manifest("deploy/agent/configmap.yaml");
    let pod = &daemonset["spec"]["template"]["spec"];
    let [init] = pod["initContainers"]
        .as_array()
        .expect("initContainers")
        .as_slice()
    else {
        panic!("the DaemonSet has one init container, install-cni");
    };
    let [agent] = pod["containers"].as_array().expect("containers").as_slice() else {
        panic!("the DaemonSet has one container, weft-agent");
    };
    let host_paths: Vec<String> = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter_map(|v| v["hostPath"]["path"].as_str().map(str::to_owned))
        .collect();
    let host_paths: Vec<&str> = host_paths.iter().map(String::as_str).collect();

    let ctrd = Containerd::start_with(&host_paths);
    let images = ctrd.import_archive(NAMESPACE, &archive);
    for container in [init, agent] {
        assert!(
            images
                .iter()
                .any(|image| container["image"] == image.as_str()),
            "{} names image {}, but the archive holds {images:?}",
            container["name"],
            container["image"]
        );
    }

    let _node = ThreadNetNs::new();
    let netns = PathBuf::from(format!(
        "/proc/{}/task/{}/ns/net",
        std::process::id(),
        nix::unistd::gettid()
    ));
    let emu = Emulator::start();
    cluster(&emu);
    let base = std::env::temp_dir().join(unique("weft-image-"));
    let credentials = base.join("credentials");
    fs::create_dir_all(&credentials).expect("credentials dir");
    emu.write_kubeconfig(&credentials.join("kubeconfig"));
    let config = config_map_dir(&base, &config_map);
    let config_name = config_map["metadata"]["name"]
        .as_str()
        .expect("ConfigMap name");
    let node = Node {
        name: NODE.to_owned(),
        netns: netns.clone(),
        config_maps: BTreeMap::from([(config_name.to_owned(), config.clone())]),
        env: vec![("KUBECONFIG".into(), format!("{CREDENTIALS}/kubeconfig"))],
        mounts: vec![(credentials.clone(), CREDENTIALS.to_owned())],
    };
    let mut operator = image_operator(&ctrd, &base, &credentials.join("kubeconfig"), &config);
    operator.spawn();

    let conflist = install_cni(&ctrd, pod, init, &node);
    let log = ctrd.start_pod_container(
        NAMESPACE,
        "weft-agent",
        &podspec::ctr_run_args(pod, agent, "weft-agent", &node),
    );
    wait_ready(&ctrd, agent, &log, &operator);
    check_privileges(task_pid(&ctrd, "weft-agent"), agent);
    let operator_pid = operator.pid().expect("the operator runs");
    assert_eq!(
        status_field(operator_pid, "CapEff:"),
        "0000000000000000",
        "operator capabilities"
    );
    let user = manifest("deploy/operator/deployment.yaml")["spec"]["template"]["spec"]
        ["containers"][0]["securityContext"]["runAsUser"]
        .to_string();
    let uids = status_field(operator_pid, "Uid:");
    assert!(
        uids.split_whitespace().all(|uid| uid == user),
        "the operator runs as its Deployment's user {user}, not {uids}"
    );
    pods_ping(&ctrd, &netns, &conflist, &log);

    run(ctrd.ctr(NAMESPACE).args(["task", "kill", "weft-agent"]));
    wait_until(
        "the agent to stop on SIGTERM",
        Duration::from_secs(30),
        || ctrd.task_status(NAMESPACE, "weft-agent").as_deref() == Some("STOPPED"),
    );
    run(ctrd.ctr(NAMESPACE).args(["task", "rm", "weft-agent"]));
    run(ctrd.ctr(NAMESPACE).args(["containers", "rm", "weft-agent"]));
    drop(operator);
    run(ctrd
        .ctr(NAMESPACE)
        .args(["images", "unmount"])
        .arg(base.join("operator-image")));
    ctrd.shutdown();
    let _ = fs::remove_dir_all(&base);
}

/// weft-operator from the image (mounted read-only by `ctr images mount`) as
/// `deploy/operator/deployment.yaml` runs it: its user and group, every capability dropped, no
/// new privileges (`setpriv`: ctr 1.6 cannot set a container's user), its arguments with the
/// ConfigMap directory, and the node's network (hostNetwork).
fn image_operator(ctrd: &Containerd, base: &Path, kubeconfig: &Path, config: &Path) -> Operator {
    let deployment = manifest("deploy/operator/deployment.yaml");
    let [container] = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .as_slice()
    else {
        panic!("the operator's Deployment has one container");
    };
    let image = container["image"].as_str().expect("operator image");
    let root = base.join("operator-image");
    fs::create_dir_all(&root).expect("image mount point");
    run(ctrd
        .ctr(NAMESPACE)
        .args(["images", "mount", image])
        .arg(&root));
    let context = &container["securityContext"];
    assert!(
        context["capabilities"]["drop"] == json!(["ALL"])
            && context["capabilities"]["add"].is_null()
            && context["allowPrivilegeEscalation"] == false,
        "the operator drops every capability and cannot gain any: {context}"
    );
    let mut command = vec![
        "setpriv".to_owned(),
        format!("--reuid={}", context["runAsUser"]),
        format!("--regid={}", context["runAsGroup"]),
        "--clear-groups".into(),
        "--inh-caps=-all".into(),
        "--bounding-set=-all".into(),
        "--no-new-privs".into(),
        "--".into(),
    ];
    let program = container["command"].as_array().expect("operator command");
    let binary = format!(
        "/proc/{}/root{}/usr/bin/{}",
        ctrd.pid(),
        root.display(),
        program[0].as_str().expect("program")
    );
    command.push(binary);
    let mount = container["volumeMounts"][0]["mountPath"]
        .as_str()
        .expect("config mount");
    let args: Vec<String> = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|arg| {
            arg.as_str()
                .expect("args")
                .replace(mount, &config.display().to_string())
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut operator = Operator::new(kubeconfig, &args);
    operator.command = command;
    operator.env = vec![
        ("POD_NAME".into(), "weft-operator-0".into()),
        ("POD_NAMESPACE".into(), "kube-system".into()),
    ];
    operator
}

/// The `install-cni` init container: the plugin and the network configuration land in the
/// node's directories. Returns the configuration list.
fn install_cni(ctrd: &Containerd, pod: &Value, init: &Value, node: &Node) -> Value {
    let out = ctrd.run_pod_container(
        NAMESPACE,
        "install-cni",
        &podspec::ctr_run_args(pod, init, "install-cni", node),
    );
    assert!(
        out.status.success(),
        "install-cni failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let plugin = ctrd.cni_bin.join("weft-cni");
    let ldd = Command::new("ldd").arg(&plugin).output().expect("ldd");
    let ldd =
        String::from_utf8_lossy(&ldd.stdout).into_owned() + &String::from_utf8_lossy(&ldd.stderr);
    assert!(
        ldd.contains("statically linked") || ldd.contains("not a dynamic executable"),
        "the installed weft-cni must not need the node's shared libraries; ldd says:\n{ldd}"
    );
    let conflist_file = ctrd.net_d.join("05-weft.conflist");
    let text = fs::read(&conflist_file)
        .unwrap_or_else(|e| panic!("install-cni wrote no {}: {e}", conflist_file.display()));
    serde_json::from_slice(&text).expect("conflist JSON")
}

/// Until the agent's readiness probe (the manifest's) passes.
fn wait_ready(ctrd: &Containerd, agent: &Value, log: &Path, operator: &Operator) {
    let probe = &agent["readinessProbe"]["httpGet"];
    let addr = format!(
        "{}:{}",
        probe["host"].as_str().expect("probe host"),
        probe["port"]
    );
    let path = probe["path"].as_str().expect("probe path");
    wait_until(
        "the agent's readiness probe",
        Duration::from_mins(1),
        || {
            let ready =
                std::net::TcpStream::connect(&addr).is_ok() && http_get(&addr, path).0 == 200;
            let stopped = ctrd.task_status(NAMESPACE, "weft-agent").as_deref() == Some("STOPPED");
            assert!(
                ready || !stopped,
                "the agent's container stopped:\n{}\n--- operator ---\n{}",
                fs::read_to_string(log).unwrap_or_default(),
                operator.log()
            );
            ready
        },
    );
}

/// The agent holds exactly the manifest's capabilities, with the manifest's no_new_privs and
/// seccomp filter.
fn check_privileges(pid: u32, agent: &Value) {
    let wanted = podspec::capability_mask(agent);
    for field in ["CapEff:", "CapPrm:"] {
        let held = u64::from_str_radix(&status_field(pid, field), 16).expect("capability mask");
        assert_eq!(
            held, wanted,
            "{field} of the agent {held:#x}, the manifest grants {wanted:#x}"
        );
    }
    // Kubernetes refuses `allowPrivilegeEscalation: false` beside CAP_SYS_ADMIN, and without
    // it the kubelet leaves no_new_privs off.
    let context = &agent["securityContext"];
    let no_new_privs = if context["allowPrivilegeEscalation"] == false {
        "1"
    } else {
        "0"
    };
    assert_eq!(
        status_field(pid, "NoNewPrivs:"),
        no_new_privs,
        "allowPrivilegeEscalation"
    );
    let seccomp = if context["seccompProfile"]["type"] == "RuntimeDefault" {
        "2"
    } else {
        "0"
    };
    assert_eq!(status_field(pid, "Seccomp:"), seccomp, "seccompProfile");
}

/// Two pods added from the node by the installed plugin ping each other through the
/// datapath, whose counters are read from the pins on the node's bpffs; then both are deleted.
fn pods_ping(ctrd: &Containerd, netns: &Path, conflist: &Value, log: &Path) {
    for name in ["pod-a", "pod-b"] {
        run(on_node(ctrd, netns).args(["ip", "netns", "add", name]));
    }
    let a = add(ctrd, netns, conflist, "pod-a", log);
    let b = add(ctrd, netns, conflist, "pod-b", log);
    let pins = ctrd.host_path("/sys/fs/bpf").join("weft");
    assert!(
        pins.join(maps::COUNTERS).exists(),
        "the agent's pins are not on the node's bpffs ({}): is /sys/fs/bpf mounted from the host?",
        pins.display()
    );
    let before = pinned_counters(&pins);
    for (from, to) in [("pod-a", ips_of(&b)), ("pod-b", ips_of(&a))] {
        let to: IpAddr = to[0];
        let out = on_node(ctrd, netns)
            .args(["ip", "netns", "exec", from, "ping", "-c", "2", "-W", "2"])
            .arg(to.to_string())
            .output()
            .expect("ping");
        assert!(
            out.status.success(),
            "{from} cannot ping {to}:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let after = pinned_counters(&pins);
    assert!(
        after["redirect_local"] >= before["redirect_local"] + 8,
        "the pings did not go through the datapath: {before:?} → {after:?}"
    );

    for name in ["pod-a", "pod-b"] {
        let del = cni(ctrd, netns, conflist, "DEL", name);
        assert_eq!(del.code, 0, "DEL {name}: {}", del.stdout);
        run(on_node(ctrd, netns).args(["ip", "netns", "del", name]));
    }
}
