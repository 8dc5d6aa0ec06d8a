//! Tests that cross nodes: a second [`Node`] living on its own thread (a node's namespace is per
//! thread), driven by closures sent to that thread, and joined to the calling thread's node by
//! a veth pair (`wn1` here with [`NODE1_IP`], `wn2` there with [`NODE2_IP`]) that carries
//! `to_netdev`/`from_netdev` on both ends, as a node's native device does. Each node routes the
//! other's pods via the other's address (what `auto-direct-node-routes` writes), and both
//! forward IPv4. Also small TCP and UDP servers inside pods that answer with a name, so a
//! client can tell which backend a Service sent it to and from which address the answer came.

use std::{
    io::{Read as _, Write as _},
    net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket},
    panic::{AssertUnwindSafe, catch_unwind, resume_unwind},
    path::Path,
    process::Command,
    sync::mpsc,
    thread,
    time::Duration,
};

use weft_agent::datapath::{NetdevConfig, netns::in_netns};

use crate::{Node, run};

/// The calling thread's end of the node link.
pub const LINK1: &str = "wn1";
/// The second node's end of the node link.
pub const LINK2: &str = "wn2";
/// The calling thread's node address on the node link.
pub const NODE1_IP: Ipv4Addr = Ipv4Addr::new(192, 168, 77, 1);
/// The second node's address on the node link.
pub const NODE2_IP: Ipv4Addr = Ipv4Addr::new(192, 168, 77, 2);

type Job = Box<dyn FnOnce(&mut Node) + Send>;

/// A node on its own thread.
#[derive(Debug)]
pub struct RemoteNode {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<thread::JoinHandle<()>>,
    tid: i32,
}

impl RemoteNode {
    /// Start the thread, load a datapath in a fresh namespace there, forward IPv4.
    #[must_use]
    pub fn start() -> Self {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::channel();
        let thread = thread::spawn(move || {
            let mut node = Node::new();
            run(Command::new("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
            ready.send(nix::unistd::gettid().as_raw()).expect("report");
            for job in inbox {
                job(&mut node);
            }
        });
        let tid = started
            .recv()
            .unwrap_or_else(|_| panic!("the second node's thread died while starting"));
        Self {
            jobs: Some(jobs),
            thread: Some(thread),
            tid,
        }
    }

    /// Run `job` on the node's thread (in its namespace) and return what it returned; a panic
    /// there is raised here with its message.
    pub fn run<T: Send + 'static>(&self, job: impl FnOnce(&mut Node) -> T + Send + 'static) -> T {
        let (done, result) = mpsc::channel();
        let job: Job = Box::new(move |node| {
            let _ = done.send(catch_unwind(AssertUnwindSafe(|| job(node))));
        });
        self.jobs
            .as_ref()
            .expect("running")
            .send(job)
            .unwrap_or_else(|_| panic!("the second node's thread is gone"));
        match result.recv() {
            Ok(Ok(value)) => value,
            Ok(Err(panic)) => resume_unwind(panic),
            Err(mpsc::RecvError) => panic!("the second node's thread died running a job"),
        }
    }
}

impl Drop for RemoteNode {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Join the calling thread's node to `remote` with the node link, attach the native-device
/// programs (no masquerading) on both ends, and route each side's `pods` via the other node.
pub fn link(node: &mut Node, remote: &RemoteNode, pods1: &[Ipv4Addr], pods2: &[Ipv4Addr]) {
    let tid = remote.tid.to_string();
    run(Command::new("ip").args([
        "link", "add", LINK1, "type", "veth", "peer", "name", LINK2, "netns", &tid,
    ]));
    run(Command::new("ip").args(["addr", "add", &format!("{NODE1_IP}/24"), "dev", LINK1]));
    run(Command::new("ip").args(["link", "set", LINK1, "up"]));
    run(Command::new("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
    node.datapath
        .attach_netdev(LINK1, &NetdevConfig::default())
        .expect("attach the node link (node 1)");
    for pod in pods2 {
        route(&pod.to_string(), NODE2_IP);
    }
    let pods1 = pods1.to_vec();
    remote.run(move |node| {
        run(Command::new("ip").args(["addr", "add", &format!("{NODE2_IP}/24"), "dev", LINK2]));
        run(Command::new("ip").args(["link", "set", LINK2, "up"]));
        node.datapath
            .attach_netdev(LINK2, &NetdevConfig::default())
            .expect("attach the node link (node 2)");
        node.datapath
            .sync_host_ips(&[IpAddr::V4(NODE2_IP)])
            .expect("host ips (node 2)");
        for pod in pods1 {
            route(&pod.to_string(), NODE1_IP);
        }
    });
}

fn route(pod: &str, via: Ipv4Addr) {
    run(Command::new("ip").args([
        "route",
        "add",
        &format!("{pod}/32"),
        "via",
        &via.to_string(),
    ]));
}

/// Serve TCP on `addr` inside the namespace file `netns`: each connection gets `name` and is
/// closed after the client's first bytes arrived. Runs until the process ends.
pub fn tcp_name_server(netns: &Path, addr: SocketAddr, name: &'static str) {
    let listener = in_netns(netns, || TcpListener::bind(addr))
        .expect("enter the pod's netns")
        .unwrap_or_else(|e| panic!("bind {addr} in {}: {e}", netns.display()));
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 16];
            if conn.read(&mut buf).is_ok() {
                let _ = conn.write_all(name.as_bytes());
            }
        }
    });
}

/// Serve UDP on `addr` inside the namespace file `netns`: each datagram is answered with
/// `name`. Runs until the process ends.
pub fn udp_name_server(netns: &Path, addr: SocketAddr, name: &'static str) {
    let socket = in_netns(netns, || UdpSocket::bind(addr))
        .expect("enter the pod's netns")
        .unwrap_or_else(|e| panic!("bind UDP {addr} in {}: {e}", netns.display()));
    thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((_, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(name.as_bytes(), from);
        }
    });
}
