//! Command line of `weft-agent` (clap derive; the doc comments are the `--help`). Every input a
//! `DaemonSet` sets also reads an environment variable.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::PathBuf,
};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::datapath::{AttachMode, DEFAULT_PIN_DIR};

mod config_args;

pub use config_args::ConfigArgs;

/// The directory under Cilium's `--bpf-root` that weft pins in.
pub const PIN_DIR_NAME: &str = "weft";

/// The agent's state directory unless `--state-dir` says otherwise.
pub const DEFAULT_STATE_DIR: &str = "/var/run/weft";
/// Where container runtimes look for CNI plugins by default.
pub const DEFAULT_CNI_BIN_DIR: &str = "/opt/cni/bin";
/// Where container runtimes read network configurations by default.
pub const DEFAULT_CNI_CONF_DIR: &str = "/etc/cni/net.d";

/// weft node agent: Cilium-compatible IPAM and an eBPF datapath for pods.
#[derive(Debug, Parser)]
#[command(name = "weft-agent", version)]
pub struct Cli {
    /// bpffs directory for weft's pinned maps and tc links.
    #[arg(long, env = "WEFT_PIN_DIR", default_value = DEFAULT_PIN_DIR, global = true)]
    pub pin_dir: PathBuf,
    /// Cilium's flag: the bpffs mount; weft then pins in its `weft` directory (the same as
    /// `--pin-dir BPF_ROOT/weft`).
    #[arg(long, global = true, conflicts_with = "pin_dir")]
    pub bpf_root: Option<PathBuf>,
    /// How to attach tc programs: TCX links (kernel 6.6+), legacy netlink filters, or auto
    /// (netlink filters on pod veths, TCX on native devices where the kernel has it).
    #[arg(long, env = "WEFT_ATTACH_MODE", value_enum, default_value_t = AttachArg::Auto, global = true)]
    pub attach_mode: AttachArg,
    /// `--debug`, `--log-level`, `--log-format` (Cilium's; the keys of the same names).
    #[command(flatten)]
    pub log: weft_k8s::telemetry::LogArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The datapath flags (global, so they are taken before or after the subcommand) and the
/// subcommands that use them; every other subcommand's help leaves them out.
const DATAPATH_FLAGS: [(&str, &[&str]); 3] = [
    ("pin_dir", &["run", "pod", "bpf", "cleanup"]),
    ("bpf_root", &["run", "pod", "bpf", "cleanup"]),
    ("attach_mode", &["run", "pod"]),
];

/// The command line definition, each subcommand showing only the flags it uses.
#[must_use]
pub fn command() -> clap::Command {
    let mut command = <Cli as clap::CommandFactory>::command();
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for (flag, users) in DATAPATH_FLAGS {
        let Some(arg) = command
            .get_arguments()
            .find(|a| a.get_id() == flag)
            .cloned()
        else {
            continue;
        };
        // A subcommand that already holds a global flag does not get it propagated: give
        // those that do not use it a hidden copy (still parsed, for their own subcommands too).
        for name in names.iter().filter(|n| !users.contains(&n.as_str())) {
            let hidden = arg.clone().hide(true);
            command = command.mut_subcommand(name, |sub| sub.arg(hidden));
        }
    }
    command
}

/// Parse the process's arguments with [`command`] (exits with clap's message on an error, as
/// `Parser::parse` does).
#[must_use]
pub fn parse() -> Cli {
    let matches = command().get_matches();
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

impl Cli {
    /// The pin directory: `--pin-dir`, or `weft` under Cilium's `--bpf-root`.
    #[must_use]
    pub fn pin_dir(&self) -> PathBuf {
        self.bpf_root
            .as_ref()
            .map_or_else(|| self.pin_dir.clone(), |root| root.join(PIN_DIR_NAME))
    }
}

/// Why the command line cannot be used (what clap cannot check).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Neither `--node-name`, `NODE_NAME` nor `K8S_NODE_NAME` gives the node's name.
    #[error(
        "no node name: pass --node-name, or set NODE_NAME (or Cilium's K8S_NODE_NAME) to this \
         node's name (a DaemonSet sets it from spec.nodeName)"
    )]
    NoNodeName,
}

/// The node's name: `--node-name` (or `NODE_NAME`), else Cilium's `K8S_NODE_NAME`.
///
/// # Errors
/// None of them is set (or they are empty).
pub fn node_name(given: Option<String>) -> Result<String, CliError> {
    node_name_from(given, std::env::var(K8S_NODE_NAME).ok())
}

