//! Command line of `weft-agent` (clap derive; the doc comments are the `--help`). Every input a
//! `DaemonSet` sets also reads an environment variable.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::PathBuf,
};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::datapath::{AttachMode, DEFAULT_PIN_DIR};

/// weft node agent: Cilium-compatible IPAM and an eBPF datapath for pods.
#[derive(Debug, Parser)]
#[command(name = "weft-agent", version)]
pub struct Cli {
    /// bpffs directory for weft's pinned maps and tc links.
    #[arg(long, env = "WEFT_PIN_DIR", default_value = DEFAULT_PIN_DIR, global = true)]
    pub pin_dir: PathBuf,
    /// How to attach tc programs: TCX links (kernel 6.6+), legacy netlink filters, or auto.
    #[arg(long, env = "WEFT_ATTACH_MODE", value_enum, default_value_t = AttachArg::Auto, global = true)]
    pub attach_mode: AttachArg,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `--attach-mode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AttachArg {
    /// TCX where the kernel has it, netlink tc otherwise.
    Auto,
    /// TCX links.
    Tcx,
    /// Netlink tc filters on a clsact qdisc.
    Netlink,
}

impl From<AttachArg> for AttachMode {
    fn from(arg: AttachArg) -> Self {
        match arg {
            AttachArg::Auto => Self::Auto,
            AttachArg::Tcx => Self::Tcx,
            AttachArg::Netlink => Self::Netlink,
        }
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load the datapath (adopting pinned maps and links) and keep it until SIGTERM/SIGINT.
    Run,
    /// Wire or unwire a pod's network by hand (what the CNI plugin will ask the agent to do).
    #[command(subcommand)]
    Pod(PodCommand),
    /// Inspect the eBPF maps.
    #[command(subcommand)]
    Bpf(BpfCommand),
}

/// `weft-agent pod ...`
#[derive(Debug, Subcommand)]
pub enum PodCommand {
    /// Create the pod's veth pair, addresses and routes, attach `from_container`, add endpoints.
    Add(PodAdd),
    /// Remove everything `pod add` created for a container (no-op if unknown).
    Del {
        /// Container (sandbox) id.
        #[arg(long)]
        id: String,
        /// Interface name inside the pod.
        #[arg(long, default_value = "eth0")]
        ifname: String,
    },
}

/// Arguments of `weft-agent pod add`.
#[derive(Debug, Args)]
pub struct PodAdd {
    /// Container (sandbox) id; names the host-side veth (`wft<hash>`).
    #[arg(long)]
    pub id: String,
    /// The pod's network namespace file, e.g. /var/run/netns/pod1 or /proc/<pid>/ns/net.
    #[arg(long)]
    pub netns: PathBuf,
    /// Pod address; repeat for dual stack.
    #[arg(long = "ip", required = true)]
    pub ips: Vec<IpAddr>,
    /// Interface name inside the pod.
    #[arg(long, default_value = "eth0")]
    pub ifname: String,
    /// IPv4 gateway (the node's router IP); required when an IPv4 address is given.
    #[arg(long)]
    pub gateway_v4: Option<Ipv4Addr>,
    /// IPv6 gateway (the node's router IP); required when an IPv6 address is given.
    #[arg(long)]
    pub gateway_v6: Option<Ipv6Addr>,
    /// Security identity to record for the pod.
    #[arg(long, default_value_t = agent_common::identity::INIT)]
    pub identity: u32,
    /// Id of the IP pool the addresses came from.
    #[arg(long, default_value_t = 0)]
    pub pool_id: u32,
    /// MTU of the veth pair.
    #[arg(long)]
    pub mtu: Option<u32>,
}

/// `weft-agent bpf ...`
#[derive(Debug, Subcommand)]
pub enum BpfCommand {
    /// The endpoints map.
    #[command(subcommand)]
    Endpoint(EndpointCommand),
    /// Datapath counters by reason, summed over CPUs.
    Counters {
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

/// `weft-agent bpf endpoint ...`
#[derive(Debug, Subcommand)]
pub enum EndpointCommand {
    /// Print every endpoint.
    List {
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

/// Output format of inspection commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned columns for people.
    Table,
    /// JSON for scripts.
    Json,
}
