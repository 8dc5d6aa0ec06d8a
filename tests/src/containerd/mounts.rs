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

/// The shell script run by `unshare --mount`: bind every [`BOUND`] directory (overlaying the
/// nearest existing parent of a path the host lacks, so it can be made), then exec `"$@"`.
#[must_use]
pub fn mount_script(base: &Path) -> String {
    let mut script = String::from("set -e\n");
    let mut overlaid = Vec::new();
    for (n, (target, name)) in BOUND.iter().enumerate() {
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
        let _ = writeln!(
            script,
            "mount --bind {} {}",
            base.join(name).display(),
            target.display()
        );
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
