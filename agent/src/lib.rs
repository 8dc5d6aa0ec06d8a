//! weft's node agent as a library: the binaries (`weft-agent`, `weft-cni`) and the
//! integration tests reach the datapath through these modules.

pub mod cleanup;
pub mod cli;
pub mod cni;
pub mod config;
pub use weft_k8s::crd;
pub mod daemon;
pub mod datapath;
pub use weft_k8s::error;
pub mod faults;
pub mod fsutil;
pub mod identity;
pub mod ipam;
pub mod k8s;
pub mod masq;
pub mod metrics;
pub mod simulate;
pub mod status;
pub mod store;
