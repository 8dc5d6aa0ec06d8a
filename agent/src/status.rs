//! `weft-agent status`: the report a running agent sends over its socket (like `cilium-dbg
//! status`), and how it reads for people. The daemon fills it ([`AgentStatus`]); this module
//! only holds the data, decides whether it is healthy and renders it, so both are tested
//! without an agent. It imports nothing from the crate: `cni::proto` carries the report and
//! `cni::query` asks for it, never the reverse. The IPAM line is Cilium's (`IPAM: IPv4: 7/254
//! allocated from 10.4.0.0/24`), so the troubleshooting steps Cilium users know carry over.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// Everything `weft-agent status` shows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStatus {
    /// The node this agent runs on.
    pub node: String,
    /// weft-agent's version.
    pub version: String,
    /// Seconds since the agent started.
    pub uptime_seconds: u64,
    /// IPAM mode and usage.
    pub ipam: IpamStatus,
    /// Programs, attachments and maps.
    pub datapath: DatapathStatus,
    /// How pods on other nodes are reached.
    #[serde(default)]
    pub routing: RoutingStatus,
    /// Where the cluster's objects come from and how writing back goes.
    pub store: StoreStatus,
    /// Pod attachments the agent holds (endpoint records).
    pub endpoints: usize,
    /// What is wrong; empty when healthy.
    pub problems: Vec<String>,
    /// Cloud interfaces the ENI device configurator manages (eni mode).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<ManagedInterface>,
    /// The pods' source-routing rules (eni, azure, alibabacloud), as `ip rule` shows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_rules: Vec<String>,
}

/// One cloud interface the agent manages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedInterface {
    /// The interface's id (`eni-…`).
    pub id: String,
    /// Its MAC.
    pub mac: String,
    /// Its device index.
    pub number: i64,
    /// The link found for it (empty until found).
    pub ifname: String,
    /// The link's MTU once configured.
    pub mtu: Option<u32>,
    /// `configured`, `looking for a link …`, `no link … after 15 tries`, `failed: …`.
    pub state: String,
}

/// IPAM mode and usage.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpamStatus {
    /// The `ipam` mode (`multi-pool`, `cluster-pool`, …).
    pub mode: String,
    /// Cilium's `Dump` status, e.g. `IPv4: 7/254 allocated from 10.4.0.0/24`.
    pub status: String,
    /// Per pool and family.
    pub pools: Vec<PoolStatus>,
    /// Free addresses over every pool.
    pub available: u64,
    /// Addresses in use over every pool.
    pub used: u64,
    /// Addresses the node still needs from the operator.
    pub needed: u64,
    /// Why new pods cannot get addresses now (Cilium's wording); `None` when they can.
    pub not_ready: Option<String>,
    /// The operator's `status.ipam.operator-status.error` on the own CiliumNode.
    pub operator_error: Option<String>,
}

/// One pool in one family.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStatus {
    /// Pool name.
    pub pool: String,
    /// `ipv4` or `ipv6`.
    pub family: String,
    /// Addresses the pool can hand out.
    pub capacity: u64,
    /// Addresses in use.
    pub used: u64,
    /// The allocation CIDR (host-scope modes).
    pub cidr: Option<String>,
    /// CIDRs held (multi-pool).
    pub cidrs: usize,
}

/// Programs, attachments and maps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatapathStatus {
    /// bpffs directory of the pins.
    pub pin_dir: String,
    /// `tcx` or `netlink`, or `netlink (pod veths), tcx (native devices)` (`auto` on 6.6+).
    pub attach_mode: String,
    /// Program → interfaces it is attached to.
    pub programs: Vec<ProgramStatus>,
    /// Pinned maps.
    pub maps: Vec<MapStatus>,
}

/// How pods on other nodes are reached (`routing-mode`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutingStatus {
    /// `native` or `tunnel`.
    pub mode: String,
    /// The tunnel, in tunnel routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<TunnelStatus>,
}

