//! Which destinations keep the pod address: the ip-masq-agent configuration file (Cilium's
//! `pkg/ipmasq`: `nonMasqueradeCIDRs`, `masqLinkLocal`, `masqLinkLocalIPv6`, YAML or JSON), the
//! native-routing CIDRs, and per-pool additions, turned into the exclusion list the datapath
//! enforces per pool. Reading the file is the only IO here; [`Masquerade::reload`] parses
//! first and touches the map only when everything parsed, so a bad edit never drops the
//! exclusions in force.

use std::{
    collections::BTreeMap,
    io,
    net::{Ipv4Addr, Ipv6Addr},
    path::{Path, PathBuf},
};

use agent_common::masq::{MASQ_F_IP_MASQ_AGENT, MASQ_F_NATIVE_ROUTING, MASQ_F_POOL, POOL_ANY};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::Deserialize;

use crate::{
    config::AgentConfig,
    datapath::{Datapath, DatapathError, MasqExclusion, MasqSync},
};

mod watch;

pub use watch::watch_file;

/// Non-masquerade CIDRs used when the file is missing or empty (RFC 1918, CGNAT and the
/// special-purpose blocks), as Cilium and the upstream ip-masq-agent.
pub const DEFAULT_NON_MASQ_CIDRS: [&str; 11] = [
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "240.0.0.0/4",
];
/// IPv4 link-local, excluded unless `masqLinkLocal` is true.
pub const LINK_LOCAL_V4: Ipv4Net = Ipv4Net::new_assert(Ipv4Addr::new(169, 254, 0, 0), 16);
/// IPv6 link-local, excluded unless `masqLinkLocalIPv6` is true.
pub const LINK_LOCAL_V6: Ipv6Net =
    Ipv6Net::new_assert(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10);

/// Masquerade inputs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MasqConfig {
    /// The ip-masq-agent configuration file; `None`: ip-masq-agent is disabled.
    pub ip_masq_agent_config: Option<PathBuf>,
    /// `ipv4-native-routing-cidr`: pod addresses are routable inside it.
    pub native_routing_cidr_v4: Option<Ipv4Net>,
    /// `ipv6-native-routing-cidr`.
    pub native_routing_cidr_v6: Option<Ipv6Net>,
    /// Extra exclusions of single pools, by pool id.
    pub pool_exclusions: BTreeMap<u32, Vec<IpNet>>,
}

impl MasqConfig {
    /// The masquerade inputs of the agent configuration (`enable-ip-masq-agent`,
    /// `ip-masq-agent-config-path`, `ipv4-native-routing-cidr`, `ipv6-native-routing-cidr`).
    #[must_use]
    pub fn from_agent(config: &AgentConfig) -> Self {
        Self {
            ip_masq_agent_config: config
                .enable_ip_masq_agent
                .then(|| config.ip_masq_agent_config_path.clone()),
            native_routing_cidr_v4: config.ipv4_native_routing_cidr,
            native_routing_cidr_v6: config.ipv6_native_routing_cidr,
            pool_exclusions: BTreeMap::new(),
        }
    }
}

/// The parsed ip-masq-agent configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpMasqAgentConfig {
    /// Destinations that keep the pod address (host bits cleared).
    pub non_masquerade_cidrs: Vec<IpNet>,
    /// Masquerade IPv4 link-local destinations too.
    pub masq_link_local: bool,
    /// Masquerade IPv6 link-local destinations too.
    pub masq_link_local_ipv6: bool,
}

impl Default for IpMasqAgentConfig {
    /// What a missing or empty file means: the default list.
    fn default() -> Self {
        Self {
            non_masquerade_cidrs: DEFAULT_NON_MASQ_CIDRS
                .iter()
                .map(|c| c.parse().expect("valid literal"))
                .collect(),
            masq_link_local: false,
            masq_link_local_ipv6: false,
        }
    }
}

/// Why the masquerade configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum MasqError {
    /// The file exists but cannot be read.
    #[error("cannot read the ip-masq-agent configuration {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: io::Error,
    },
    /// The file is not YAML/JSON of the expected shape.
    #[error("{path}:{line}: not an ip-masq-agent configuration")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Line of the problem (1-based; 0 when unknown).
        line: usize,
        /// The parser's error.
        #[source]
        source: serde_norway::Error,
    },
    /// An entry of `nonMasqueradeCIDRs` is not a CIDR.
    #[error("{path}:{line}: invalid CIDR {value:?} in nonMasqueradeCIDRs")]
    InvalidCidr {
        /// The file.
        path: PathBuf,
        /// Line of the entry (1-based).
        line: usize,
        /// The entry as written.
        value: String,
    },
    /// The directory of the configuration file cannot be watched.
    #[error("cannot watch {path} for changes")]
    Watch {
        /// The directory.
        path: PathBuf,
        /// The inotify error.
        #[source]
        source: io::Error,
    },
    /// Writing the exclusion map failed.
    #[error("writing the masquerade exclusions")]
    Datapath(#[from] DatapathError),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(rename = "nonMasqueradeCIDRs", default)]
    non_masquerade_cidrs: Vec<serde_norway::Value>,
    #[serde(rename = "masqLinkLocal", default)]
    masq_link_local: bool,
    #[serde(rename = "masqLinkLocalIPv6", default)]
    masq_link_local_ipv6: bool,
    /// Read by the upstream ip-masq-agent; meaningless here (the file is watched).
    #[serde(rename = "resyncInterval", default)]
    _resync_interval: Option<serde_norway::Value>,
}

