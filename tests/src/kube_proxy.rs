//! The netfilter rules kube-proxy writes for a few Services, in each proxy mode that runs on the
//! project kernel, installed into the calling thread's network namespace: what the Services
//! end-to-end tests and the Services benchmark put in front of the datapath when they need real
//! kube-proxy rules. The rules are those of kube-proxy v1.34's first full sync on a node with the
//! default configuration (each mode's file names the source it follows); [`ruleset`] is the text
//! fed to the mode's tool, so tests can compare it. This part owns the model ([`Service`],
//! [`Proxy`]), the per-namespace sysctls both modes share and the dispatch; a mode is its own
//! file, named here only by [`Mode`] and the one dispatch match. Nothing here touches the host:
//! no host-global sysctl (`nf_conntrack_max`, the conntrack `hashsize`), nothing outside the
//! calling thread's namespace.

pub mod iptables;
pub mod nftables;

use std::{
    fmt, fs,
    io::Write as _,
    net::{Ipv4Addr, SocketAddrV4},
    process::{Command, Output, Stdio},
};

use ipnet::Ipv4Net;

/// Which kube-proxy proxier's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// `--proxy-mode=iptables` (kube-proxy's default on Linux).
    Iptables,
    /// `--proxy-mode=nftables`.
    Nftables,
}

impl Mode {
    /// Every mode, for tests that run once per mode.
    pub const ALL: [Mode; 2] = [Mode::Iptables, Mode::Nftables];
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Iptables => "iptables",
            Mode::Nftables => "nftables",
        })
    }
}

/// A Service port's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl Protocol {
    /// The lower-case name kube-proxy puts in matches, hashes and chain names.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One Service port as kube-proxy sees it (a ServicePort + its ready endpoints), with Cluster
/// traffic policies and no external or load-balancer IPs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The port's name; "" for an unnamed port.
    pub port_name: String,
    /// The port's protocol.
    pub protocol: Protocol,
    /// The ClusterIP.
    pub cluster_ip: Ipv4Addr,
    /// The Service port.
    pub port: u16,
    /// The NodePort, for NodePort Services.
    pub node_port: Option<u16>,
    /// sessionAffinity: ClientIP with this timeout (seconds); None = no affinity.
    pub affinity_timeout: Option<u32>,
    /// Ready endpoints (pod IP, targetPort), in kube-proxy's order: it sorts them by their
    /// `ip:port` text, and so do [`ruleset`] and [`apply`] whatever order they come in.
    pub endpoints: Vec<SocketAddrV4>,
}

impl Service {
    /// kube-proxy's `ServicePortName.String()`: `ns/name:port`, or `ns/name` for an unnamed
    /// port; the iptables comments and hashes use it.
    #[must_use]
    pub fn service_port_name(&self) -> String {
        if self.port_name.is_empty() {
            format!("{}/{}", self.namespace, self.name)
        } else {
            format!("{}/{}:{}", self.namespace, self.name, self.port_name)
        }
    }

    /// The endpoints in kube-proxy's order (sorted by their `ip:port` text).
    fn sorted_endpoints(&self) -> Vec<SocketAddrV4> {
        let mut endpoints = self.endpoints.clone();
        endpoints.sort_by_cached_key(ToString::to_string);
        endpoints
    }
}

/// kube-proxy's configuration that shapes the rules (everything else at its default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxy {
    /// `--cluster-cidr` (detect-local-mode ClusterCIDR): pod sources inside it are local.
    pub cluster_cidr: Ipv4Net,
    /// The node's addresses that accept NodePorts: the nftables `nodeport-ips` set (its default
    /// `--nodeport-addresses=primary`; empty = every local address, as with `0.0.0.0/0`). The
    /// iptables mode's default accepts NodePorts on every local address (`addrtype LOCAL`) and
    /// does not use them.
    pub node_ips: Vec<Ipv4Addr>,
}

/// The masquerade mark: `1 << masqueradeBit` (default 14) as kube-proxy formats it (Go's
/// `%#08x` pads the digits, not the `0x`); `iptables-save` and `nft` print it back as `0x4000`
/// and `0x00004000`.
pub const MASQUERADE_MARK: &str = "0x00004000";