/// The tunnel in force.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelStatus {
    /// The device (`weft_vxlan`).
    pub device: String,
    /// Its UDP port.
    pub port: u16,
    /// `ipv4` or `ipv6`: the outer headers' family.
    pub underlay: String,
    /// The underlay's MTU (the device's).
    pub underlay_mtu: u32,
    /// The pods' MTU: the underlay's minus the encapsulation.
    pub pod_mtu: u32,
}

impl RoutingStatus {
    /// The `Routing` line: `tunnel (weft_vxlan, UDP 8472, ipv4 underlay mtu 1500), pod MTU
    /// 1450`, or the mode alone.
    fn line(&self) -> String {
        match &self.tunnel {
            Some(t) => format!(
                "{} ({}, UDP {}, {} underlay mtu {}), pod MTU {}",
                self.mode, t.device, t.port, t.underlay, t.underlay_mtu, t.pod_mtu
            ),
            None => self.mode.clone(),
        }
    }
}

/// A program and its interfaces.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramStatus {
    /// Program name.
    pub program: String,
    /// Interfaces, sorted.
    pub devices: Vec<String>,
}

/// A pinned map.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapStatus {
    /// Map name.
    pub name: String,
    /// Entries now.
    pub entries: u64,
    /// `max_entries`.
    pub capacity: u32,
}

/// The store and its writer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreStatus {
    /// `kubernetes` or `embedded`.
    pub kind: String,
    /// The store directory, or `API server`.
    pub source: String,
    /// The first full read (every watch listed once) finished.
    pub synced: bool,
    /// Successful CiliumNode writes since start.
    pub writes: u64,
    /// 409 Conflicts answered to writes.
    pub conflicts: u64,
    /// Failed writes (kept queued).
    pub failures: u64,
    /// Seconds since the last successful write; `None`: none since start.
    pub last_write_seconds_ago: Option<u64>,
}

impl AgentStatus {
    /// Healthy: nothing in [`AgentStatus::problems`].
    #[must_use]
    pub fn healthy(&self) -> bool {
        self.problems.is_empty()
    }

