//! Rows: network policy and identities, encryption, cluster mesh.

use super::build::{
    MESH, NO_POLICY, POLICY, POLICY_WAY_OUT, family, ignored, off, policy, refused,
};
use super::{
    Area::{ClusterMesh, Encryption, Policy},
    Feature,
};

pub(super) const ROWS: &[Feature] = &[
    // Policy and identities.
    refused(
        "enable-policy",
        Policy,
        &["never"],
        NO_POLICY,
        POLICY_WAY_OUT,
    ),
    policy("enable-k8s-networkpolicy"),
    policy("enable-cilium-network-policy"),
    policy("enable-cilium-clusterwide-network-policy"),
    off(
        "enable-host-firewall",
        Policy,
        "host policies (CiliumClusterwideNetworkPolicy with a nodeSelector) are not enforced: \
         the nodes are open",
        "set enable-host-firewall: \"false\" and protect the nodes otherwise",
    ),
    refused(
        "identity-allocation-mode",
        Policy,
        &["crd"],
        "weft allocates identities as CiliumIdentity objects; with a kvstore, Cilium and weft \
         would give the same labels different numbers",
        "set identity-allocation-mode: crd",
    ),
    refused(
        "identity-management-mode",
        Policy,
        &["agent"],
        "weft-agent allocates identities itself; a second allocator in the operator would give \
         the same labels different numbers",
        "set identity-management-mode: agent",
    ),
    ignored("enable-l7-proxy", Policy, POLICY),
    ignored("mesh-auth-enabled", Policy, POLICY),
    family("mesh-auth-", Policy, POLICY),
    ignored("policy-cidr-match-mode", Policy, POLICY),
    ignored("policy-default-local-cluster", Policy, POLICY),
    ignored("enable-non-default-deny-policies", Policy, POLICY),
    ignored("enable-policy-secrets-sync", Policy, POLICY),
    ignored("policy-secrets-namespace", Policy, POLICY),
    ignored("policy-secrets-only-from-secrets-namespace", Policy, POLICY),
    ignored("policy-deny-response", Policy, POLICY),
    ignored(
        "enable-endpoint-lockdown-on-policy-overflow",
        Policy,
        POLICY,
    ),
    ignored("policy-audit-mode", Policy, POLICY),
    family("tofqdns-", Policy, POLICY),
    family("dnsproxy-", Policy, POLICY),
    ignored("enable-well-known-identities", Policy, POLICY),
    ignored(
        "enable-source-ip-verification",
        Policy,
        "weft always drops a pod's packets whose source address is not the pod's own",
    ),
    ignored(
        "enable-identity-mark",
        Policy,
        "weft carries no identity in the packet mark",
    ),
    // Encryption.
    off(
        "enable-ipsec",
        Encryption,
        "traffic between nodes would leave unencrypted",
        "set enable-ipsec: \"false\" only if unencrypted traffic between nodes is acceptable",
    ),
    off(
        "enable-wireguard",
        Encryption,
        "traffic between nodes would leave unencrypted",
        "set enable-wireguard: \"false\" only if unencrypted traffic between nodes is acceptable",
    ),
    off(
        "encrypt-node",
        Encryption,
        "traffic between nodes would leave unencrypted",
        "set encrypt-node: \"false\"",
    ),
    off(
        "enable-encryption-strict-mode",
        Encryption,
        "unencrypted pod traffic between nodes would not be dropped",
        "set enable-encryption-strict-mode: \"false\"",
    ),
    family(
        "ipsec-",
        Encryption,
        "read only with enable-ipsec, which weft refuses",
    ),
    family(
        "wireguard-",
        Encryption,
        "read only with enable-wireguard, which weft refuses",
    ),
    ignored(
        "encryption-strict-mode-cidr",
        Encryption,
        "read only with enable-encryption-strict-mode, which weft refuses",
    ),
    // Cluster mesh.
    refused(
        "cluster-id",
        ClusterMesh,
        &["0", ""],
        "identities of this cluster would clash with those of the others in the mesh, and \
         policy in the other clusters would match the wrong pods",
        "weft does not join a cluster mesh: set cluster-id: \"0\"",
    ),
    ignored("max-connected-clusters", ClusterMesh, MESH),
    family("clustermesh-", ClusterMesh, MESH),
    ignored("enable-cluster-aware-addressing", ClusterMesh, MESH),
    ignored("enable-inter-cluster-snat", ClusterMesh, MESH),
];
