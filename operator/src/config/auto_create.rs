//! One `auto-create-cilium-pod-ip-pools` entry (Cilium's `pool_handler.go` format),
//! `<pool>=ipv4-cidrs:<cidr>[,<cidr>…];ipv4-mask-size:<n>[;ipv6-cidrs:…;ipv6-mask-size:<n>]`,
//! read into a pool spec. Pure; whether the allocator accepts the pool is checked by the caller.

use ipnet::IpNet;
use weft_k8s::config_values::parse_bool;

use weft_cluster_ipam::multipool::{FamilySpec, PoolSpec};

/// What is wrong with an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AutoCreateFault {
    /// No `=` after the pool name.
    #[error("no `=` after the pool name")]
    NoEquals,
    /// The pool name is empty.
    #[error("the pool name is empty")]
    EmptyName,
    /// A part has no `:`.
    #[error("{part:?} has no `:`")]
    NoColon {
        /// The part.
        part: String,
    },
    /// A CIDR does not parse.
    #[error("{value:?} is not a CIDR")]
    NotCidr {
        /// The value.
        value: String,
    },
    /// A mask size does not parse.
    #[error("{value:?} is not a mask size")]
    NotMask {
        /// The value.
        value: String,
    },
    /// A boolean does not parse.
    #[error("{value:?} is not true or false")]
    NotBool {
        /// The value.
        value: String,
    },
    /// A part names no field of the format.
    #[error("unknown key {field:?}")]
    UnknownField {
        /// The field.
        field: String,
    },
    /// A family's CIDRs or mask size without the other.
    #[error("{family}-cidrs and {family}-mask-size go together")]
    Unpaired {
        /// `ipv4` or `ipv6`.
        family: &'static str,
    },
    /// Neither family has CIDRs.
    #[error("no CIDRs")]
    NoCidrs,
}

/// Reads one entry into the pool's name and spec.
///
/// # Errors
/// The fault of the entry's form.
pub fn parse(entry: &str) -> Result<(String, PoolSpec), AutoCreateFault> {
    let (name, body) = entry.split_once('=').ok_or(AutoCreateFault::NoEquals)?;
    if name.is_empty() {
        return Err(AutoCreateFault::EmptyName);
    }
    let mut spec = PoolSpec::default();
    let (mut v4, mut v6) = ((None, None), (None, None));
    for part in body.split(';').filter(|p| !p.is_empty()) {
        let (field, value) = part
            .split_once(':')
            .ok_or_else(|| AutoCreateFault::NoColon {
                part: part.to_owned(),
            })?;
        match field {
            "ipv4-cidrs" => v4.0 = Some(cidrs(value)?),
            "ipv4-mask-size" => v4.1 = Some(mask(value)?),
            "ipv6-cidrs" => v6.0 = Some(cidrs(value)?),
            "ipv6-mask-size" => v6.1 = Some(mask(value)?),
            "allow-first-ip" => spec.allow_first_ip = flag(value)?,
            "allow-last-ip" => spec.allow_last_ip = flag(value)?,
            other => {
                return Err(AutoCreateFault::UnknownField {
                    field: other.to_owned(),
                });
            }
        }
    }
    for (family, (cidrs, mask), slot) in
        [("ipv4", v4, &mut spec.ipv4), ("ipv6", v6, &mut spec.ipv6)]
    {
        match (cidrs, mask) {
            (Some(cidrs), Some(mask_size)) => *slot = Some(FamilySpec { cidrs, mask_size }),
            (None, None) => {}
            _ => return Err(AutoCreateFault::Unpaired { family }),
        }
    }
    if spec.ipv4.is_none() && spec.ipv6.is_none() {
        return Err(AutoCreateFault::NoCidrs);
    }
    Ok((name.to_owned(), spec))
}

fn cidrs(value: &str) -> Result<Vec<IpNet>, AutoCreateFault> {
    value
        .split(',')
        .map(|c| {
            c.parse().map_err(|_| AutoCreateFault::NotCidr {
                value: c.to_owned(),
            })
        })
        .collect()
}

fn mask(value: &str) -> Result<u8, AutoCreateFault> {
    value.parse().map_err(|_| AutoCreateFault::NotMask {
        value: value.to_owned(),
    })
}

fn flag(value: &str) -> Result<bool, AutoCreateFault> {
    parse_bool(value).ok_or_else(|| AutoCreateFault::NotBool {
        value: value.to_owned(),
    })
}