/// The conntrack settings kube-proxy's start-up (`setupConntrack`) writes in every mode with the
/// default configuration that belong to the network namespace: established TCP flows live 24 h,
/// CLOSE_WAIT ones 1 h. (`nf_conntrack_max` and `hashsize` are host-wide and left alone.)
const CONNTRACK_SYSCTLS: [(&str, &str); 2] = [
    (
        "net/netfilter/nf_conntrack_tcp_timeout_established",
        "86400",
    ),
    ("net/netfilter/nf_conntrack_tcp_timeout_close_wait", "3600"),
];

/// One kube-proxy mode: the text it feeds its tool, and how it installs and removes it.
trait Proxier: Sync {
    /// The text fed to the mode's tool.
    fn ruleset(&self, proxy: &Proxy, services: &[Service]) -> String;
    /// The mode's own sysctls, then its rules, in the calling thread's namespace.
    fn apply(&self, proxy: &Proxy, services: &[Service]);
    /// Remove what `apply` installed.
    fn remove(&self);
}

/// The proxier of `mode`: the one place that names the modes.
fn proxier(mode: Mode) -> &'static dyn Proxier {
    match mode {
        Mode::Iptables => &iptables::Iptables,
        Mode::Nftables => &nftables::Nftables,
    }
}

/// Install the rules kube-proxy in `mode` writes for `services` in the calling thread's network
/// namespace (child processes inherit the thread's namespace), the way kube-proxy does: iptables
/// mode ensures its jump rules with `iptables -w -C … || iptables -w -I …` and then runs one
/// `iptables-restore -w --noflush --counters` with `*filter` then `*nat`; nftables mode runs one
/// `nft -f -` transaction. Also the sysctls kube-proxy sets in that mode that belong to the
/// namespace: both modes `net.netfilter.nf_conntrack_tcp_timeout_established=86400` and
/// `…_close_wait=3600`; iptables mode `net.ipv4.conf.all.route_localnet=1` (localhost
/// NodePorts). Meant for a namespace without kube-proxy rules (a new one, or after [`remove`]).
/// Panics with the tool's stderr on failure.
pub fn apply(mode: Mode, proxy: &Proxy, services: &[Service]) {
    for (name, value) in CONNTRACK_SYSCTLS {
        write_sysctl(name, value);
    }
    proxier(mode).apply(proxy, services);
}

/// The text [`apply`] feeds the tool: the `iptables-restore` input, or the `nft` script.
#[must_use]
pub fn ruleset(mode: Mode, proxy: &Proxy, services: &[Service]) -> String {
    proxier(mode).ruleset(proxy, services)
}

/// Remove what [`apply`] installed in the calling thread's namespace (kube-proxy's
/// `CleanupLeftovers`: its chains flushed and deleted, or `table ip kube-proxy` deleted). The
/// sysctls keep their values.
pub fn remove(mode: Mode) {
    proxier(mode).remove();
}

/// The base32 text of `input`'s SHA-256, from which kube-proxy's chain names take a prefix.
fn hash_base32(input: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, input.as_bytes());
    data_encoding::BASE32.encode(digest.as_ref())
}

/// Write `value` to `/proc/sys/<name>` as seen from the calling thread's namespace.
fn write_sysctl(name: &str, value: &str) {
    let path = format!("/proc/sys/{name}");
    fs::write(&path, value).unwrap_or_else(|e| panic!("write {value} to {path}: {e}"));
}

/// Read `/proc/sys/<name>` as seen from the calling thread's namespace.
fn read_sysctl(name: &str) -> String {
    let path = format!("/proc/sys/{name}");
    let value = fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    value.trim().to_owned()
}