    /// The report for people, `cilium-dbg status`-style: one `Label: value` line per area.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |label: &str, value: &str| {
            let label = if label.is_empty() {
                String::new()
            } else {
                format!("{label}:")
            };
            let _ = writeln!(out, "{label:<20} {value}");
        };
        line("Node", &self.node);
        line(
            "weft-agent",
            &format!(
                "{} ({}, up {}s)",
                if self.healthy() { "Ok" } else { "Degraded" },
                self.version,
                self.uptime_seconds
            ),
        );
        line(
            "Store",
            &format!(
                "{} ({}), {}",
                self.store.kind,
                self.store.source,
                if self.store.synced {
                    "synced"
                } else {
                    "not synced"
                }
            ),
        );
        line("CiliumNode writes", &self.writes_line());
        line("IPAM mode", &self.ipam.mode);
        line("IPAM", &self.ipam.status);
        for p in &self.ipam.pools {
            let cidr = p
                .cidr
                .clone()
                .unwrap_or_else(|| format!("{} CIDR(s)", p.cidrs));
            line(
                "",
                &format!(
                    "  {:<12} {}: {}/{} used ({cidr})",
                    p.pool, p.family, p.used, p.capacity
                ),
            );
        }
        line(
            "IPAM totals",
            &format!(
                "{} used, {} available, {} needed",
                self.ipam.used, self.ipam.available, self.ipam.needed
            ),
        );
        if let Some(error) = &self.ipam.operator_error {
            line("Operator error", error);
        }
        line("Endpoints", &self.endpoints.to_string());
        line("Routing", &self.routing.line());
        line(
            "Datapath",
            &format!(
                "{} attachments, pins in {}",
                self.datapath.attach_mode, self.datapath.pin_dir
            ),
        );
        for p in &self.datapath.programs {
            let devices = if p.devices.is_empty() {
                "-".to_owned()
            } else {
                p.devices.join(", ")
            };
            line("", &format!("  {:<15} {devices}", p.program));
        }
        line(
            "Maps",
            &format!("{} pinned (entries/capacity)", self.datapath.maps.len()),
        );
        for m in &self.datapath.maps {
            line(
                "",
                &format!("  {:<15} {}/{}", m.name, m.entries, m.capacity),
            );
        }
        for (label, value) in self.cloud_rows() {
            line(label, &value);
        }
        if self.problems.is_empty() {
            line("Problems", "none");
        } else {
            line("Problems", &self.problems.len().to_string());
            for p in &self.problems {
                line("", &format!("  {p}"));
            }
        }
        out
    }

    /// The managed cloud interfaces and the pods' rules, as (label, value) rows.
    fn cloud_rows(&self) -> Vec<(&'static str, String)> {
        let mut rows = Vec::new();
        if !self.interfaces.is_empty() {
            rows.push(("Cloud interfaces", self.interfaces.len().to_string()));
            for i in &self.interfaces {
                let ifname = if i.ifname.is_empty() { "-" } else { &i.ifname };
                let mtu = i.mtu.map(|m| format!(" mtu {m}")).unwrap_or_default();
                rows.push((
                    "",
                    format!(
                        "  {} ({}, index {}): {ifname}{mtu} {}",
                        i.id, i.mac, i.number, i.state
                    ),
                ));
            }
        }
        if !self.pod_rules.is_empty() {
            rows.push(("Pod routing rules", self.pod_rules.len().to_string()));
            rows.extend(self.pod_rules.iter().map(|r| ("", format!("  {r}"))));
        }
        rows
    }

    fn writes_line(&self) -> String {
        let s = &self.store;
        let last = s
            .last_write_seconds_ago
            .map_or_else(|| "none yet".to_owned(), |n| format!("{n}s ago"));
        format!(
            "{} written, {} conflicts, {} failed; last {last}",
            s.writes, s.conflicts, s.failures
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> AgentStatus {
        AgentStatus {
            node: "node1".into(),
            version: "0.1.0".into(),
            uptime_seconds: 42,
            ipam: IpamStatus {
                mode: "cluster-pool".into(),
                status: "IPv4: 7/254 allocated from 10.4.0.0/24".into(),
                pools: vec![PoolStatus {
                    pool: "default".into(),
                    family: "ipv4".into(),
                    capacity: 254,
                    used: 7,
                    cidr: Some("10.4.0.0/24".into()),
                    cidrs: 1,
                }],
                available: 247,
                used: 7,
                needed: 0,
                not_ready: None,
                operator_error: None,
            },
            datapath: DatapathStatus {
                pin_dir: "/sys/fs/bpf/weft".into(),
                attach_mode: "tcx".into(),
                programs: vec![
                    ProgramStatus {
                        program: "from_container".into(),
                        devices: vec!["wft1".into(), "wft2".into()],
                    },
                    ProgramStatus {
                        program: "to_netdev".into(),
                        devices: Vec::new(),
                    },
                ],
                maps: vec![MapStatus {
                    name: "weft_eps_v1".into(),
                    entries: 6,
                    capacity: 65535,
                }],
            },
            store: StoreStatus {
                kind: "embedded".into(),
                source: "/tmp/store".into(),
                synced: true,
                writes: 3,
                conflicts: 0,
                failures: 0,
                last_write_seconds_ago: Some(5),
            },
            routing: RoutingStatus {
                mode: "native".into(),
                tunnel: None,
            },
            endpoints: 6,
            problems: Vec::new(),
            interfaces: Vec::new(),
            pod_rules: Vec::new(),
        }
    }

    #[test]
    fn the_tunnel_and_the_pods_mtu_are_shown() {
        let mut status = sample();
        assert!(status.render().contains("Routing:             native\n"));
        status.routing = RoutingStatus {
            mode: "tunnel".into(),
            tunnel: Some(TunnelStatus {
                device: "weft_vxlan".into(),
                port: 8472,
                underlay: "ipv4".into(),
                underlay_mtu: 1500,
                pod_mtu: 1450,
            }),
        };
        let text = status.render();
        assert!(
            text.contains(
                "Routing:             tunnel (weft_vxlan, UDP 8472, ipv4 underlay mtu 1500), pod \
                 MTU 1450\n"
            ),
            "{text}"
        );
        let json = serde_json::to_string(&status).expect("json");
        assert_eq!(
            serde_json::from_str::<AgentStatus>(&json).expect("parses"),
            status
        );
    }

    #[test]
    fn managed_interfaces_and_pod_rules_are_listed() {
        let mut status = sample();
        status.interfaces = vec![ManagedInterface {
            id: "eni-1".into(),
            mac: "02:00:00:00:00:20".into(),
            number: 1,
            ifname: "eth1".into(),
            mtu: Some(9001),
            state: "configured".into(),
        }];
        status.pod_rules = vec!["111: from 10.6.1.21/32 lookup 11".into()];
        let text = status.render();
        assert!(
            text.contains("Cloud interfaces:    1\n")
                && text.contains("eni-1 (02:00:00:00:00:20, index 1): eth1 mtu 9001 configured"),
            "{text}"
        );
        assert!(
            text.contains("  111: from 10.6.1.21/32 lookup 11"),
            "{text}"
        );
        let json = serde_json::to_string(&status).expect("json");
        assert_eq!(
            serde_json::from_str::<AgentStatus>(&json).expect("parses"),
            status
        );
    }

    #[test]
    fn a_healthy_report_has_cilium_s_ipam_line_and_every_area() {
        let status = sample();
        assert!(status.healthy());
        let text = status.render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines.contains(&"IPAM:                IPv4: 7/254 allocated from 10.4.0.0/24"),
            "{text}"
        );
        assert!(
            lines.contains(&"weft-agent:          Ok (0.1.0, up 42s)"),
            "{text}"
        );
        assert!(
            text.contains("  default      ipv4: 7/254 used (10.4.0.0/24)"),
            "{text}"
        );
        assert!(
            lines.contains(&"                       from_container  wft1, wft2"),
            "continuation lines have no label: {text}"
        );
        assert!(
            lines.contains(&"Maps:                1 pinned (entries/capacity)"),
            "{text}"
        );
        assert!(text.contains("  to_netdev       -"), "{text}");
        assert!(text.contains("  weft_eps_v1     6/65535"), "{text}");
        assert!(
            text.contains("3 written, 0 conflicts, 0 failed; last 5s ago"),
            "{text}"
        );
        assert!(text.contains("Problems:            none"), "{text}");
        assert!(!text.contains("Operator error"), "{text}");
    }

    #[test]
    fn problems_and_the_operator_error_make_it_degraded() {
        let mut status = sample();
        status.ipam.operator_error = Some("allocator exhausted".into());
        status.problems = vec![
            "operator: allocator exhausted".into(),
            "/tmp/store/pods/x.yaml: bad".into(),
        ];
        assert!(!status.healthy());
        let text = status.render();
        assert!(text.contains("Degraded"), "{text}");
        assert!(
            text.contains("Operator error:      allocator exhausted"),
            "{text}"
        );
        assert!(text.contains("Problems:            2"), "{text}");
        assert!(text.contains("  /tmp/store/pods/x.yaml: bad"), "{text}");
    }

    #[test]
    fn the_json_form_round_trips() {
        let status = sample();
        let json = serde_json::to_string(&status).expect("encode");
        let back: AgentStatus = serde_json::from_str(&json).expect("decode");
        assert_eq!(back, status);
        let value: serde_json::Value = serde_json::from_str(&json).expect("value");
        assert_eq!(value["ipam"]["pools"][0]["used"], 7);
        assert_eq!(value["store"]["last_write_seconds_ago"], 5);
    }
}
