//! The one CiliumPodIPPool conversion: a pool object (v2alpha1 or v2) as the multi-pool
//! allocator's [`PoolSpec`]: CIDRs and mask size per family, `allowFirstIP`/`allowLastIP`, and
//! (v2) the `reservedRanges` of each `pool[]` entry, which must name one of the family's CIDRs
//! and lie inside it. A field that does not convert is named with its path; the pool is then
//! not applied at all. The operator's watch and the agent's store both convert through here;
//! neither reads a pool's fields itself.

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::Value;
use weft_k8s::{
    crd::pool::{CiliumPodIPPool, PoolFamilySpec},
    resource::{FieldError, decode},
};

use crate::multipool::{FamilySpec, PoolSpec, ReservedRange};

/// A CiliumPodIPPool as the node manager is told of it.
#[derive(Debug)]
pub struct PoolView {
    /// The pool's name.
    pub name: String,
    /// Its spec, or why it cannot be used (names the field).
    pub spec: Result<PoolSpec, PoolSpecError>,
}

impl PoolView {
    /// A pool object as the API server sent it.
    #[must_use]
    pub fn from_json(doc: &Value) -> Self {
        let name = doc
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let spec = decode::<CiliumPodIPPool>(doc)
            .map_err(|source| PoolSpecError::Decode {
                pool: name.clone(),
                source,
            })
            .and_then(|pool| pool_spec(&pool));
        Self { name, spec }
    }

    /// A typed pool (a store's document).
    #[must_use]
    pub fn from_pool(pool: &CiliumPodIPPool) -> Self {
        Self {
            name: pool.name().to_owned(),
            spec: pool_spec(pool),
        }
    }
}

/// Why a CiliumPodIPPool cannot be handed to the allocator.
#[derive(Debug, thiserror::Error)]
pub enum PoolSpecError {
    /// The object does not have a pool's form.
    #[error("CiliumPodIPPool {pool}")]
    Decode {
        /// The pool.
        pool: String,
        /// The field of the wrong form.
        #[source]
        source: FieldError,
    },
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

    fn decode(doc: &Value) -> CiliumPodIPPool {
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
        let pool =
            |ipv4: Value| decode(&json!({"metadata": {"name": "p"}, "spec": {"ipv4": ipv4}}));
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

    #[test]
    fn v2_pool_with_reserved_ranges_from_json() {
        let view = PoolView::from_json(&json!({
            "metadata": {"name": "default"},
            "spec": {"ipv4": {"cidrs": ["10.10.0.0/16", "10.20.0.0/16"], "maskSize": 24,
                "pool": [{"cidr": "10.10.0.0/16", "reservedRanges": [{"start": "10.10.0.0", "end": "10.10.255.255"}]}]},
                "allowLastIP": true}
        }));
        let spec = view.spec.expect("usable");
        assert_eq!(spec.reserved.len(), 1);
        assert!(spec.allow_last_ip && !spec.allow_first_ip);
        assert_eq!(spec.ipv4.map(|f| f.mask_size), Some(24));
    }

    #[test]
    fn refusals_name_the_field() {
        for (ipv4, want) in [
            (
                json!({"cidrs": ["10.0.0.0/8", "banana"], "maskSize": 24}),
                "spec.ipv4.cidrs[1]",
            ),
            (
                json!({"cidrs": ["10.0.0.0/8"], "maskSize": 24, "pool": [{"cidr": "11.0.0.0/8"}]}),
                "spec.ipv4.pool[0].cidr",
            ),
            (
                json!({"cidrs": ["10.0.0.0/8"], "maskSize": 24, "pool": [{"cidr": "10.0.0.0/8", "reservedRanges": [{"start": "10.0.0.9", "end": "10.0.0.1"}]}]}),
                "spec.ipv4.pool[0].reservedRanges[0]",
            ),
            (
                json!({"cidrs": ["10.0.0.0/8"], "maskSize": "big"}),
                "field spec.ipv4.maskSize",
            ),
        ] {
            let view =
                PoolView::from_json(&json!({"metadata": {"name": "p"}, "spec": {"ipv4": ipv4}}));
            let err = weft_k8s::error::chain(&view.spec.expect_err("refused"));
            assert!(
                err.starts_with(&format!("CiliumPodIPPool p: {want}")),
                "{err}"
            );
        }
    }
}
