//! The one image every container runs, built on the spot because there is no registry:
//! `/bin/busybox` (the static build) and a link per applet in one layer, written as a
//! docker-archive tarball under the base directory and imported with `ctr images import`. It
//! reads the host's busybox and writes only under [`Containerd::base`].

use std::{fs, os::unix::fs::symlink, path::Path, process::Command};

use serde_json::json;

use super::Containerd;
use crate::run;

/// The image every container runs: busybox (static) and its applet links, one layer.
pub const IMAGE: &str = "weft.test/busybox:1";

impl Containerd {
    /// `ctr images import` the busybox image into containerd namespace `namespace`.
    pub fn import_image(&self, namespace: &str) {
        self.note_namespace(namespace);
        run(self
            .ctr(namespace)
            .args(["images", "import"])
            .arg(&self.image_tar));
    }

    /// `ctr images import` an OCI archive (`cargo xtask image`'s) into `namespace`; returns
    /// the names of the images it holds, as `ctr` registered them.
    #[must_use]
    pub fn import_archive(&self, namespace: &str, archive: &Path) -> Vec<String> {
        self.note_namespace(namespace);
        let out = run(self
            .ctr(namespace)
            .args(["images", "import", "--all-platforms"])
            .arg(archive));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.strip_prefix("unpacking "))
            .filter_map(|rest| rest.split_whitespace().next())
            .map(str::to_owned)
            .collect()
    }

    /// Make the image: `/bin/busybox` and a link per applet, one layer, docker-archive layout
    /// (`manifest.json`, the config, the layer tarball).
    pub(super) fn build_image(&self) {
        let dir = self.base.join("image");
        let bin = dir.join("rootfs/bin");
        fs::create_dir_all(&bin).expect("image rootfs");
        for empty in ["proc", "sys", "dev", "etc", "tmp"] {
            fs::create_dir_all(dir.join("rootfs").join(empty)).expect("rootfs dir");
        }
        fs::copy("/bin/busybox", bin.join("busybox")).expect("copy /bin/busybox");
        let list = run(Command::new("/bin/busybox").arg("--list"));
        for applet in String::from_utf8_lossy(&list.stdout).lines() {
            if applet != "busybox" {
                symlink("busybox", bin.join(applet)).expect("applet link");
            }
        }
        run(Command::new("tar")
            .args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
            .arg(dir.join("rootfs"))
            .arg("-cf")
            .arg(dir.join("layer.tar"))
            .arg("."));
        let sum = run(Command::new("sha256sum").arg(dir.join("layer.tar")));
        let digest = String::from_utf8_lossy(&sum.stdout)
            .split_whitespace()
            .next()
            .expect("sha256sum output")
            .to_owned();
        let config = json!({
            "architecture": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
            "os": "linux",
            "config": {"Env": ["PATH=/bin"], "Cmd": ["sh"]},
            "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{digest}")]},
        });
        fs::write(dir.join("config.json"), config.to_string()).expect("image config");
        let manifest =
            json!([{"Config": "config.json", "RepoTags": [IMAGE], "Layers": ["layer.tar"]}]);
        fs::write(dir.join("manifest.json"), manifest.to_string()).expect("manifest");
        run(Command::new("tar")
            .arg("-C")
            .arg(&dir)
            .arg("-cf")
            .arg(&self.image_tar)
            .args(["manifest.json", "config.json", "layer.tar"]));
    }
}
