//! weft's node agent as a library: the binaries (`weft-agent`, `weft-cni`) and the
//! integration tests reach the datapath through these modules.

pub mod cli;
pub mod datapath;
