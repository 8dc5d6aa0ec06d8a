//! A CiliumPodIPPool document (v2alpha1 or v2) as the multi-pool allocator's [`PoolSpec`]:
//! CIDRs and mask size per family, `allowFirstIP`/`allowLastIP`, and (v2) the `reservedRanges`
//! of each `pool[]` entry, which must name one of the family's CIDRs and lie inside it. A field
//! that does not convert is named with its path; the pool is then not applied at all.

use std::net::IpAddr;

use ipnet::IpNet;
use weft_cluster_ipam::multipool::{FamilySpec, PoolSpec, ReservedRange};

use crate::crd::pool::{CiliumPodIPPool, PoolFamilySpec};

/// Why a CiliumPodIPPool cannot be handed to the allocator.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolSpecError {
    /// A CIDR or a `pool[].cidr` does not parse.
    #[error("CiliumPodIPPool {pool}: {field} {value:?} is not a CIDR")]
    InvalidCidr {
        /// The pool.
        pool: String,
        /// The field's path, e.g. `spec.ipv4.cidrs[1]`.
        field: String,
        /// The value as written.
        value: String,
        /// The parser's complaint.
        #[source]
        source: ipnet::AddrParseError,
    },
    /// A `pool[]` entry names a CIDR the family does not list.
    #[error(
        "CiliumPodIPPool {pool}: {field} {cidr} is not one of spec.{family}.cidrs (each pool \
         entry must reference a CIDR from cidrs)"
    )]
    UnlistedCidr {
        /// The pool.
        pool: String,
        /// The field's path.
        field: String,
        /// `ipv4` or `ipv6`.
        family: &'static str,
        /// The CIDR named.
        cidr: IpNet,
    },
    /// A reserved range's address does not parse.
    #[error("CiliumPodIPPool {pool}: {field} {value:?} is not an IP address")]
    InvalidAddress {
        /// The pool.
        pool: String,
        /// The field's path, e.g. `spec.ipv4.pool[0].reservedRanges[1].end`.
        field: String,
        /// The value as written.
        value: String,
        /// The parser's complaint.
        #[source]
        source: std::net::AddrParseError,
    },
    /// A reserved range is reversed or leaves its entry's CIDR.
    #[error("CiliumPodIPPool {pool}: {field} {range} is not an ordered range inside {cidr}")]
    RangeOutside {
        /// The pool.
        pool: String,
        /// The field's path.
        field: String,
        /// The range.
        range: ReservedRange,
        /// The entry's CIDR.
        cidr: IpNet,
    },
}

/// `pool` as the allocator's input.
///
/// # Errors
/// The first field that does not convert.
pub fn pool_spec(pool: &CiliumPodIPPool) -> Result<PoolSpec, PoolSpecError> {
    let name = pool.name();
    let mut reserved = Vec::new();
    let mut family = |spec: Option<&PoolFamilySpec>, label: &'static str| {
        spec.map(|spec| family_spec(name, label, spec, &mut reserved))
            .transpose()
    };
    let ipv4 = family(pool.spec.ipv4.as_ref(), "ipv4")?;
    let ipv6 = family(pool.spec.ipv6.as_ref(), "ipv6")?;
    Ok(PoolSpec {
        ipv4,
        ipv6,
        allow_first_ip: pool.spec.allow_first_ip.unwrap_or(false),
        allow_last_ip: pool.spec.allow_last_ip.unwrap_or(false),
        reserved,
    })
}

