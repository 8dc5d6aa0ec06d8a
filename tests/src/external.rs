//! An "external host" behind the node: a named namespace joined to the calling thread's node
//! namespace by a veth pair (`wnode` on the node side with the node IP, `wext` on the external
//! side), IPv4 forwarding on inside the node namespace only, and a TCP echo server that
//! reports the peer address it saw — what masquerading tests look at.

use std::{
    io::{Read as _, Write as _},
    net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket},
    path::Path,
    process::Command,
    thread,
    time::Duration,
};

use weft_agent::datapath::netns::in_netns;

use crate::{NamedNetNs, run};

/// Node-side device of the external link.
pub const NODE_DEV: &str = "wnode";
/// External-side device.
pub const EXT_DEV: &str = "wext";
/// The node's address on the external link (what masqueraded traffic comes from).
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(44, 77, 0, 2);
/// The external host's address.
pub const EXT_IP: Ipv4Addr = Ipv4Addr::new(44, 77, 0, 1);

/// The external host.
#[derive(Debug)]
pub struct External {
    /// Its namespace.
    pub netns: NamedNetNs,
}

impl External {
    /// Build the link from the calling thread's (node) namespace; the external host routes
    /// each of `pod_cidrs` back via the node, so unmasqueraded pod traffic can be answered.
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
        let node_cidr = format!("{NODE_IP}/24");
        run(Command::new("ip").args(["addr", "add", &node_cidr, "dev", NODE_DEV]));
        run(Command::new("ip").args(["link", "set", NODE_DEV, "up"]));
        let ext_cidr = format!("{EXT_IP}/24");
        let node_ip = NODE_IP.to_string();
        run(netns
            .command("ip")
            .args(["addr", "add", &ext_cidr, "dev", EXT_DEV]));
        run(netns.command("ip").args(["link", "set", EXT_DEV, "up"]));
        run(netns.command("ip").args(["link", "set", "lo", "up"]));
        for cidr in pod_cidrs {
            run(netns
                .command("ip")
                .args(["route", "add", cidr, "via", &node_ip]));
        }
        run(Command::new("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
        Self { netns }
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
        let addr = SocketAddr::new(IpAddr::V4(EXT_IP), port);
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
        let addr = SocketAddr::new(IpAddr::V4(EXT_IP), port);
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
