//! The cluster-pool keys of cilium-config (`cluster-pool-ipv4-cidr`, `cluster-pool-ipv4-mask-size`
//! and their IPv6 twins): the operator's settings, which the agent reads only to run the
//! cluster-pool allocator in-process on a single host (`--store`). This file checks their form;
//! whether the CIDRs make an allocator (family, collisions, mask against prefix) is the
//! allocator's own check, with Cilium's texts. It never allocates.

use ipnet::IpNet;
use weft_cluster_ipam::clusterpool::ClusterPoolConfig;

use super::ConfigError;

/// Applies one cluster-pool key to `config`; returns whether `key` was one.
///
/// # Errors
/// The value is not a list of CIDRs (`…-cidr`) or not a prefix length (`…-mask-size`).
pub(super) fn apply(
    config: &mut ClusterPoolConfig,
    key: &str,
    value: &str,
) -> Result<bool, ConfigError> {
    let bad = |expected: String| ConfigError {
        key: key.to_owned(),
        value: value.to_owned(),
        expected,
    };
    match key {
        "cluster-pool-ipv4-cidr" => config.ipv4.cidrs = cidr_list(value).map_err(bad)?,
        "cluster-pool-ipv6-cidr" => config.ipv6.cidrs = cidr_list(value).map_err(bad)?,
        "cluster-pool-ipv4-mask-size" => {
            config.ipv4.mask_size = mask_size(value, 32, "24").map_err(bad)?;
        }
        "cluster-pool-ipv6-mask-size" => {
            config.ipv6.mask_size = mask_size(value, 128, "112").map_err(bad)?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A list of CIDRs separated by spaces or commas, as Cilium's ConfigMap writes a string slice.
fn cidr_list(value: &str) -> Result<Vec<IpNet>, String> {
    value
        .split([' ', ','])
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            item.parse().map_err(|_| {
                format!(
                    "CIDRs separated by spaces or commas, e.g. 10.0.0.0/8 ({item:?} is not a CIDR)"
                )
            })
        })
        .collect()
}

/// A node block's prefix length, at most `max`.
fn mask_size(value: &str, max: u8, example: &str) -> Result<u8, String> {
    value
        .parse::<u8>()
        .ok()
        .filter(|mask| (1..=max).contains(mask))
        .ok_or_else(|| {
            format!("a prefix length from 1 to {max} for each node's block, e.g. {example}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_take_spaces_and_commas() {
        let mut config = ClusterPoolConfig::default();
        assert!(
            apply(
                &mut config,
                "cluster-pool-ipv4-cidr",
                "10.0.0.0/16, 10.1.0.0/16 10.2.0.0/16"
            )
            .unwrap()
        );
        assert_eq!(config.ipv4.cidrs.len(), 3);
        assert!(apply(&mut config, "cluster-pool-ipv6-mask-size", "120").unwrap());
        assert_eq!(config.ipv6.mask_size, 120);
        assert!(!apply(&mut config, "ipam", "cluster-pool").unwrap());
    }

    #[test]
    fn bad_forms_name_the_key_and_the_fix() {
        let mut config = ClusterPoolConfig::default();
        let error = apply(
            &mut config,
            "cluster-pool-ipv4-cidr",
            "10.0.0.0/16 10.1.0/33",
        )
        .expect_err("not a CIDR");
        assert_eq!(
            error.to_string(),
            "invalid value \"10.0.0.0/16 10.1.0/33\" for cluster-pool-ipv4-cidr: expected CIDRs \
             separated by spaces or commas, e.g. 10.0.0.0/8 (\"10.1.0/33\" is not a CIDR)"
        );
        let error = apply(&mut config, "cluster-pool-ipv4-mask-size", "33").expect_err("too long");
        assert!(error.to_string().contains("from 1 to 32"), "{error}");
        let error = apply(&mut config, "cluster-pool-ipv6-mask-size", "x").expect_err("no number");
        assert!(
            error.to_string().contains("cluster-pool-ipv6-mask-size"),
            "{error}"
        );
    }
}