/// [`node_name`] with `K8S_NODE_NAME`'s value given.
///
/// # Errors
/// Both are unset or empty.
pub fn node_name_from(given: Option<String>, k8s: Option<String>) -> Result<String, CliError> {
    given
        .into_iter()
        .chain(k8s)
        .find(|name| !name.is_empty())
        .ok_or(CliError::NoNodeName)
}

/// Cilium's environment variable for the node's name.
pub const K8S_NODE_NAME: &str = "K8S_NODE_NAME";

/// `--attach-mode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AttachArg {
    /// Netlink tc on pod veths (a TCX attach waits for an RCU grace period on every pod's
    /// start-up); TCX on native devices where the kernel has it.
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
    /// Run the agent: IPAM on the store, the datapath, and the CNI socket, until SIGTERM.
    Run(RunArgs),
    /// IPAM tools: plan allocations offline, or ask a running agent why a pod got its pool.
    #[command(subcommand)]
    Ipam(IpamCommand),
    /// Wire or unwire a pod's network by hand (what the CNI plugin will ask the agent to do).
    #[command(subcommand)]
    Pod(PodCommand),
    /// Inspect the eBPF maps.
    #[command(subcommand)]
    Bpf(BpfCommand),
    /// The CNI plugin on the host: install it (the DaemonSet's init container does).
    #[command(subcommand)]
    Cni(CniCommand),
    /// Remove everything weft put on this node, for uninstall: weft's veths, tc filters and
    /// pins (maps and TCX links; unpinning detaches the programs), the state directory, the
    /// socket, the DEL queue, `05-weft.conflist` and `weft-cni`. Refuses while an agent serves
    /// on the socket; a second run has nothing to do.
    Cleanup(CleanupArgs),
    /// Ask the running agent how it is (like `cilium-dbg status`): IPAM, datapath, store,
    /// problems. Exits 1 when it is unhealthy or not running.
    Status {
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// The agent's socket.
        #[arg(long, env = "WEFT_SOCK", default_value = crate::cni::proto::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
}

/// Arguments of `weft-agent run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// This node's name (the CiliumNode to use); without it, Cilium's `K8S_NODE_NAME`.
    #[arg(long, env = "NODE_NAME")]
    pub node_name: Option<String>,
    /// Single-host store directory (`<plural>/[<namespace>/]<name>.yaml` documents) instead of
    /// the Kubernetes API.
    #[arg(long, env = "WEFT_STORE")]
    pub store: Option<PathBuf>,
    /// Kubeconfig for the Kubernetes API (default: KUBECONFIG, ~/.kube/config, or the
    /// in-cluster service account).
    #[arg(
        long,
        env = "KUBECONFIG",
        conflicts_with = "store",
        visible_alias = "k8s-kubeconfig-path"
    )]
    pub kubeconfig: Option<PathBuf>,
    /// Serve `/healthz`, `/readyz` and `/metrics` here (port 0: any free port, logged);
    /// --prometheus-serve-addr adds a listener, this one keeps serving.
    #[arg(long, env = "WEFT_HEALTH_ADDR", default_value = crate::metrics::DEFAULT_HEALTH_ADDR)]
    pub health_addr: std::net::SocketAddr,
    /// Serve Prometheus `/metrics` on this address too (Cilium's flag and key; `:9962` means
    /// every interface; the flag wins over the key). Neither: `/metrics` is served on
    /// --health-addr only.
    #[arg(long, env = "WEFT_PROMETHEUS_SERVE_ADDR", value_parser = parse_listen_addr)]
    pub prometheus_serve_addr: Option<std::net::SocketAddr>,
    /// The metric names `/metrics` serves: `weft` (`weft_…`) or `cilium` (Cilium's names,
    /// types and labels where the meaning is the same, so Cilium's dashboards work; weft's
    /// names for the rest).
    #[arg(long, env = "WEFT_METRICS_NAMING", default_value = "weft")]
    pub metrics_naming: crate::metrics::Naming,
    /// Agent state: endpoint records and router addresses.
    #[arg(long, env = "WEFT_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// Unix socket for `weft-cni` (root-only).
    #[arg(
        long,
        env = "WEFT_SOCK",
        default_value = crate::cni::proto::DEFAULT_SOCKET,
        visible_alias = "socket-path"
    )]
    pub socket: PathBuf,
    /// Where `weft-cni` queues DELs while the agent is down.
    #[arg(long, default_value = crate::cni::proto::DEFAULT_DELETE_QUEUE)]
    pub delete_queue_dir: PathBuf,
    /// Run although cilium-config asks for features weft does not have (`enable-wireguard`,
    /// `enable-policy`, …): each is logged as a warning instead of stopping the agent.
    #[arg(long, env = "WEFT_ALLOW_UNSUPPORTED_FEATURES")]
    pub allow_unsupported_features: bool,
    /// Configuration keys (cilium-config).
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// A listen address that is neither `host:port` nor `:port`.
#[derive(Debug, thiserror::Error)]
#[error("{text:?} is not host:port or :port")]
pub struct ListenAddrError {
    /// The text given.
    text: String,
    /// Why it does not parse.
    #[source]
    source: std::net::AddrParseError,
}

