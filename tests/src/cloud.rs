//! A cloud in network namespaces, for the node side of the cloud IPAM modes: a "VPC" namespace
//! that routes between the node's cloud interfaces (veth pairs from the calling thread's node
//! namespace, one per ENI or NIC, with the MAC the CiliumNode names) and a "VPC host" behind
//! it, and that enforces the source/destination check as AWS does: an IPv4 packet whose source
//! is not an address of the interface it arrived on is dropped and counted (nftables, counter
//! `drops`). The VPC knows where each interface's addresses are (static neighbours), as the
//! cloud's own fabric does; the node still has to send each packet out of the right interface.

use std::{
    net::{IpAddr, Ipv4Addr},
    process::Command,
};

use ipnet::Ipv4Net;

use crate::{NamedNetNs, run};

/// The VPC host's address (inside the VPC CIDR [`VPC_CIDR`]).
pub const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 6, 9, 9);
/// The VPC's CIDR.
pub const VPC_CIDR: &str = "10.6.0.0/16";
/// The MTU of the VPC (the primary interface's, so the device MTU the agent takes).
pub const VPC_MTU: u32 = 9001;

/// The VPC and its host.
#[derive(Debug)]
pub struct Vpc {
    /// The router enforcing the source/destination check.
    pub router: NamedNetNs,
    /// The host pods talk to.
    pub host: NamedNetNs,
    attached: u32,
}

/// One interface of the node in the VPC.
#[derive(Clone, Debug)]
pub struct Nic {
    /// Its name in the node namespace.
    pub ifname: String,
    /// Its MAC.
    pub mac: String,
    /// Its subnet.
    pub subnet: Ipv4Net,
    /// The subnet's gateway (its first address, the VPC router's).
    pub gateway: Ipv4Addr,
}

impl Vpc {
    /// The router and host namespaces, joined; the check's table with no interface yet.
    #[must_use]
    pub fn new() -> Self {
        let router = NamedNetNs::new();
        let host = NamedNetNs::new();
        run(router.command("ip").args([
            "link", "add", "vh", "type", "veth", "peer", "name", "h0", "netns", &host.name,
        ]));
        run(router
            .command("ip")
            .args(["addr", "add", "10.6.9.1/24", "dev", "vh"]));
        run(router.command("ip").args(["link", "set", "vh", "up"]));
        run(router.command("ip").args(["link", "set", "lo", "up"]));
        run(router
            .command("sysctl")
            .args(["-qw", "net.ipv4.ip_forward=1"]));
        run(host
            .command("ip")
            .args(["addr", "add", &format!("{HOST_IP}/24"), "dev", "h0"]));
        run(host.command("ip").args(["link", "set", "h0", "up"]));
        run(host.command("ip").args(["link", "set", "lo", "up"]));
        run(host
            .command("ip")
            .args(["route", "add", "default", "via", "10.6.9.1"]));
        run(router.command("nft").args([
            "add table ip srcdst; add counter ip srcdst drops; \
             add chain ip srcdst check { type filter hook prerouting priority -300; policy accept; }",
        ]));
        Self {
            router,
            host,
            attached: 0,
        }
    }

    /// Attach a node interface `ifname` (created in the calling thread's namespace, down, with
    /// `mac` and MTU `mtu`) in `subnet`; `addresses` are the interface's (its primary and
    /// secondaries): only they may leave through it.
    pub fn attach(
        &mut self,
        ifname: &str,
        mac: &str,
        subnet: &str,
        addresses: &[&str],
        mtu: u32,
    ) -> Nic {
        let subnet: Ipv4Net = subnet.parse().expect("subnet");
        let gateway = Ipv4Addr::from(u32::from(subnet.network()) + 1);
        let peer = format!("v{}", self.attached);
        self.attached += 1;
        let mtu = mtu.to_string();
        run(Command::new("ip").args([
            "link",
            "add",
            ifname,
            "address",
            mac,
            "mtu",
            &mtu,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
            "mtu",
            "9001",
            "netns",
            &self.router.name,
        ]));
        let r = &self.router;
        run(r.command("ip").args([
            "addr",
            "add",
            &format!("{gateway}/{}", subnet.prefix_len()),
            "dev",
            &peer,
        ]));
        run(r.command("ip").args(["link", "set", &peer, "up"]));
        let set = format!("a_{peer}");
        run(r.command("nft").args([&format!(
            "add set ip srcdst {set} {{ type ipv4_addr; }}; \
             add rule ip srcdst check iifname \"{peer}\" ip saddr != @{set} counter name \"drops\" drop"
        )]));
        let nic = Nic {
            ifname: ifname.to_owned(),
            mac: mac.to_owned(),
            subnet,
            gateway,
        };
        self.assign(&nic, &peer, addresses);
        nic
    }

    /// The cloud assigns `addresses` to the interface attached as `peer`: they may leave
    /// through it, and the VPC delivers them to its MAC.
    fn assign(&self, nic: &Nic, peer: &str, addresses: &[&str]) {
        for address in addresses {
            run(self
                .router
                .command("nft")
                .args([&format!("add element ip srcdst a_{peer} {{ {address} }}")]));
            run(self.router.command("ip").args([
                "neigh",
                "replace",
                address,
                "lladdr",
                &nic.mac,
                "dev",
                peer,
                "nud",
                "permanent",
            ]));
        }
    }

    /// Packets the source/destination check dropped so far.
    #[must_use]
    pub fn drops(&self) -> u64 {
        let out = run(self
            .router
            .command("nft")
            .args(["-j", "list", "counter", "ip", "srcdst", "drops"]));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("nft -j");
        v["nftables"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|o| o["counter"]["packets"].as_u64())
            .expect("the drops counter")
    }

    /// Whether the VPC host answers a ping from the VPC router (the VPC itself works).
    #[must_use]
    pub fn host_reachable(&self) -> bool {
        self.router
            .command("ping")
            .args(["-c", "1", "-W", "1", &HOST_IP.to_string()])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Default for Vpc {
    fn default() -> Self {
        Self::new()
    }
}

/// The node namespace's part a cloud image does at boot: the primary interface `nic` up with
/// `address` and the default route through its gateway; forwarding on (the node routes pods).
pub fn boot_primary(nic: &Nic, address: &str) {
    run(Command::new("ip").args([
        "addr",
        "add",
        &format!("{address}/{}", nic.subnet.prefix_len()),
        "dev",
        &nic.ifname,
    ]));
    run(Command::new("ip").args(["link", "set", &nic.ifname, "up"]));
    run(Command::new("ip").args(["route", "add", "default", "via", &nic.gateway.to_string()]));
    run(Command::new("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
}

/// `ip -j <args>` in the calling thread's namespace, parsed.
#[must_use]
pub fn ip_json(args: &[&str]) -> serde_json::Value {
    let out = run(Command::new("ip").arg("-j").args(args));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("ip -j {args:?}: {e}"))
}

/// The node's rules that name `ip` (as `from` or `to`), as `ip rule` prints them.
#[must_use]
pub fn rules_of(ip: IpAddr) -> Vec<String> {
    let out = run(Command::new("ip").args(["rule", "show"]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .any(|w| w == ip.to_string() || w == format!("{ip}/32"))
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// The routes of table `table`, as `ip route` prints them.
#[must_use]
pub fn table(table: u32) -> Vec<String> {
    let out = Command::new("ip")
        .args(["route", "show", "table", &table.to_string()])
        .output()
        .expect("ip route");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}
