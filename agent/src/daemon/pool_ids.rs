//! Pool ids for the pinned maps (`EndpointInfo::pool_id`, and `MasqKey::pool_id` of the
//! per-pool masquerade exclusions): the default pool is 0; every other pool gets the next
//! unused small integer the first time one of its addresses is wired, and keeps it. The
//! assignment lives in `<state-dir>/pool-ids.json`, replaced atomically and fsynced before a
//! new id is handed out, so ids survive restarts, never collide and are never reused within a
//! state directory. Owns that file only; what goes into the maps is the datapath's.

use std::{
    collections::BTreeMap,
    fs, io,
    net::IpAddr,
    path::{Path, PathBuf},
};

use agent_common::masq::POOL_ANY;

use crate::datapath::PoolIdPerFamily;

/// The file under the state directory that holds the assigned pool ids (a JSON object of
/// pool name to id).
pub const POOL_IDS_FILE: &str = "pool-ids.json";

/// The pool ids assigned so far, and the file that keeps them.
#[derive(Debug)]
pub struct PoolIds {
    path: PathBuf,
    ids: BTreeMap<String, u32>,
}

/// Why pool ids cannot be read or assigned.
#[derive(Debug, thiserror::Error)]
pub enum PoolIdsError {
    /// The file exists but cannot be read.
    #[error("reading the pool ids {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: io::Error,
    },
    /// The file does not parse.
    #[error("the pool ids in {path} are corrupt: move the file away to assign them afresh")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// The file names an id no pool may have (0, the `POOL_ANY` wildcard, or one given twice).
    #[error(
        "the pool ids in {path} give pool {pool} the id {id}, which is reserved or taken: move \
         the file away to assign them afresh"
    )]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The pool.
        pool: String,
        /// Its id.
        id: u32,
    },
    /// A new id cannot be saved (it is then not handed out).
    #[error("saving the pool ids {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: io::Error,
    },
    /// Every id below the `POOL_ANY` wildcard is taken.
    #[error("no pool id is left for pool {pool}")]
    Exhausted {
        /// The pool.
        pool: String,
    },
}