/// Run `cmd` with `input` on its standard input; panic with its stderr if it fails.
fn run_with_input(cmd: &mut Command, input: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes())
        .unwrap_or_else(|e| panic!("write the input of {cmd:?}: {e}"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstderr: {}\ninput:\n{input}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[cfg(test)]
pub(crate) mod tests {
    //! The model, and one end-to-end check per mode: a client in the node namespace reaches
    //! a listener on the endpoint address through the ClusterIP and the NodePort.

    use std::{
        io::{self, Read as _, Write as _},
        net::{SocketAddr, TcpListener, TcpStream},
        time::Duration,
    };

    use weft_agent::datapath::netns::in_netns;

    use super::*;
    use crate::{NamedNetNs, ThreadNetNs, require_root, run};

    /// The node's address on the link to the backend (also its NodePort address).
    pub(crate) const NODE_IP: Ipv4Addr = Ipv4Addr::new(10, 180, 0, 1);
    /// The endpoint's (pod's) address.
    pub(crate) const ENDPOINT_IP: Ipv4Addr = Ipv4Addr::new(10, 180, 0, 3);

    /// Upstream's reference Service (`TestOverall*Rules` svc3): 172.30.0.43:80, NodePort 3003,
    /// one endpoint 10.180.0.3:80.
    pub(crate) fn svc3() -> Service {
        Service {
            namespace: "ns3".to_owned(),
            name: "svc3".to_owned(),
            port_name: "p80".to_owned(),
            protocol: Protocol::Tcp,
            cluster_ip: Ipv4Addr::new(172, 30, 0, 43),
            port: 80,
            node_port: Some(3003),
            affinity_timeout: None,
            endpoints: vec![SocketAddrV4::new(ENDPOINT_IP, 80)],
        }
    }

    /// Upstream's reference Service with two endpoints (svc4, less its external IP):
    /// 172.30.0.44:80 to 10.180.0.4:80 and 10.180.0.5:80.
    pub(crate) fn svc4() -> Service {
        Service {
            namespace: "ns4".to_owned(),
            name: "svc4".to_owned(),
            cluster_ip: Ipv4Addr::new(172, 30, 0, 44),
            node_port: None,
            endpoints: vec![
                SocketAddrV4::new(Ipv4Addr::new(10, 180, 0, 5), 80),
                SocketAddrV4::new(Ipv4Addr::new(10, 180, 0, 4), 80),
            ],
            ..svc3()
        }
    }

    /// Upstream's reference Service with ClientIP affinity (svc5, less its load balancer):
    /// 172.30.0.45:80, NodePort 3002, 10800 s, one endpoint 10.180.0.3:80.
    pub(crate) fn svc5() -> Service {
        Service {
            namespace: "ns5".to_owned(),
            name: "svc5".to_owned(),
            cluster_ip: Ipv4Addr::new(172, 30, 0, 45),
            node_port: Some(3002),
            affinity_timeout: Some(10800),
            ..svc3()
        }
    }

    /// Upstream's reference Service without endpoints (svc6): 172.30.0.46:80.
    pub(crate) fn svc6() -> Service {
        Service {
            namespace: "ns6".to_owned(),
            name: "svc6".to_owned(),
            cluster_ip: Ipv4Addr::new(172, 30, 0, 46),
            node_port: None,
            endpoints: Vec::new(),
            ..svc3()
        }
    }

    /// Upstream's reference configuration: pods in 10.0.0.0/8, node IP 192.168.0.2.
    pub(crate) fn reference_proxy() -> Proxy {
        Proxy {
            cluster_cidr: "10.0.0.0/8".parse().expect("CIDR"),
            node_ips: vec![Ipv4Addr::new(192, 168, 0, 2)],
        }
    }

    /// A backend namespace joined to the calling thread's (node) namespace by a veth pair:
    /// `NODE_IP` on the node side, `ENDPOINT_IP` on the backend side, ClusterIPs routed to the
    /// link (a node's default route would carry them).
    pub(crate) struct Backend {
        /// The backend's namespace.
        pub(crate) netns: NamedNetNs,
    }

    impl Backend {
        pub(crate) fn new() -> Self {
            let netns = NamedNetNs::new();
            run(Command::new("ip").args([
                "link",
                "add",
                "kpnode",
                "type",
                "veth",
                "peer",
                "name",
                "kpback",
                "netns",
                &netns.name,
            ]));
            run(Command::new("ip").args([
                "addr",
                "add",
                &format!("{NODE_IP}/24"),
                "dev",
                "kpnode",
            ]));
            run(Command::new("ip").args(["link", "set", "kpnode", "up"]));
            run(Command::new("ip").args(["route", "add", "172.30.0.0/16", "dev", "kpnode"]));
            run(netns.command("ip").args([
                "addr",
                "add",
                &format!("{ENDPOINT_IP}/24"),
                "dev",
                "kpback",
            ]));
            run(netns.command("ip").args(["link", "set", "kpback", "up"]));
            run(netns.command("ip").args(["link", "set", "lo", "up"]));
            Self { netns }
        }

        /// A listener on `ENDPOINT_IP:port` in the backend namespace.
        pub(crate) fn listen(&self, port: u16) -> TcpListener {
            in_netns(&self.netns.path(), || {
                TcpListener::bind(SocketAddrV4::new(ENDPOINT_IP, port))
            })
            .expect("enter the backend namespace")
            .expect("bind on the endpoint address")
        }
    }

    /// Connect from the calling thread's namespace to `to`, have `listener` echo four bytes,
    /// and return the address the client saw as its peer and the one the server saw.
    pub(crate) fn round_trip(
        listener: &TcpListener,
        to: SocketAddrV4,
    ) -> io::Result<(SocketAddr, SocketAddr)> {
        let mut client = TcpStream::connect_timeout(&to.into(), Duration::from_secs(2))?;
        client.write_all(b"ping")?;
        let (mut conn, server_saw) = listener.accept()?;
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf)?;
        conn.write_all(&buf)?;
        client.read_exact(&mut buf)?;
        assert_eq!(&buf, b"ping");
        Ok((client.peer_addr()?, server_saw))
    }

    #[test]
    fn modes_print_as_kube_proxy_names_them() {
        let names: Vec<String> = Mode::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["iptables", "nftables"]);
    }

    #[test]
    fn service_port_name_leaves_an_unnamed_port_out() {
        assert_eq!(svc3().service_port_name(), "ns3/svc3:p80");
        let unnamed = Service {
            port_name: String::new(),
            ..svc3()
        };
        assert_eq!(unnamed.service_port_name(), "ns3/svc3");
    }

    #[test]
    fn endpoints_are_sorted_by_their_text_as_kube_proxy_does() {
        let service = Service {
            endpoints: vec![
                "10.180.0.9:80".parse().expect("address"),
                "10.180.0.10:80".parse().expect("address"),
            ],
            ..svc3()
        };
        let sorted: Vec<String> = service
            .sorted_endpoints()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(sorted, ["10.180.0.10:80", "10.180.0.9:80"]);
    }

    #[test]
    fn clusterip_and_nodeport_reach_the_endpoint_in_each_mode() {
        require_root();
        for mode in Mode::ALL {
            let _node = ThreadNetNs::new();
            let backend = Backend::new();
            let listener = backend.listen(80);
            let proxy = Proxy {
                node_ips: vec![NODE_IP],
                ..reference_proxy()
            };
            apply(mode, &proxy, &[svc3(), svc6()]);

            let cluster_ip = SocketAddrV4::new(svc3().cluster_ip, 80);
            let (client_saw, server_saw) = round_trip(&listener, cluster_ip)
                .unwrap_or_else(|e| panic!("{mode}: ClusterIP {cluster_ip}: {e}"));
            assert_eq!(client_saw, cluster_ip.into(), "{mode}: reply not un-DNATed");
            assert_eq!(server_saw.ip(), NODE_IP, "{mode}: pod source masqueraded");

            let node_port = SocketAddrV4::new(NODE_IP, 3003);
            let (client_saw, _) = round_trip(&listener, node_port)
                .unwrap_or_else(|e| panic!("{mode}: NodePort {node_port}: {e}"));
            assert_eq!(client_saw, node_port.into(), "{mode}: reply not un-DNATed");

            let no_endpoints = SocketAddrV4::new(svc6().cluster_ip, 80);
            let refused = TcpStream::connect_timeout(&no_endpoints.into(), Duration::from_secs(2))
                .expect_err("a Service without endpoints accepted a connection");
            assert_eq!(
                refused.kind(),
                io::ErrorKind::ConnectionRefused,
                "{mode}: {no_endpoints} not rejected: {refused}"
            );

            remove(mode);
            assert!(
                TcpStream::connect_timeout(&cluster_ip.into(), Duration::from_secs(1)).is_err(),
                "{mode}: the ClusterIP still answers after remove"
            );
        }
    }
}
