//! An "external host" behind the node: a named namespace joined to the calling thread's node
//! namespace by a veth pair (`wnode` on the node side with the node IPs, `wext` on the external
//! side), IPv4 and IPv6 forwarding on inside the node namespace only, and TCP/UDP echo servers
//! that report the peer address they saw — what masquerading tests look at. Both ends carry an
//! IPv6 address of a documentation prefix, added without duplicate address detection (and DAD
//! off on the two devices) so nothing waits for it.

use std::{
    io::{Read as _, Write as _},
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket},
    path::Path,
    process::Command,
    thread,
    time::Duration,
};

use weft_agent::datapath::{NetdevConfig, netns::in_netns};

use crate::{NamedNetNs, Node, report, run};

/// Node-side device of the external link.
pub const NODE_DEV: &str = "wnode";
/// External-side device.
pub const EXT_DEV: &str = "wext";
/// The node's address on the external link (what masqueraded traffic comes from).
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(44, 77, 0, 2);
/// The external host's address.
pub const EXT_IP: Ipv4Addr = Ipv4Addr::new(44, 77, 0, 1);
/// The node's IPv6 address on the external link.
pub const NODE_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x44, 0, 0, 0, 0, 2);
/// The external host's IPv6 address.
pub const EXT_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x44, 0, 0, 0, 0, 1);

/// The external host.
#[derive(Debug)]
pub struct External {
    /// Its namespace.
    pub netns: NamedNetNs,
}