/// A listen address: `host:port`, or Cilium's `:port` for every interface.
///
/// # Errors
/// Neither form parses.
pub fn parse_listen_addr(text: &str) -> Result<std::net::SocketAddr, ListenAddrError> {
    let full = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_owned()
    };
    full.parse().map_err(|source| ListenAddrError {
        text: text.to_owned(),
        source,
    })
}

/// `weft-agent ipam ...`
#[derive(Debug, Subcommand)]
pub enum IpamCommand {
    /// Allocate for every pod in the store, offline, and print the plan as JSON.
    Simulate {
        /// Embedded store directory.
        #[arg(long)]
        store: PathBuf,
        /// The node to plan for; without it, Cilium's `K8S_NODE_NAME`.
        #[arg(long, env = "NODE_NAME")]
        node_name: Option<String>,
        /// A running agent's state directory: plan on top of its endpoint records and router
        /// addresses (they keep their addresses).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Configuration keys.
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Ask the running agent which pool `NAMESPACE/POD` gets and which rule chose it.
    Explain {
        /// `namespace/pod`.
        pod: String,
        /// The agent's socket.
        #[arg(long, env = "WEFT_SOCK", default_value = crate::cni::proto::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
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
    /// The IPCache: prefix → security identity.
    #[command(subcommand)]
    Ipcache(ListCommand),
    /// Masquerade exclusions per pool (`*` = every pool).
    #[command(subcommand)]
    Masq(ListCommand),
    /// IPv4 masquerade mappings (two per flow).
    #[command(subcommand)]
    Nat(ListCommand),
    /// Native devices where pod traffic is masqueraded.
    #[command(subcommand)]
    Netdev(ListCommand),
}

/// `weft-agent bpf <map> ...`
#[derive(Debug, Subcommand)]
pub enum ListCommand {
    /// Print every entry.
    List {
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

/// `weft-agent cni ...`
#[derive(Debug, Subcommand)]
pub enum CniCommand {
    /// Copy `weft-cni` into the CNI binary directory and write `05-weft.conflist`, each
    /// atomically and only when it differs.
    Install(InstallArgs),
}

/// Arguments of `weft-agent cni install`.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The plugin binary to install (default: `weft-cni` beside the running `weft-agent`).
    #[arg(long, env = "WEFT_CNI_BIN_SRC")]
    pub bin_src: Option<PathBuf>,
    /// Where the container runtime looks for CNI plugins.
    #[arg(long, env = "WEFT_CNI_BIN_DIR", default_value = DEFAULT_CNI_BIN_DIR)]
    pub bin_dir: PathBuf,
    /// Where the container runtime reads network configurations.
    #[arg(long, env = "WEFT_CNI_CONF_DIR", default_value = DEFAULT_CNI_CONF_DIR)]
    pub conf_dir: PathBuf,
}

/// Arguments of `weft-agent cleanup` (`--pin-dir` is global): the agent's and `cni install`'s
/// flags, with their defaults.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// The agent's state directory (endpoint records, router addresses).
    #[arg(long, env = "WEFT_STATE_DIR", default_value = DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// The agent's socket.
    #[arg(
        long,
        env = "WEFT_SOCK",
        default_value = crate::cni::proto::DEFAULT_SOCKET,
        visible_alias = "socket-path"
    )]
    pub socket: PathBuf,
    /// Where `weft-cni` queues DELs while the agent is down.
    #[arg(long, default_value = crate::cni::proto::DEFAULT_DELETE_QUEUE)]
    pub delete_queue_dir: PathBuf,
    /// The CNI binary directory `weft-cni` was installed into.
    #[arg(long, env = "WEFT_CNI_BIN_DIR", default_value = DEFAULT_CNI_BIN_DIR)]
    pub bin_dir: PathBuf,
    /// The CNI configuration directory `05-weft.conflist` was written into.
    #[arg(long, env = "WEFT_CNI_CONF_DIR", default_value = DEFAULT_CNI_CONF_DIR)]
    pub conf_dir: PathBuf,
}

#[cfg(test)]
mod tests;