impl PoolIds {
    /// Read the ids assigned in `state_dir` (none when the file does not exist yet).
    ///
    /// # Errors
    /// The file cannot be read, does not parse, or names a reserved or repeated id.
    pub fn open(state_dir: &Path) -> Result<Self, PoolIdsError> {
        let path = state_dir.join(POOL_IDS_FILE);
        let ids: BTreeMap<String, u32> = match fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| PoolIdsError::Corrupt {
                    path: path.clone(),
                    source,
                })?
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => return Err(PoolIdsError::Read { path, source }),
        };
        let mut seen = std::collections::BTreeSet::new();
        for (pool, &id) in &ids {
            if id == 0 || id == POOL_ANY || !seen.insert(id) {
                return Err(PoolIdsError::Invalid {
                    path,
                    pool: pool.clone(),
                    id,
                });
            }
        }
        Ok(Self { path, ids })
    }

    /// The id of `pool`: 0 for `default_pool`, else the one assigned earlier, else the next
    /// unused one, saved before it is returned.
    ///
    /// # Errors
    /// A new id cannot be saved, or none is left.
    pub fn id(&mut self, pool: &str, default_pool: &str) -> Result<u32, PoolIdsError> {
        if pool == default_pool {
            return Ok(0);
        }
        if let Some(&id) = self.ids.get(pool) {
            return Ok(id);
        }
        let id = self
            .ids
            .values()
            .max()
            .map_or(Some(1), |max| max.checked_add(1));
        let Some(id) = id.filter(|&id| id != POOL_ANY) else {
            return Err(PoolIdsError::Exhausted {
                pool: pool.to_owned(),
            });
        };
        let mut ids = self.ids.clone();
        ids.insert(pool.to_owned(), id);
        let written = serde_json::to_vec_pretty(&ids)
            .map_err(io::Error::other)
            .and_then(|body| crate::fsutil::write_private(&self.path, &body, true));
        if let Err(source) = written {
            return Err(PoolIdsError::Write {
                path: self.path.clone(),
                source,
            });
        }
        self.ids = ids;
        Ok(id)
    }

    /// The pool id of each family of a pod's addresses `(address, pool)`: each family's own
    /// pool (its first address's), 0 for a family the pod has no address of.
    ///
    /// # Errors
    /// As [`Self::id`].
    pub fn for_addrs<'a>(
        &mut self,
        addrs: impl IntoIterator<Item = (IpAddr, &'a str)>,
        default_pool: &str,
    ) -> Result<PoolIdPerFamily, PoolIdsError> {
        let (mut v4, mut v6) = (None, None);
        for (ip, pool) in addrs {
            let slot = if ip.is_ipv4() { &mut v4 } else { &mut v6 };
            if slot.is_none() {
                *slot = Some(self.id(pool, default_pool)?);
            }
        }
        Ok(PoolIdPerFamily {
            v4: v4.unwrap_or(0),
            v6: v6.unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-pool-ids-{name}-{}", std::process::id()));
        drop(fs::remove_dir_all(&dir));
        fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn ids_are_assigned_in_first_use_order_and_survive_a_restart() {
        let dir = scratch("assign");
        let mut ids = PoolIds::open(&dir).expect("open");
        assert_eq!(ids.id("default", "default").expect("default"), 0);
        assert_eq!(ids.id("mars", "default").expect("mars"), 1);
        assert_eq!(ids.id("blue", "default").expect("blue"), 2);
        assert_eq!(ids.id("mars", "default").expect("mars again"), 1);
        // Golden: the file other versions of the agent read.
        let saved: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("pool-ids.json")).expect("saved"))
                .expect("json");
        assert_eq!(saved, serde_json::json!({"blue": 2, "mars": 1}));

        let mut again = PoolIds::open(&dir).expect("reopen");
        assert_eq!(again.id("blue", "default").expect("blue"), 2);
        assert_eq!(
            again.id("venus", "default").expect("venus"),
            3,
            "ids are not reused"
        );
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn each_family_carries_its_own_pool() {
        let dir = scratch("family");
        let mut ids = PoolIds::open(&dir).expect("open");
        let dual = [(ip("10.1.0.5"), "blue"), (ip("fd00::5"), "mars")];
        assert_eq!(
            ids.for_addrs(dual, "default").expect("dual stack"),
            PoolIdPerFamily { v4: 1, v6: 2 }
        );
        let v6_first = [(ip("fd00::6"), "default"), (ip("10.1.0.6"), "mars")];
        assert_eq!(
            ids.for_addrs(v6_first, "default").expect("v6 first"),
            PoolIdPerFamily { v4: 2, v6: 0 }
        );
        assert_eq!(
            ids.for_addrs([(ip("10.1.0.7"), "blue")], "default")
                .expect("v4 only"),
            PoolIdPerFamily { v4: 1, v6: 0 }
        );
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn an_id_that_cannot_be_saved_is_not_handed_out() {
        let dir = scratch("unsaved");
        let mut ids = PoolIds::open(&dir.join("gone")).expect("open");
        let error = ids.id("mars", "default").expect_err("no directory");
        assert!(matches!(error, PoolIdsError::Write { .. }), "{error:?}");
        let source = error
            .source()
            .and_then(|s| s.downcast_ref::<io::Error>())
            .expect("the io error is the source");
        assert_eq!(source.kind(), io::ErrorKind::NotFound);
        fs::create_dir_all(dir.join("gone")).expect("mkdir");
        assert_eq!(
            ids.id("blue", "default").expect("blue"),
            1,
            "mars never got 1"
        );
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_bad_file_is_refused_with_its_cause() {
        let dir = scratch("bad");
        let path = dir.join(POOL_IDS_FILE);
        fs::write(&path, b"{\"mars\": \"one\"}").expect("write");
        let error = PoolIds::open(&dir).expect_err("corrupt");
        assert!(
            error
                .source()
                .is_some_and(|s| s.downcast_ref::<serde_json::Error>().is_some()),
            "{error:?}"
        );
        for bad in [
            r#"{"mars": 0}"#,
            r#"{"mars": 4294967295}"#,
            r#"{"blue": 3, "mars": 3}"#,
        ] {
            fs::write(&path, bad).expect("write");
            let error = PoolIds::open(&dir).expect_err(bad);
            assert!(
                matches!(error, PoolIdsError::Invalid { .. }),
                "{bad}: {error:?}"
            );
        }
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
