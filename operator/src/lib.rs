//! weft-operator: the cluster-wide half of weft's IPAM. It hands node CIDRs to CiliumNodes
//! (cluster-pool, multi-pool) the way Cilium's operator does. This library holds the parts
//! the operator binary is built from; it owns no Kubernetes or cloud client itself.

pub mod ipam;