/// One family: its CIDRs, mask size, and the reserved ranges of its `pool[]` entries.
fn family_spec(
    pool: &str,
    family: &'static str,
    spec: &PoolFamilySpec,
    reserved: &mut Vec<ReservedRange>,
) -> Result<FamilySpec, PoolSpecError> {
    let cidr = |field: String, value: &str| {
        value
            .trim()
            .parse::<IpNet>()
            .map_err(|source| PoolSpecError::InvalidCidr {
                pool: pool.to_owned(),
                field,
                value: value.to_owned(),
                source,
            })
    };
    let cidrs = (spec.cidrs.iter().enumerate())
        .map(|(i, value)| cidr(format!("spec.{family}.cidrs[{i}]"), value))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, entry) in spec.pool.iter().enumerate() {
        let at = format!("spec.{family}.pool[{i}]");
        let net = cidr(format!("{at}.cidr"), &entry.cidr)?.trunc();
        if !cidrs.iter().any(|c| c.trunc() == net) {
            return Err(PoolSpecError::UnlistedCidr {
                pool: pool.to_owned(),
                field: format!("{at}.cidr"),
                family,
                cidr: net,
            });
        }
        for (j, range) in entry.reserved_ranges.iter().enumerate() {
            let field = format!("{at}.reservedRanges[{j}]");
            let addr = |end: &str, value: &str| {
                value
                    .trim()
                    .parse::<IpAddr>()
                    .map_err(|source| PoolSpecError::InvalidAddress {
                        pool: pool.to_owned(),
                        field: format!("{field}.{end}"),
                        value: value.to_owned(),
                        source,
                    })
            };
            let range = ReservedRange {
                start: addr("start", &range.start)?,
                end: addr("end", &range.end)?,
            };
            if range.start > range.end || !net.contains(&range.start) || !net.contains(&range.end) {
                return Err(PoolSpecError::RangeOutside {
                    pool: pool.to_owned(),
                    field,
                    range,
                    cidr: net,
                });
            }
            reserved.push(range);
        }
    }
    Ok(FamilySpec {
        cidrs,
        mask_size: spec.mask_size,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decode(doc: &serde_json::Value) -> CiliumPodIPPool {
        serde_json::from_value(doc.clone()).expect("a pool")
    }

    #[test]
    fn v2alpha1_and_v2_pools_convert() {
        let v2alpha1 = decode(&json!({
            "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumPodIPPool",
            "metadata": {"name": "mars"},
            "spec": {"ipv4": {"cidrs": ["10.201.0.0/16"], "maskSize": 28},
                     "ipv6": {"cidrs": ["fd00:201::/112"], "maskSize": 124},
                     "allowLastIP": true}
        }));
        let spec = pool_spec(&v2alpha1).expect("converts");
        assert_eq!(spec.ipv4.as_ref().map(|f| f.mask_size), Some(28));
        assert_eq!(spec.ipv6.as_ref().map(|f| f.cidrs.len()), Some(1));
        assert!(spec.allow_last_ip && !spec.allow_first_ip);
        assert!(spec.reserved.is_empty());

        let v2 = decode(&json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumPodIPPool",
            "metadata": {"name": "default"},
            "spec": {"ipv4": {"cidrs": ["10.10.0.0/16", "10.20.0.0/16"], "maskSize": 24,
                              "pool": [{"cidr": "10.20.0.0/16",
                                        "reservedRanges": [{"start": "10.20.0.0", "end": "10.20.3.255"}]}]}}
        }));
        let spec = pool_spec(&v2).expect("converts");
        assert_eq!(
            spec.reserved,
            [ReservedRange {
                start: "10.20.0.0".parse().expect("ip"),
                end: "10.20.3.255".parse().expect("ip"),
            }]
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let pool = |ipv4: serde_json::Value| {
            decode(&json!({"metadata": {"name": "p"}, "spec": {"ipv4": ipv4}}))
        };
        let error = |ipv4| pool_spec(&pool(ipv4)).expect_err("refused").to_string();
        assert_eq!(
            error(json!({"cidrs": ["10.0.0.0/16", "nope"], "maskSize": 24})),
            "CiliumPodIPPool p: spec.ipv4.cidrs[1] \"nope\" is not a CIDR"
        );
        assert!(
            error(json!({"cidrs": ["10.0.0.0/16"], "maskSize": 24,
                         "pool": [{"cidr": "10.1.0.0/16"}]}))
            .contains("spec.ipv4.pool[0].cidr 10.1.0.0/16 is not one of spec.ipv4.cidrs")
        );
        assert_eq!(
            error(json!({"cidrs": ["10.0.0.0/16"], "maskSize": 24,
                         "pool": [{"cidr": "10.0.0.0/16",
                                   "reservedRanges": [{"start": "10.0.0.9", "end": "10.0.0.1"}]}]})),
            "CiliumPodIPPool p: spec.ipv4.pool[0].reservedRanges[0] 10.0.0.9-10.0.0.1 is not an \
             ordered range inside 10.0.0.0/16"
        );
        assert!(
            error(json!({"cidrs": ["10.0.0.0/16"], "maskSize": 24,
                         "pool": [{"cidr": "10.0.0.0/16",
                                   "reservedRanges": [{"start": "10.0.0.1", "end": "x"}]}]}))
            .contains("spec.ipv4.pool[0].reservedRanges[0].end \"x\" is not an IP address")
        );
    }
}