/// 1-based line of the first occurrence of `needle` at or after line `from`, else `from`.
fn line_of(text: &str, needle: &str, from: usize) -> usize {
    text.lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, l)| l.contains(needle))
        .map_or(from, |(i, _)| i + 1)
}

/// Parse the text of an ip-masq-agent configuration read from `path` (named in errors).
///
/// # Errors
/// The text is not YAML/JSON of the expected shape, or an entry is not a CIDR.
pub fn parse_ip_masq_agent(path: &Path, text: &str) -> Result<IpMasqAgentConfig, MasqError> {
    if text.trim().is_empty() {
        return Ok(IpMasqAgentConfig::default());
    }
    let raw: RawFile = serde_norway::from_str(text).map_err(|source| MasqError::Parse {
        path: path.to_owned(),
        line: source.location().map_or(0, |l| l.line()),
        source,
    })?;
    let list_line = line_of(text, "nonMasqueradeCIDRs", 1);
    let mut non_masquerade_cidrs = Vec::new();
    let mut search_from = list_line;
    for value in raw.non_masquerade_cidrs {
        let (written, parsed) = match &value {
            serde_norway::Value::String(s) => (s.clone(), s.trim().parse::<IpNet>().ok()),
            other => (
                serde_norway::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
                None,
            ),
        };
        let line = line_of(text, &written, search_from);
        let Some(cidr) = parsed else {
            return Err(MasqError::InvalidCidr {
                path: path.to_owned(),
                line,
                value: written,
            });
        };
        search_from = line;
        non_masquerade_cidrs.push(cidr.trunc());
    }
    Ok(IpMasqAgentConfig {
        non_masquerade_cidrs,
        masq_link_local: raw.masq_link_local,
        masq_link_local_ipv6: raw.masq_link_local_ipv6,
    })
}

/// Read and parse the ip-masq-agent configuration at `path`; a missing file means the
/// defaults.
///
/// # Errors
/// As [`parse_ip_masq_agent`], or the file cannot be read.
pub fn load_ip_masq_agent(path: &Path) -> Result<IpMasqAgentConfig, MasqError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_ip_masq_agent(path, &text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(IpMasqAgentConfig::default()),
        Err(source) => Err(MasqError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// The exclusions `config` asks for, given its parsed ip-masq-agent file (`None` when
/// ip-masq-agent is disabled).
#[must_use]
pub fn exclusions(config: &MasqConfig, agent: Option<&IpMasqAgentConfig>) -> Vec<MasqExclusion> {
    let all = |cidr: IpNet, flags| MasqExclusion {
        pool_id: POOL_ANY,
        cidr,
        flags,
    };
    let mut out = Vec::new();
    if let Some(agent) = agent {
        out.extend(
            agent
                .non_masquerade_cidrs
                .iter()
                .map(|c| all(*c, MASQ_F_IP_MASQ_AGENT)),
        );
        if !agent.masq_link_local {
            out.push(all(IpNet::V4(LINK_LOCAL_V4), MASQ_F_IP_MASQ_AGENT));
        }
        if !agent.masq_link_local_ipv6 {
            out.push(all(IpNet::V6(LINK_LOCAL_V6), MASQ_F_IP_MASQ_AGENT));
        }
    }
    if let Some(v4) = config.native_routing_cidr_v4 {
        out.push(all(IpNet::V4(v4.trunc()), MASQ_F_NATIVE_ROUTING));
    }
    if let Some(v6) = config.native_routing_cidr_v6 {
        out.push(all(IpNet::V6(v6.trunc()), MASQ_F_NATIVE_ROUTING));
    }
    for (&pool_id, cidrs) in &config.pool_exclusions {
        out.extend(cidrs.iter().map(|c| MasqExclusion {
            pool_id,
            cidr: c.trunc(),
            flags: MASQ_F_POOL,
        }));
    }
    out
}

/// Keeps the exclusion map in step with a [`MasqConfig`].
#[derive(Clone, Debug)]
pub struct Masquerade {
    config: MasqConfig,
}

impl Masquerade {
    /// Manage exclusions for `config`.
    #[must_use]
    pub fn new(config: MasqConfig) -> Self {
        Self { config }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &MasqConfig {
        &self.config
    }

    /// The exclusions the configuration asks for now (reads the ip-masq-agent file).
    ///
    /// # Errors
    /// The file cannot be read or parsed.
    pub fn wanted(&self) -> Result<Vec<MasqExclusion>, MasqError> {
        let agent = match &self.config.ip_masq_agent_config {
            Some(path) => Some(load_ip_masq_agent(path)?),
            None => None,
        };
        Ok(exclusions(&self.config, agent.as_ref()))
    }

    /// Re-read the configuration and make the map match it. On any parse error the map is
    /// left as it is (the previous exclusions stay in force) and the error names the file and
    /// line.
    ///
    /// # Errors
    /// The configuration is invalid or the map write failed.
    pub fn reload(&self, datapath: &mut Datapath) -> Result<MasqSync, MasqError> {
        let wanted = self.wanted()?;
        Ok(datapath.sync_masq_exclusions(&wanted)?)
    }
}

#[cfg(test)]
mod tests;
