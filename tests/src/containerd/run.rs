//! `ctr` invocations that run or inspect containers without keeping a handle on them: one
//! run to completion, a detached run, a removal behind `ctr run`'s back, the task and container
//! listings, and where libcni caches a result. The foreground run with a handle is in
//! `container`; this module never stops the daemon or touches the host.

use std::{
    path::PathBuf,
    process::Output,
    time::{Duration, Instant},
};

use super::{Containerd, IMAGE};
use crate::run;

impl Containerd {
    /// The `ctr run` arguments shared by every way of running a container (before the image).
    pub(super) fn run_args(&self, namespace: &str, id: &str) -> Vec<String> {
        vec![
            "run".into(),
            "--cni".into(),
            "--cgroup".into(),
            format!("/{}/{namespace}-{id}", self.cgroup),
        ]
    }

    /// `ctr run --cni --rm IMAGE id args…` (without `--cni` unless `network`) to completion;
    /// its output and wall-clock time.
    #[must_use]
    pub fn run_once(
        &self,
        namespace: &str,
        id: &str,
        network: bool,
        args: &[&str],
    ) -> (Output, Duration) {
        self.note_namespace(namespace);
        let mut cmd = self.ctr(namespace);
        let run_args = self.run_args(namespace, id);
        cmd.args(run_args.iter().filter(|a| network || *a != "--cni"))
            .arg("--rm")
            .arg(IMAGE)
            .arg(id)
            .args(args);
        let start = Instant::now();
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        (out, start.elapsed())
    }

    /// `ctr run --cni -d IMAGE id args…`: ADD happens, but no DEL ever will.
    pub fn run_detached(&self, namespace: &str, id: &str, args: &[&str]) {
        self.note_namespace(namespace);
        run(self
            .ctr(namespace)
            .args(self.run_args(namespace, id))
            .arg("-d")
            .arg(IMAGE)
            .arg(id)
            .args(args));
    }

    /// Kill and delete task and container `id` without `ctr run` in the foreground: no DEL.
    pub fn remove(&self, namespace: &str, id: &str) {
        run(self.ctr(namespace).args(["task", "rm", "--force", id]));
        run(self.ctr(namespace).args(["containers", "rm", id]));
    }

    /// The status column of `ctr task ls` for `id` (`RUNNING`, `STOPPED`, …), if it has a task.
    #[must_use]
    pub fn task_status(&self, namespace: &str, id: &str) -> Option<String> {
        let out = run(self.ctr(namespace).args(["task", "ls"]));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|line| {
                let cols: Vec<&str> = line.split_whitespace().collect();
                (cols.first() == Some(&id)).then(|| cols.last().copied().unwrap_or("").to_owned())
            })
    }

    /// Ids of the tasks and of the containers in `namespace`.
    #[must_use]
    pub fn leftovers(&self, namespace: &str) -> (Vec<String>, Vec<String>) {
        let ids = |what: &str| {
            let out = run(self.ctr(namespace).args([what, "ls", "-q"]));
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_owned)
                .collect()
        };
        (ids("tasks"), ids("containers"))
    }

    /// Path of libcni's cached result for an attachment (present between ADD and DEL).
    #[must_use]
    pub fn cached_result(&self, network: &str, container_id: &str, ifname: &str) -> PathBuf {
        self.cni_cache
            .join("results")
            .join(format!("{network}-{container_id}-{ifname}"))
    }
}
