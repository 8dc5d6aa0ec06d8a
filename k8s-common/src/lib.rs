//! What weft's two programs share, so neither copies it: Cilium's custom resources in their exact
//! wire format ([`crd`]), Kubernetes label selectors ([`labels`]), the one-line error chain
//! ([`error::chain`]), and the client plumbing — connecting from a kubeconfig or the
//! in-cluster service account ([`client`]), the resources weft talks to as `DynamicObject` APIs
//! ([`resource`]) and the timing of every request ([`instrument`], [`api_metrics`]), whether the
//! API server can be used and why not ([`reach`], [`access`]), the logging set-up both
//! programs share ([`telemetry`]: Cilium's `--debug`, `--log-level`, `--log-format`), and the
//! metric names `/metrics` serves under ([`metrics_naming`]) with the process metrics both
//! export ([`process_metrics`]), and the shape of a row of each program's configuration table
//! ([`config_ref`]).
//!
//! Dependencies run one way: `weft-agent` and `weft-operator` depend on this crate; it depends on
//! neither, knows nothing of IPAM policy, BPF or the daemon, and does no IO of its own beyond the
//! client it builds.

pub mod access;
pub mod api_metrics;
pub mod client;
pub mod config_ref;
pub mod config_values;
pub mod crd;
pub mod error;
pub mod events;
pub mod instrument;
pub mod labels;
pub mod metrics_naming;
pub mod process_metrics;
pub mod reach;
pub mod resource;
pub mod telemetry;

pub use self::resource::{DecodeError, FieldError, Resource};
