//! The embedded store against real-looking documents (no root needed): the directory layout and
//! what it ignores; the write-back of the own CiliumNode (only the owned paths change, every
//! other field survives, JSON stays JSON and YAML stays YAML); the written documents against
//! Cilium's upstream CRD schema; debounced, coalesced and only-when-changed writes; corrupt
//! documents (reported with the field, never overwritten, last good version kept, picked up
//! when fixed); inotify for documents created and deleted while the store is open; and atomic
//! replacement. Each test builds its own tokio runtime and temporary store directory, which it
//! removes at the end (on panic too). Two tests pin down store bugs found
//! earlier (an emptied `spec` and YAML 1.1 booleans). The in-process operator's writes and the
//! agent's share `spec.ipam.pools` without taking each other's part.
//!
//! The CRD schema is `shared/fixtures/cilium-crds/ciliumnodes.yaml` beside the workspace
//! (`WEFT_CILIUM_CRDS` may name another directory holding `ciliumnodes.yaml`).

mod atomic;
mod common;
mod corrupt;
mod layout;
mod operator;
mod round_trip;
mod schema;
mod watch_dir;
mod writes;
#[allow(unused_imports, reason = "siblings share helpers")]
pub(crate) use atomic::*;
#[allow(unused_imports, reason = "siblings share helpers")]
pub(crate) use common::*;
#[allow(unused_imports, reason = "siblings share helpers")]
pub(crate) use corrupt::*;
#[allow(unused_imports, reason = "siblings share helpers")]
pub(crate) use layout::*;
#[allow(unused_imports, reason = "siblings share helpers")]
pub(crate) use operator::*;
#[allow(unused_imports, reason = "siblings share helpers")]
pub(crate) use round_trip::*;
#[allow(unused_imports, reason = "siblings share helpers")]
pub(crate) use schema::*;
#[allow(unused_imports, reason = "siblings share helpers")]
pub(crate) use watch_dir::*;
#[allow(unused_imports, reason = "siblings share helpers")]
pub(crate) use writes::*;
