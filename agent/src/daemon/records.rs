//! Endpoint records: one JSON file per CNI attachment under `<state-dir>/endpoints/`, written
//! atomically twice per ADD (the addresses before wiring starts, the result once it is done),
//! once more by DEL (marked `deleting`) and removed once DEL finished. They are how a restarted
//! agent knows which addresses are in use (so none is handed out twice) and how a repeated ADD
//! gets the same answer.

use std::{
    fs,
    net::IpAddr,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::{cni::types::CniResult, ipam::cloud::PodRouting};

/// One address of an endpoint and the pool it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordAddr {
    /// The address.
    pub ip: IpAddr,
    /// Pool name.
    pub pool: String,
    /// The pool asked not to masquerade traffic from it.
    #[serde(default)]
    pub skip_masquerade: bool,
}

/// What the agent remembers about one attachment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointRecord {
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_NETNS` at ADD.
    pub netns: PathBuf,
    /// IPAM owner (`namespace/pod`).
    pub owner: String,
    /// Host-side veth.
    pub host_ifname: String,
    /// Addresses with their pools.
    pub addrs: Vec<RecordAddr>,
    /// The ADD result, replayed for a repeated ADD. `None`: the ADD was still in progress
    /// (written before wiring, so an agent killed half-way knows what to undo).
    pub result: Option<CniResult>,
    /// Why some of its addresses could not be restored at the last start (set by the agent;
    /// `status` lists it). `None`: all were restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_restored: Option<String>,
    /// DEL answered (the map entries are gone and `result` is dropped) but its veth, this
    /// record or its addresses are not yet: finished in the background, on the tick if that
    /// failed, or at the next start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
    /// Where each address's traffic leaves the node (eni, azure, alibabacloud): the source
    /// routing rebuilt from here at start-up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routing: Vec<PodRouting>,
    /// Why the pod's traffic is not routed through its cloud interface (no interface of the
    /// CiliumNode holds an address, or no link has its MAC); `status` lists it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_problem: Option<String>,
}

/// The records directory.
#[derive(Clone, Debug)]
pub struct Records {
    dir: PathBuf,
}

/// Why a record operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Reading or writing a record failed (its source says why, for example `ENOSPC`).
    #[error("endpoint record {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// A record does not parse (it is left in place for inspection).
    #[error("endpoint record {path} is corrupt (move it away if the pod is gone)")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

/// The directory of endpoint records under the state directory.
pub const RECORDS_DIR: &str = "endpoints";

impl Records {
    /// Use (and create) `state_dir/endpoints`.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(state_dir: &Path) -> Result<Self, RecordError> {
        let dir = state_dir.join(RECORDS_DIR);
        crate::fsutil::private_dir(&dir).map_err(|source| RecordError::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(Self { dir })
    }

    fn path(&self, container_id: &str, ifname: &str) -> PathBuf {
        self.dir.join(format!("{container_id}_{ifname}.json"))
    }

    /// The record of an attachment, if any.
    ///
    /// # Errors
    /// The record exists but cannot be read or parsed.
    pub fn get(
        &self,
        container_id: &str,
        ifname: &str,
    ) -> Result<Option<EndpointRecord>, RecordError> {
        let path = self.path(container_id, ifname);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| RecordError::Corrupt { path, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(RecordError::Io { path, source }),
        }
    }

    /// Every record, sorted by file name; corrupt ones are returned as errors alongside.
    ///
    /// # Errors
    /// The directory cannot be read.
    pub fn all(&self) -> Result<(Vec<EndpointRecord>, Vec<RecordError>), RecordError> {
        let io = |source| RecordError::Io {
            path: self.dir.clone(),
            source,
        };
        let (mut records, mut errors) = (Vec::new(), Vec::new());
        let mut paths: Vec<PathBuf> = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io)? {
            // A directory entry that cannot be read is a record that cannot be read.
            match entry {
                Ok(entry) => paths.push(entry.path()),
                Err(source) => errors.push(RecordError::Io {
                    path: self.dir.clone(),
                    source,
                }),
            }
        }
        paths.retain(|p| p.extension().is_some_and(|x| x == "json"));
        paths.sort();
        for path in paths {
            match fs::read(&path) {
                Ok(bytes) => match serde_json::from_slice(&bytes) {
                    Ok(record) => records.push(record),
                    Err(source) => errors.push(RecordError::Corrupt { path, source }),
                },
                Err(source) => errors.push(RecordError::Io { path, source }),
            }
        }
        Ok((records, errors))
    }

    /// Write `record` atomically (temp file, rename). No fsync: records guard against the agent
    /// dying, not the machine — a reboot takes every pod's namespace and veth with it (and the
    /// state directory lives on `/var/run`), while an fsync costs 10–25 ms per ADD here.
    ///
    /// # Errors
    /// Writing failed; an existing record is then untouched.
    pub fn put(&self, record: &EndpointRecord) -> Result<(), RecordError> {
        let path = self.path(&record.container_id, &record.ifname);
        let io = |source| RecordError::Io {
            path: path.clone(),
            source,
        };
        let body = serde_json::to_vec_pretty(record).map_err(|e| io(e.into()))?;
        crate::fsutil::write_private(&path, &body, false).map_err(io)
    }

    /// Remove the record of an attachment; `Ok(false)` if there was none.
    ///
    /// # Errors
    /// The file exists but cannot be removed.
    pub fn remove(&self, container_id: &str, ifname: &str) -> Result<bool, RecordError> {
        let path = self.path(container_id, ifname);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(RecordError::Io { path, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;
    use crate::daemon::chain;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-records-{name}-{}", std::process::id()));
        drop(fs::remove_dir_all(&dir));
        dir
    }

    fn record() -> EndpointRecord {
        EndpointRecord {
            container_id: "c1".into(),
            ifname: "eth0".into(),
            netns: "/proc/1/ns/net".into(),
            owner: "default/p".into(),
            host_ifname: "lxc1".into(),
            addrs: Vec::new(),
            result: None,
            not_restored: None,
            deleting: false,
            routing: Vec::new(),
            routing_problem: None,
        }
    }

    #[test]
    fn records_are_readable_by_root_only() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = scratch("mode");
        let records = Records::open(&dir).expect("open");
        records.put(&record()).expect("put");
        let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&records.path("c1", "eth0")), 0o600);
        assert_eq!(mode(&dir.join(RECORDS_DIR)), 0o700);
        drop(fs::remove_dir_all(&dir));
    }

    #[test]
    fn a_failed_write_keeps_the_io_error() {
        let dir = scratch("io");
        let records = Records::open(&dir).expect("open");
        // The records directory is replaced by a file: every write fails with ENOTDIR.
        fs::remove_dir(dir.join(RECORDS_DIR)).expect("rmdir");
        fs::write(dir.join(RECORDS_DIR), b"").expect("write");
        let error = records.put(&record()).expect_err("not a directory");
        let source = error
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the io error is the source");
        assert_eq!(source.raw_os_error(), Some(libc::ENOTDIR));
        // ENOSPC, the case the CNI runtime must see, reaches the chain text the same way.
        let full = RecordError::Io {
            path: dir.join("x"),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert!(
            chain(&full).contains("No space left on device"),
            "{}",
            chain(&full)
        );
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_corrupt_record_keeps_the_parse_error() {
        let dir = scratch("corrupt");
        let records = Records::open(&dir).expect("open");
        fs::write(
            dir.join(RECORDS_DIR).join("c1_eth0.json"),
            b"{\"container_id\": 1}",
        )
        .expect("write");
        let got = records.get("c1", "eth0").expect_err("corrupt");
        let (_, listed) = records.all().expect("all");
        for error in [&got, &listed[0]] {
            let source = error
                .source()
                .and_then(|s| s.downcast_ref::<serde_json::Error>())
                .expect("the parse error is the source");
            assert_eq!((source.line(), source.column()), (1, 18));
            assert!(
                chain(error).contains("invalid type: integer `1`"),
                "{}",
                chain(error)
            );
        }
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
