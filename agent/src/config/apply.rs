//! How one key's value is read: [`Given`] is a key of the table ([`super::reference`]) with the
//! value a layer gave it, and its readers (booleans, counts, lists, tags, CIDRs) refuse a value
//! of the wrong form with a [`ConfigError`] that names the row's key. Pure; it knows no key by
//! name (each row of the table says which reader it uses and where the value goes).

use std::collections::BTreeMap;

use ipnet::IpNet;

use super::{
    ConfigError, parse_bool, parse_duration,
    routing::{RoutingMode, TunnelProtocol},
};
use crate::ipam::mode::IpamMode;

/// A key with the value one layer gave it (trimmed).
#[derive(Clone, Copy, Debug)]
pub struct Given<'a> {
    /// The key (from its table row).
    pub key: &'static str,
    /// The value.
    pub value: &'a str,
}

impl Given<'_> {
    /// The refusal of this value: what would be accepted.
    pub fn bad(&self, expected: impl Into<String>) -> ConfigError {
        ConfigError {
            key: self.key.to_owned(),
            value: self.value.to_owned(),
            expected: expected.into(),
        }
    }

    /// A Go-style boolean.
    pub fn bool(&self) -> Result<bool, ConfigError> {
        parse_bool(self.value).ok_or_else(|| self.bad("true or false"))
    }

    /// A Go duration.
    pub fn duration(&self) -> Result<std::time::Duration, ConfigError> {
        parse_duration(self.value).ok_or_else(|| self.bad("a duration such as 15s, 500ms or 1m"))
    }

    /// A count of addresses to seed (empty: 0, unset).
    pub fn count(&self) -> Result<u32, ConfigError> {
        if self.value.is_empty() {
            return Ok(0);
        }
        self.value
            .parse()
            .map_err(|_| self.bad("a non-negative integer (0: unset)"))
    }

    /// `key=value,…` (Cilium's map flags), or a JSON object.
    pub fn tags(&self, expected: &str) -> Result<BTreeMap<String, String>, ConfigError> {
        parse_tags(self.value).ok_or_else(|| self.bad(expected))
    }

    /// A comma-separated list (empty items dropped).
    pub fn list(&self) -> Vec<String> {
        self.value
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// A CIDR of the family `T`, named `family` in the refusal (empty: none).
    pub fn cidr<T: std::str::FromStr>(&self, family: &str) -> Result<Option<T>, ConfigError> {
        if self.value.is_empty() {
            return Ok(None);
        }
        let expected = format!("an {family} CIDR ({} must be an {family} CIDR)", self.key);
        self.value.parse().map(Some).map_err(|_| self.bad(expected))
    }

    /// The IPAM mode, of those weft runs.
    pub fn mode(&self) -> Result<IpamMode, ConfigError> {
        // Only the modes weft runs are named, whatever was given.
        let mode: IpamMode = self
            .value
            .parse()
            .map_err(|_| self.bad(modes_weft_runs()))?;
        if mode == IpamMode::DelegatedPlugin {
            return Err(self.bad(delegated_refused()));
        }
        Ok(mode)
    }

    /// `native` or `tunnel`; empty is Cilium's default, `tunnel`. (`hybrid` is refused: weft
    /// has no per-node choice between the two.)
    pub fn routing_mode(&self) -> Result<RoutingMode, ConfigError> {
        match self.value.to_ascii_lowercase().as_str() {
            "native" => Ok(RoutingMode::Native),
            "tunnel" | "" => Ok(RoutingMode::Tunnel),
            _ => Err(self.bad("native or tunnel")),
        }
    }

    /// `vxlan` or `geneve` (empty: vxlan, Cilium's default).
    pub fn tunnel_protocol(&self) -> Result<TunnelProtocol, ConfigError> {
        match self.value.to_ascii_lowercase().as_str() {
            "vxlan" | "" => Ok(TunnelProtocol::Vxlan),
            "geneve" => Ok(TunnelProtocol::Geneve),
            _ => Err(self.bad("vxlan or geneve")),
        }
    }

    /// A UDP port (empty or 0: the protocol's default).
    pub fn port(&self) -> Result<u16, ConfigError> {
        if self.value.is_empty() {
            return Ok(0);
        }
        self.value
            .parse()
            .map_err(|_| self.bad("a UDP port from 1 to 65535 (0: the protocol's default)"))
    }

    /// A list of CIDRs separated by spaces or commas, as Cilium's ConfigMap writes a string
    /// slice.
    pub fn cidr_list(&self) -> Result<Vec<IpNet>, ConfigError> {
        self.value
            .split([' ', ','])
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| {
                item.parse().map_err(|_| {
                    self.bad(format!(
                        "CIDRs separated by spaces or commas, e.g. 10.0.0.0/8 ({item:?} is not a \
                         CIDR)"
                    ))
                })
            })
            .collect()
    }

    /// A node block's prefix length, at most `max`.
    pub fn mask_size(&self, max: u8, example: &str) -> Result<u8, ConfigError> {
        self.value
            .parse::<u8>()
            .ok()
            .filter(|mask| (1..=max).contains(mask))
            .ok_or_else(|| {
                self.bad(format!(
                    "a prefix length from 1 to {max} for each node's block, e.g. {example}"
                ))
            })
    }
}

/// What an unknown `ipam` value gets: the modes weft runs (Cilium's, but delegated-plugin).
fn modes_weft_runs() -> String {
    let modes: Vec<&str> = IpamMode::ALL
        .iter()
        .filter(|mode| **mode != IpamMode::DelegatedPlugin)
        .map(|mode| mode.as_str())
        .collect();
    format!("one of the modes weft runs: {}", modes.join(", "))
}

/// What `ipam: delegated-plugin` gets: the modes weft runs instead. weft's plugin does not
/// delegate IPAM to another CNI plugin, so the agent would answer every ADD with an error.
fn delegated_refused() -> String {
    format!(
        "{} (weft-cni does not delegate IPAM to another CNI plugin, so Cilium's \
         delegated-plugin is not supported)",
        modes_weft_runs()
    )
}

/// `k=v,k2=v2` (Cilium's map flags); also accepts a JSON object.
fn parse_tags(value: &str) -> Option<BTreeMap<String, String>> {
    if value.starts_with('{') {
        return serde_json::from_str(value).ok();
    }
    value
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_owned(), v.trim().to_owned()))
        })
        .collect()
}
