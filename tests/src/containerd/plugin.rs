//! What `ctr run --cni` finds: CNI plugin binaries in the directory it sees as `/opt/cni/bin`
//! (optionally behind a wrapper that records every call), the one network configuration in
//! the directory it sees as `/etc/cni/net.d`, and the reader of those recorded calls. It writes
//! only into the daemon's bound directories and its base directory, never the host's.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

use serde_json::Value;

use super::Containerd;

impl Containerd {
    /// Copy a CNI plugin binary into the directory `ctr` sees as `/opt/cni/bin`.
    pub fn install_plugin(&self, binary: &Path) {
        let name = binary.file_name().expect("plugin file name");
        fs::copy(binary, self.cni_bin.join(name))
            .unwrap_or_else(|e| panic!("install {}: {e}", binary.display()));
    }

    /// Install `binary` behind a wrapper of the same name that records each call's `CNI_*`
    /// environment and stdin (in [`PluginTrace::dir`]) and then execs it with that stdin.
    #[must_use]
    pub fn install_traced_plugin(&self, binary: &Path) -> PluginTrace {
        let name = binary.file_name().expect("plugin file name");
        let real = self.base.join("traced").join(name);
        let dir = self.base.join("trace");
        fs::create_dir_all(real.parent().expect("parent")).expect("traced dir");
        fs::create_dir_all(&dir).expect("trace dir");
        fs::copy(binary, &real).unwrap_or_else(|e| panic!("copy {}: {e}", binary.display()));
        let (d, r) = (dir.display(), real.display());
        let script = format!(
            "#!/bin/sh\n\
             f={d}/$(date +%s%N)-$$\n\
             env | grep '^CNI_' > \"$f.env\"\n\
             cat > \"$f.stdin\"\n\
             exec {r} < \"$f.stdin\"\n"
        );
        let wrapper = self.cni_bin.join(name);
        fs::write(&wrapper, script).expect("write wrapper");
        fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod wrapper");
        PluginTrace { dir }
    }

    /// Make `conflist` the only network configuration `ctr run --cni` sees.
    pub fn install_conflist(&self, conflist: &Value) {
        for entry in fs::read_dir(&self.net_d).expect("net.d") {
            fs::remove_file(entry.expect("entry").path()).expect("remove old conflist");
        }
        let name = conflist["name"].as_str().expect("conflist name");
        let tmp = self.net_d.join(format!(".{name}.tmp"));
        fs::write(&tmp, conflist.to_string()).expect("write conflist");
        fs::rename(&tmp, self.net_d.join(format!("10-{name}.conflist"))).expect("conflist");
    }
}

/// The calls a traced plugin received (see [`Containerd::install_traced_plugin`]).
#[derive(Debug)]
pub struct PluginTrace {
    /// One `<time>-<pid>.env` and `.stdin` per call.
    pub dir: PathBuf,
}

/// One recorded plugin call.
#[derive(Debug, Clone)]
pub struct PluginCall {
    /// Every `CNI_*` variable (set ones, also when empty).
    pub env: BTreeMap<String, String>,
    /// The network configuration on stdin.
    pub stdin: Value,
}

impl PluginCall {
    /// The value of `CNI_<name>`; `None` if it was not set at all.
    #[must_use]
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env.get(&format!("CNI_{name}")).map(String::as_str)
    }
}

impl PluginTrace {
    /// Every call so far, oldest first.
    #[must_use]
    pub fn calls(&self) -> Vec<PluginCall> {
        let mut stems: Vec<PathBuf> = fs::read_dir(&self.dir)
            .expect("trace dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "env"))
            .map(|p| p.with_extension(""))
            .collect();
        stems.sort();
        stems
            .iter()
            .map(|stem| {
                let env = fs::read_to_string(stem.with_extension("env")).expect("trace env");
                let stdin = fs::read(stem.with_extension("stdin")).expect("trace stdin");
                PluginCall {
                    env: env
                        .lines()
                        .filter_map(|l| l.split_once('='))
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .collect(),
                    stdin: serde_json::from_slice(&stdin).unwrap_or(Value::Null),
                }
            })
            .collect()
    }

    /// The calls of `command` for container `container_id`, oldest first.
    #[must_use]
    pub fn calls_for(&self, command: &str, container_id: &str) -> Vec<PluginCall> {
        self.calls()
            .into_iter()
            .filter(|c| {
                c.var("COMMAND") == Some(command) && c.var("CONTAINERID") == Some(container_id)
            })
            .collect()
    }
}
