//! The daemon's private mount namespace and configuration: which host paths get a temporary
//! directory bound over them, the script `unshare --mount` runs to do it, and containerd's
//! `config.toml` keeping root, state and socket under the base directory. Only text and path
//! checks: nothing here mounts, starts or removes anything itself.

use std::{fmt::Write as _, fs, path::Path};

/// Host paths `ctr` and the shims use, each replaced by a temporary directory inside the
/// daemon's mount namespace: (host path, name of the directory under the base directory).
pub(super) const BOUND: [(&str, &str); 4] = [
    ("/etc/cni/net.d", "net.d"),
    ("/opt/cni/bin", "cni-bin"),
    ("/var/lib/cni", "cni-cache"),
    ("/run/containerd", "run"),
];

/// The bpffs mount point: as an extra host path it gets a fresh bpffs, not a directory.
const BPFFS: &str = "/sys/fs/bpf";

/// The bound paths: [`BOUND`] and then each of `extra` (the hostPath volumes of a manifest), as
/// (host path, name of the directory under the base directory).
pub(super) fn bound_paths(extra: &[&str]) -> Vec<(String, String)> {
    let mut bound: Vec<(String, String)> = BOUND
        .iter()
        .map(|(path, name)| ((*path).to_owned(), (*name).to_owned()))
        .collect();
    for path in extra {
        if !bound.iter().any(|(known, _)| known == path) {
            let name = format!("host{}", path.replace('/', "-"));
            bound.push(((*path).to_owned(), name));
        }
    }
    bound
}

/// containerd's configuration: everything under `base`, the CRI plugin and the snapshotters
/// that cannot work here disabled.
pub(super) fn config_toml(base: &Path, socket: &Path) -> String {
    let b = base.display();
    format!(
        "version = 2\n\
         root = \"{b}/root\"\n\
         state = \"{b}/state\"\n\
         disabled_plugins = [\"io.containerd.grpc.v1.cri\", \"io.containerd.snapshotter.v1.aufs\", \
         \"io.containerd.snapshotter.v1.btrfs\", \"io.containerd.snapshotter.v1.zfs\", \
         \"io.containerd.snapshotter.v1.devmapper\"]\n\
         [grpc]\n  address = \"{}\"\n\
         [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{b}/opt\"\n",
        socket.display()
    )
}

/// The shell script run by `unshare --mount`: bind every bound directory (overlaying the
/// nearest existing parent of a path the host lacks, so it can be made), then exec `"$@"`.
/// The paths beyond [`BOUND`] are hostPath volumes: each is made a shared mount, so what is
/// mounted below it later (a pod's netns) reaches containers that bind it `rslave`, as on a
/// node; `/sys/fs/bpf` among them gets a bpffs of its own.
#[must_use]
pub fn mount_script(base: &Path, bound: &[(String, String)]) -> String {
    let mut script = String::from("set -e\n");
    let mut overlaid = Vec::new();
    for (n, (target, name)) in bound.iter().enumerate() {
        let target = Path::new(target);
        if !target.exists() {
            let parent = target.ancestors().find(|p| p.exists()).expect("/ exists");
            assert!(
                parent != Path::new("/"),
                "{} has no parent directory to overlay",
                target.display()
            );
            if !overlaid.contains(&parent) {
                overlaid.push(parent);
                let layer = base.join(format!("overlay{n}"));
                let (p, l) = (parent.display(), layer.display());
                let _ = writeln!(
                    script,
                    "mkdir -p {l}/upper {l}/work\n\
                     mount -t overlay overlay -o lowerdir={p},upperdir={l}/upper,workdir={l}/work {p}"
                );
            }
            let _ = writeln!(script, "mkdir -p {}", target.display());
        }
        if target == Path::new(BPFFS) {
            let _ = writeln!(script, "mount -t bpf bpf {BPFFS}");
        } else {
            let _ = writeln!(
                script,
                "mount --bind {} {}",
                base.join(name).display(),
                target.display()
            );
        }
        if n >= BOUND.len() {
            let _ = writeln!(script, "mount --make-shared {}", target.display());
        }
    }
    script.push_str("exec \"$@\"\n");
    script
}

/// Whether `path` resolves (symlinks followed, as far as it exists) to somewhere under `dir`
/// (`/var/run/x` is under `/run` on Debian).
pub(super) fn fs_path_under(path: &Path, dir: &Path) -> bool {
    let existing = path.ancestors().find(|p| p.exists()).unwrap_or(path);
    fs::canonicalize(existing).is_ok_and(|real| real.starts_with(dir))
}