impl External {
    /// Build the link from the calling thread's (node) namespace; the external host routes
    /// each of `pod_cidrs` (IPv4 or IPv6) back via the node, so unmasqueraded pod traffic can
    /// be answered.
    #[must_use]
    pub fn new(pod_cidrs: &[&str]) -> Self {
        let netns = NamedNetNs::new();
        run(Command::new("ip").args([
            "link",
            "add",
            NODE_DEV,
            "type",
            "veth",
            "peer",
            "name",
            EXT_DEV,
            "netns",
            &netns.name,
        ]));
        run(Command::new("sysctl").args(["-qw", &format!("net.ipv6.conf.{NODE_DEV}.accept_dad=0")]));
        run(netns
            .command("sysctl")
            .args(["-qw", &format!("net.ipv6.conf.{EXT_DEV}.accept_dad=0")]));
        for cidr in [format!("{NODE_IP}/24"), format!("{NODE_IP6}/64")] {
            run(Command::new("ip").args(["addr", "add", &cidr, "dev", NODE_DEV, "nodad"]));
        }
        run(Command::new("ip").args(["link", "set", NODE_DEV, "up"]));
        for cidr in [format!("{EXT_IP}/24"), format!("{EXT_IP6}/64")] {
            run(netns
                .command("ip")
                .args(["addr", "add", &cidr, "dev", EXT_DEV, "nodad"]));
        }
        run(netns.command("ip").args(["link", "set", EXT_DEV, "up"]));
        run(netns.command("ip").args(["link", "set", "lo", "up"]));
        for cidr in pod_cidrs {
            let via = if cidr.contains(':') {
                NODE_IP6.to_string()
            } else {
                NODE_IP.to_string()
            };
            run(netns
                .command("ip")
                .args(["route", "add", cidr, "via", &via]));
        }
        run(Command::new("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
        run(Command::new("sysctl").args(["-qw", "net.ipv6.conf.all.forwarding=1"]));
        Self { netns }
    }

    /// As [`External::new`], with the datapath of the calling thread's `node` on the node side:
    /// `to_netdev`/`from_netdev` on [`NODE_DEV`] masquerading IPv4 to [`NODE_IP`], the IPCache's
    /// world entries, and [`NODE_IP`] as the node's host address.
    #[must_use]
    pub fn masquerading(node: &mut Node, pod_cidrs: &[&str]) -> Self {
        let ext = Self::new(pod_cidrs);
        let dp = &mut node.datapath;
        let config = NetdevConfig {
            masq_v4: Some(NODE_IP),
            masq_v6: None,
        };
        dp.attach_netdev(NODE_DEV, &config)
            .unwrap_or_else(|e| panic!("attach to_netdev/from_netdev: {}", report(&e)));
        dp.ensure_world_ipcache()
            .unwrap_or_else(|e| panic!("world entries: {}", report(&e)));
        dp.sync_host_ips(&[IpAddr::V4(NODE_IP)])
            .unwrap_or_else(|e| panic!("host addresses: {}", report(&e)));
        ext
    }

    /// Accept one TCP connection on `EXT_IP:port` and echo everything until the client closes;
    /// the thread returns the peer address and the bytes echoed.
    #[must_use]
    pub fn tcp_echo_server(&self, port: u16) -> thread::JoinHandle<(IpAddr, usize)> {
        let addr = SocketAddr::new(IpAddr::V4(EXT_IP), port);
        let listener = in_netns(&self.netns.path(), || TcpListener::bind(addr))
            .expect("enter external netns")
            .expect("bind on the external host");
        thread::spawn(move || {
            let (mut conn, peer) = listener.accept().expect("accept");
            let mut total = 0;
            let mut buf = [0u8; 4096];
            loop {
                let n = conn.read(&mut buf).expect("read");
                if n == 0 {
                    return (peer.ip(), total);
                }
                conn.write_all(&buf[..n]).expect("echo");
                total += n;
            }
        })
    }

    /// Answer UDP datagrams on `EXT_IP:port` (echo to the sender) until `count` arrived or
    /// the line is quiet for 3 s; the thread returns every sender address seen, in order.
    #[must_use]
    pub fn udp_echo_server(&self, port: u16, count: usize) -> thread::JoinHandle<Vec<SocketAddr>> {
        self.udp_echo_server_on(SocketAddr::new(IpAddr::V4(EXT_IP), port), count)
    }

    /// As [`External::udp_echo_server`], on `addr` (`EXT_IP` or `EXT_IP6`).
    #[must_use]
    pub fn udp_echo_server_on(
        &self,
        addr: SocketAddr,
        count: usize,
    ) -> thread::JoinHandle<Vec<SocketAddr>> {
        let socket = in_netns(&self.netns.path(), || UdpSocket::bind(addr))
            .expect("enter external netns")
            .expect("bind UDP on the external host");
        socket
            .set_read_timeout(Some(Duration::from_secs(3)))
            .expect("timeout");
        // Room for a whole burst: the default buffer holds a few hundred small datagrams.
        nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::RcvBufForce, &(8 << 20))
            .expect("SO_RCVBUFFORCE");
        thread::spawn(move || {
            let mut senders = Vec::new();
            let mut buf = [0u8; 64];
            while senders.len() < count {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    break;
                };
                socket.send_to(&buf[..n], from).expect("echo");
                senders.push(from);
            }
            senders
        })
    }

    /// Accept one TCP connection on `EXT_IP:port`, made from inside the namespace file
    /// `client_netns`; echo a greeting and return the peer address the server saw.
    #[must_use]
    pub fn tcp_peer(&self, client_netns: &Path, port: u16) -> IpAddr {
        self.tcp_peer_on(client_netns, SocketAddr::new(IpAddr::V4(EXT_IP), port))
    }

    /// As [`External::tcp_peer`], on `addr` (`EXT_IP` or `EXT_IP6`).
    #[must_use]
    pub fn tcp_peer_on(&self, client_netns: &Path, addr: SocketAddr) -> IpAddr {
        let listener = in_netns(&self.netns.path(), || TcpListener::bind(addr))
            .expect("enter external netns")
            .expect("bind on the external host");
        let server = thread::spawn(move || {
            let (mut conn, peer) = listener.accept().expect("accept");
            let mut buf = [0u8; 5];
            conn.read_exact(&mut buf).expect("read");
            conn.write_all(&buf).expect("echo");
            peer.ip()
        });
        let mut client = in_netns(client_netns, || {
            TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        })
        .expect("enter client netns")
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        client.write_all(b"hello").expect("send");
        let mut echoed = [0u8; 5];
        client.read_exact(&mut echoed).expect("echo back");
        assert_eq!(&echoed, b"hello");
        server.join().expect("server")
    }
}
