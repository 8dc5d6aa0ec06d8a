//! Agent configuration in Cilium's vocabulary: the keys of the `cilium-config` ConfigMap
//! (`ipam`, `ipam-default-ip-pool`, `enable-ipv6`, …), read from a directory of one file per
//! key (a mounted ConfigMap) or a YAML/JSON map, overridden per node by CiliumNodeConfig
//! defaults, and by command-line flags of the same names. Pure: callers do the reading.

use std::{collections::BTreeMap, time::Duration};

use crate::ipam::mode::IpamMode;

/// The keys weft understands (others in a shared cilium-config are ignored).
pub const KEYS: [&str; 8] = [
    "ipam",
    "ipam-default-ip-pool",
    "ipam-multi-pool-pre-allocation",
    "enable-ipv4",
    "enable-ipv6",
    "ipam-cilium-node-update-rate",
    "enable-health-checking",
    "only-masquerade-default-pool",
];

/// The resolved configuration.
#[expect(
    clippy::struct_excessive_bools,
    reason = "mirrors cilium-config's boolean keys"
)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentConfig {
    /// `ipam`: the IPAM mode (default `cluster-pool`).
    pub ipam: IpamMode,
    /// `ipam-default-ip-pool` (default `default`).
    pub default_pool: String,
    /// `ipam-multi-pool-pre-allocation`, unparsed (parsed by `ipam::prealloc`).
    pub multi_pool_pre_allocation: String,
    /// `enable-ipv4` (default true).
    pub enable_ipv4: bool,
    /// `enable-ipv6` (default false, as Cilium).
    pub enable_ipv6: bool,
    /// `ipam-cilium-node-update-rate`: debounce of CiliumNode writes (default 15s).
    pub node_update_rate: Duration,
    /// `enable-health-checking` (default true): the CRD allocator then waits for 2 addresses.
    pub health_checking: bool,
    /// `only-masquerade-default-pool` (default false).
    pub only_masquerade_default_pool: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            ipam: IpamMode::default(),
            default_pool: "default".to_owned(),
            multi_pool_pre_allocation: String::new(),
            enable_ipv4: true,
            enable_ipv6: false,
            node_update_rate: Duration::from_secs(15),
            health_checking: true,
            only_masquerade_default_pool: false,
        }
    }
}

/// A configuration value that cannot be used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?} for {key}: expected {expected}")]
pub struct ConfigError {
    /// The key.
    pub key: String,
    /// The value given.
    pub value: String,
    /// What would be accepted.
    pub expected: String,
}

impl AgentConfig {
    /// Resolve from layers of key/value maps, later layers winning (e.g. config file, then
    /// CiliumNodeConfig defaults, then flags). Unknown keys are ignored.
    ///
    /// # Errors
    /// A known key has a value of the wrong form; the error names the key and the fix.
    pub fn resolve<'a>(
        layers: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
    ) -> Result<Self, ConfigError> {
        let mut merged = BTreeMap::new();
        for layer in layers {
            for (k, v) in layer {
                merged.insert(k.as_str(), v.trim());
            }
        }
        let mut config = Self::default();
        for (key, value) in merged {
            let bad = |expected: &str| ConfigError {
                key: key.to_owned(),
                value: value.to_owned(),
                expected: expected.to_owned(),
            };
            match key {
                "ipam" => {
                    config.ipam = value
                        .parse()
                        .map_err(|e: crate::ipam::mode::ModeError| bad(&e.to_string()))?;
                }
                "ipam-default-ip-pool" if !value.is_empty() => {
                    value.clone_into(&mut config.default_pool);
                }
                "ipam-multi-pool-pre-allocation" => {
                    value.clone_into(&mut config.multi_pool_pre_allocation);
                }
                "enable-ipv4" => {
                    config.enable_ipv4 = parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "enable-ipv6" => {
                    config.enable_ipv6 = parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "enable-health-checking" => {
                    config.health_checking =
                        parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "only-masquerade-default-pool" => {
                    config.only_masquerade_default_pool =
                        parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "ipam-cilium-node-update-rate" => {
                    config.node_update_rate = parse_duration(value)
                        .ok_or_else(|| bad("a duration such as 15s, 500ms or 1m"))?;
                }
                _ => {}
            }
        }
        if !config.enable_ipv4 && !config.enable_ipv6 {
            return Err(ConfigError {
                key: "enable-ipv4".into(),
                value: "false".into(),
                expected: "at least one of enable-ipv4 and enable-ipv6 to be true".into(),
            });
        }
        Ok(config)
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Some(true),
        "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

/// Go-style durations: `15s`, `500ms`, `1m`, `1h`, `1m30s`, `0`.
#[must_use]
pub fn parse_duration(v: &str) -> Option<Duration> {
    if v == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = v;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += Duration::try_from_secs_f64(number * scale).ok()?;
        rest = &rest[unit_len..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn later_layers_win_and_unknown_keys_are_ignored() {
        let file = layer(&[
            ("ipam", "multi-pool"),
            ("enable-ipv6", "true"),
            ("tunnel", "vxlan"),
        ]);
        let node = layer(&[("ipam-default-ip-pool", "dc1")]);
        let flags = layer(&[("enable-ipv6", "false")]);
        let c = AgentConfig::resolve([&file, &node, &flags]).expect("valid");
        assert_eq!(c.ipam.to_string(), "multi-pool");
        assert_eq!(c.default_pool, "dc1");
        assert!(!c.enable_ipv6);
    }

    #[test]
    fn bad_values_name_the_key_and_the_fix() {
        let e = AgentConfig::resolve([&layer(&[("enable-ipv6", "maybe")])]).expect_err("bad");
        assert_eq!(
            e.to_string(),
            "invalid value \"maybe\" for enable-ipv6: expected true or false"
        );
        let e = AgentConfig::resolve([&layer(&[("ipam", "magic")])]).expect_err("bad");
        assert!(e.to_string().contains("Unknown IPAM backend magic"), "{e}");
        let e = AgentConfig::resolve([&layer(&[("enable-ipv4", "false")])]).expect_err("none");
        assert!(e.to_string().contains("at least one"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15s"), Some(Duration::from_secs(15)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("5x"), None);
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
    }
}
