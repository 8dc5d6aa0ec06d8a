//! The node manager for cloud allocators (Cilium's `operator/pkg/ipam/nodemanager`): keeps
//! `pre-allocate` addresses free on every node through a cloud API, shared by Azure and a
//! future ENI allocator.
