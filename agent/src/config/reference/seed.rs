//! The rows of the keys the agent seeds its own CiliumNode from (Kubernetes only: watermarks,
//! static-IP tags, Azure's interface, the `eni-*` keys, where IMDS is) and the operator's
//! cluster-pool keys the single-host store's in-process allocator reads. Data and the setter of each value;
//! [`super::REFERENCE`] lists them in the documentation's order.

use std::path::PathBuf;

use crate::ipam::mode::IpamMode::{Azure, Eni};

use super::{
    Cilium,
    DefaultValue::{Empty, Value},
    Key, Modes, SWITCH, Stores, TAGS, VALUE, WATERMARK_MODES, doc, eni, pool, seed,
};

/// The `auto-create-cilium-node-resource` row.
pub const AUTO_CREATE_CILIUM_NODE_RESOURCE: Key = seed(
    "auto-create-cilium-node-resource",
    Value("true"),
    Modes::All,
    "create the own CiliumNode when missing, and seed it from the Node",
    |c, v| {
        c.node_seed.auto_create = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `ipam-min-allocate` row.
pub const IPAM_MIN_ALLOCATE: Key = seed(
    "ipam-min-allocate",
    Value("0"),
    Modes::Only(WATERMARK_MODES),
    "`spec.ipam.min-allocate` to seed (0: unset)",
    |c, v| {
        c.node_seed.min_allocate = v.count()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `ipam-pre-allocate` row.
pub const IPAM_PRE_ALLOCATE: Key = seed(
    "ipam-pre-allocate",
    Value("0"),
    Modes::Only(WATERMARK_MODES),
    "`spec.ipam.pre-allocate` to seed (0: unset; the operator then uses 8)",
    |c, v| {
        c.node_seed.pre_allocate = v.count()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `ipam-max-allocate` row.
pub const IPAM_MAX_ALLOCATE: Key = seed(
    "ipam-max-allocate",
    Value("0"),
    Modes::Only(WATERMARK_MODES),
    "`spec.ipam.max-allocate` to seed (0: unset)",
    |c, v| {
        c.node_seed.max_allocate = v.count()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `ipam-static-ip-tags` row.
pub const IPAM_STATIC_IP_TAGS: Key = seed(
    "ipam-static-ip-tags",
    Empty("none"),
    Modes::All,
    "`spec.ipam.static-ip-tags` to seed, `key=value,…`; pods wait for the static IP",
    |c, v| {
        c.node_seed.static_ip_tags =
            v.tags("comma-separated key=value pairs, e.g. team=a,env=prod")?;
        Ok(())
    },
)
.flag(VALUE);

/// The `azure-interface-name` row.
pub const AZURE_INTERFACE_NAME: Key = seed(
    "azure-interface-name",
    Empty("every NIC"),
    Modes::Only(&[Azure]),
    "`spec.azure.interface-name` to seed: allocate on that NIC only",
    |c, v| {
        v.value.clone_into(&mut c.node_seed.azure_interface_name);
        Ok(())
    },
)
.flag(VALUE);

/// The `read-cni-conf` row.
pub const READ_CNI_CONF: Key = seed(
    "read-cni-conf",
    Empty("none"),
    Modes::All,
    "a CNI configuration file whose `ipam`, `eni` and `azure` values win when seeding",
    |c, v| {
        c.node_seed.read_cni_conf = (!v.value.is_empty()).then(|| PathBuf::from(v.value));
        Ok(())
    },
)
.flag(VALUE);

/// The `agent-not-ready-taint-key` row.
pub const AGENT_NOT_READY_TAINT_KEY: Key = seed(
    "agent-not-ready-taint-key",
    Value("node.cilium.io/agent-not-ready"),
    Modes::All,
    "the taint removed from the own Node once the agent serves CNI (empty: none)",
    |c, v| {
        v.value.clone_into(&mut c.not_ready_taint_key);
        Ok(())
    },
);

/// The `eni-first-interface-index` row.
pub const ENI_FIRST_INTERFACE_INDEX: Key = eni(
    "eni-first-interface-index",
    Value("0"),
    "`spec.eni.first-interface-index` to seed",
    |c, v| {
        c.node_seed.eni.first_interface_index = Some(
            v.value
                .parse()
                .map_err(|_| v.bad("a non-negative integer"))?,
        );
        Ok(())
    },
);

/// The `eni-subnet-ids` row.
pub const ENI_SUBNET_IDS: Key = eni(
    "eni-subnet-ids",
    Empty("none"),
    "`spec.eni.subnet-ids` to seed (comma-separated)",
    |c, v| {
        c.node_seed.eni.subnet_ids = v.list();
        Ok(())
    },
);

/// The `eni-subnet-tags` row.
pub const ENI_SUBNET_TAGS: Key = eni(
    "eni-subnet-tags",
    Empty("none"),
    "`spec.eni.subnet-tags` to seed (`key=value,…`)",
    |c, v| {
        c.node_seed.eni.subnet_tags = v.tags(TAGS)?;
        Ok(())
    },
);

/// The `eni-security-groups` row.
pub const ENI_SECURITY_GROUPS: Key = eni(
    "eni-security-groups",
    Empty("none"),
    "`spec.eni.security-groups` to seed (comma-separated)",
    |c, v| {
        c.node_seed.eni.security_groups = v.list();
        Ok(())
    },
);

/// The `eni-security-group-tags` row.
pub const ENI_SECURITY_GROUP_TAGS: Key = eni(
    "eni-security-group-tags",
    Empty("none"),
    "`spec.eni.security-group-tags` to seed (`key=value,…`)",
    |c, v| {
        c.node_seed.eni.security_group_tags = v.tags(TAGS)?;
        Ok(())
    },
);

/// The `eni-exclude-interface-tags` row.
pub const ENI_EXCLUDE_INTERFACE_TAGS: Key = eni(
    "eni-exclude-interface-tags",
    Empty("none"),
    "`spec.eni.exclude-interface-tags` to seed (`key=value,…`)",
    |c, v| {
        c.node_seed.eni.exclude_interface_tags = v.tags(TAGS)?;
        Ok(())
    },
);

/// The `eni-use-primary-address` row.
pub const ENI_USE_PRIMARY_ADDRESS: Key = eni(
    "eni-use-primary-address",
    Value("false"),
    "`spec.eni.use-primary-address` to seed",
    |c, v| {
        c.node_seed.eni.use_primary_address = Some(v.bool()?);
        Ok(())
    },
);

/// The `eni-disable-prefix-delegation` row.
pub const ENI_DISABLE_PREFIX_DELEGATION: Key = eni(
    "eni-disable-prefix-delegation",
    Value("false"),
    "`spec.eni.disable-prefix-delegation` to seed",
    |c, v| {
        c.node_seed.eni.disable_prefix_delegation = Some(v.bool()?);
        Ok(())
    },
);

/// The `eni-delete-on-termination` row.
pub const ENI_DELETE_ON_TERMINATION: Key = eni(
    "eni-delete-on-termination",
    Value("true"),
    "`spec.eni.delete-on-termination` to seed",
    |c, v| {
        c.node_seed.eni.delete_on_termination = Some(v.bool()?);
        Ok(())
    },
);

/// The `aws-imds-endpoint` row (the operator's key of the same name and meaning).
pub const AWS_IMDS_ENDPOINT: Key = doc(
    "aws-imds-endpoint",
    Value(weft_aws_imds::DEFAULT_BASE_URL),
    Modes::Only(&[Eni]),
    Stores::Kubernetes,
    Cilium::Weft("none: Cilium's agent reads IMDS at its fixed address"),
    "the instance metadata service `spec.instance-id` and `spec.eni.{instance-type, \
     availability-zone, vpc-id, node-subnet-id}` are seeded from, at another URL",
    |c, v| {
        v.value.clone_into(&mut c.node_seed.aws_imds_endpoint);
        Ok(())
    },
)
.flag(VALUE);

/// The `cluster-pool-ipv4-cidr` row.
pub const CLUSTER_POOL_IPV4_CIDR: Key = pool(
    "cluster-pool-ipv4-cidr",
    Empty("the podCIDRs already in the own CiliumNode"),
    "cluster CIDRs the in-process allocator carves IPv4 node blocks from",
    |c, v| {
        c.cluster_pool.ipv4.cidrs = v.cidr_list()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `cluster-pool-ipv4-mask-size` row.
pub const CLUSTER_POOL_IPV4_MASK_SIZE: Key = pool(
    "cluster-pool-ipv4-mask-size",
    Value("24"),
    "prefix length of each node's IPv4 block",
    |c, v| {
        c.cluster_pool.ipv4.mask_size = v.mask_size(32, "24")?;
        Ok(())
    },
)
.flag(VALUE);

/// The `cluster-pool-ipv6-cidr` row.
pub const CLUSTER_POOL_IPV6_CIDR: Key = pool(
    "cluster-pool-ipv6-cidr",
    Empty("the podCIDRs already in the own CiliumNode"),
    "cluster CIDRs for IPv6 node blocks (with enable-ipv6)",
    |c, v| {
        c.cluster_pool.ipv6.cidrs = v.cidr_list()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `cluster-pool-ipv6-mask-size` row.
pub const CLUSTER_POOL_IPV6_MASK_SIZE: Key = pool(
    "cluster-pool-ipv6-mask-size",
    Value("112"),
    "prefix length of each node's IPv6 block",
    |c, v| {
        c.cluster_pool.ipv6.mask_size = v.mask_size(128, "112")?;
        Ok(())
    },
)
.flag(VALUE);
