//! The agent side of the CNI contract and the plugin's thin client: CNI wire types and rules
//! (`types`), the plugin ↔ agent protocol (`proto`), the plugin logic (`client`), asking a
//! running agent for its status report (`query`; the report's types are `crate::status`, below
//! this module), and putting the plugin on the host (`install`). The agent's socket server
//! comes with `ipam`'s facade.

pub mod client;
pub mod install;
pub mod proto;
pub mod query;
pub mod server;
pub mod types;
