//! Typed access to the IPv4 and IPv6 masquerade mappings (one `LRU_HASH` per family, two
//! entries per flow). The datapath makes and ages them; userspace lists them and, in tests and
//! tools, pre-fills them.

use std::{net::IpAddr, time::Duration};

use agent_common::{
    NatEntry4, NatEntry6, NatTuple4, NatTuple6, maps,
    nat::{
        IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP, NAT_DIR_EGRESS, NAT_F_HOST,
        NAT_F_INBOUND,
    },
};
use aya::maps::{HashMap, MapData};
use serde::Serialize;

use super::{Datapath, DatapathError, endpoints::map_err};

/// One NAT entry, as the CLI prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NatRow {
    /// `tcp`, `udp`, `icmp`, `icmpv6` (or the protocol number).
    pub proto: String,
    /// `egress` (rewrites the source) or `ingress` (rewrites the destination of a reply).
    pub direction: &'static str,
    /// Source address of the tuple.
    pub saddr: IpAddr,
    /// Source port (ICMP: identifier on egress, 0 on ingress).
    pub sport: u16,
    /// Destination address of the tuple.
    pub daddr: IpAddr,
    /// Destination port (ICMP: 0 on egress, identifier on ingress).
    pub dport: u16,
    /// Address written into the packet.
    pub to_addr: IpAddr,
    /// Port (or ICMP identifier) written into the packet.
    pub to_port: u16,
    /// `snat`, `host` (a node socket's reserved port) or `inbound` (flow opened to the pod).
    pub kind: &'static str,
    /// Seconds since the mapping was made.
    pub age_secs: u64,
}

fn proto_name(proto: u8) -> String {
    match proto {
        IPPROTO_TCP => "tcp".into(),
        IPPROTO_UDP => "udp".into(),
        IPPROTO_ICMP => "icmp".into(),
        IPPROTO_ICMPV6 => "icmpv6".into(),
        other => other.to_string(),
    }
}

/// `CLOCK_MONOTONIC` now, the clock of `bpf_ktime_get_ns`.
fn monotonic_now() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_or(Duration::ZERO, Duration::from)
}

impl Datapath {
    fn nat4(&mut self) -> Result<HashMap<&mut MapData, NatTuple4, NatEntry4>, DatapathError> {
        self.hash_map(maps::NAT4)
    }

    /// Write one NAT entry (tests and tools; the datapath makes its own).
    ///
    /// # Errors
    /// The write failed.
    pub fn upsert_nat4(
        &mut self,
        tuple: &NatTuple4,
        entry: &NatEntry4,
    ) -> Result<(), DatapathError> {
        self.hash_insert(maps::NAT4, tuple, entry)
    }

    /// The entry of `tuple`, if any.
    ///
    /// # Errors
    /// The lookup failed for another reason than a miss.
    pub fn nat4_entry(&mut self, tuple: &NatTuple4) -> Result<Option<NatEntry4>, DatapathError> {
        self.hash_get(maps::NAT4, tuple)
    }

    fn nat6(&mut self) -> Result<HashMap<&mut MapData, NatTuple6, NatEntry6>, DatapathError> {
        self.hash_map(maps::NAT6)
    }

    /// Write one IPv6 NAT entry (tests and tools; the datapath makes its own).
    ///
    /// # Errors
    /// The write failed.
    pub fn upsert_nat6(
        &mut self,
        tuple: &NatTuple6,
        entry: &NatEntry6,
    ) -> Result<(), DatapathError> {
        self.hash_insert(maps::NAT6, tuple, entry)
    }

    /// The IPv6 entry of `tuple`, if any.
    ///
    /// # Errors
    /// The lookup failed for another reason than a miss.
    pub fn nat6_entry(&mut self, tuple: &NatTuple6) -> Result<Option<NatEntry6>, DatapathError> {
        self.hash_get(maps::NAT6, tuple)
    }

    /// Every NAT entry of both families, egress first, then by tuple (IPv4 before IPv6).
    ///
    /// # Errors
    /// Iterating a map failed.
    pub fn list_nat(&mut self) -> Result<Vec<NatRow>, DatapathError> {
        let now = monotonic_now();
        let mut rows = Vec::new();
        for entry in &self.nat4()? {
            let (t, e) = entry.map_err(map_err(maps::NAT4, "iterating"))?;
            rows.push(NatRow {
                proto: proto_name(t.nexthdr),
                direction: direction_name(t.flags),
                saddr: t.saddr.into(),
                sport: t.sport,
                daddr: t.daddr.into(),
                dport: t.dport,
                to_addr: e.to_addr.into(),
                to_port: e.to_port,
                kind: kind_name(e.flags),
                age_secs: age_secs(now, e.created),
            });
        }
        for entry in &self.nat6()? {
            let (t, e) = entry.map_err(map_err(maps::NAT6, "iterating"))?;
            rows.push(NatRow {
                proto: proto_name(t.nexthdr),
                direction: direction_name(t.flags),
                saddr: t.saddr.into(),
                sport: t.sport,
                daddr: t.daddr.into(),
                dport: t.dport,
                to_addr: e.to_addr.into(),
                to_port: e.to_port,
                kind: kind_name(e.flags),
                age_secs: age_secs(now, e.created),
            });
        }
        rows.sort_by(|a, b| {
            (a.direction, a.saddr, a.sport, a.daddr, a.dport, &a.proto).cmp(&(
                b.direction,
                b.saddr,
                b.sport,
                b.daddr,
                b.dport,
                &b.proto,
            ))
        });
        Ok(rows)
    }
}

fn kind_name(flags: u16) -> &'static str {
    if flags & NAT_F_HOST != 0 {
        "host"
    } else if flags & NAT_F_INBOUND != 0 {
        "inbound"
    } else {
        "snat"
    }
}

fn direction_name(flags: u8) -> &'static str {
    if flags == NAT_DIR_EGRESS {
        "egress"
    } else {
        "ingress"
    }
}

/// Seconds between `created` (`bpf_ktime_get_ns`) and `now`.
fn age_secs(now: Duration, created: u64) -> u64 {
    now.saturating_sub(Duration::from_nanos(created)).as_secs()
}
