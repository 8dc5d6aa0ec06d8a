//! Cilium's custom resources and the Kubernetes metadata weft reads, in Cilium's exact wire format
//! (`cilium.io/v2` `CiliumNode`, `CiliumNodeConfig`, `CiliumEndpoint` and `CiliumIdentity`,
//! `v2alpha1` `CiliumPodIPPool`), as plain serde types that also derive their JSON Schema (the
//! source of the generated CRDs under `deploy/crds/`): no kube, no IO. Every object keeps the
//! fields weft does not model, so writing one back never drops what another writer (the
//! operator, a user) put there.

pub mod azure;
pub mod endpoint;
pub mod eni;
pub mod identity;
pub mod ipam;
pub mod meta;
pub mod node;
pub mod nodeconfig;
pub mod pool;
mod schema;
