//! The datapath: the only module that talks to aya and rtnetlink. It loads the embedded eBPF
//! object, pins its maps and tc links under a bpffs directory (re-adopting them on restart so
//! forwarding never stops), keeps the endpoints map in step with the pods it wires, and builds
//! the host side of each pod (veth, addresses, routes). It knows nothing about IPAM or
//! Kubernetes: callers hand it addresses and identities.

mod attach;
mod bpffs;
pub mod endpoints;
pub mod ipcache;
mod loader;
pub mod masq;
pub mod nat;
pub mod netdev;
pub mod netlink;
pub mod netns;
mod pod;
pub mod rp_filter;
pub mod stack;
pub mod stats;
pub mod teardown;
mod tunnel;

use std::{io, net::IpAddr, path::PathBuf};

pub use attach::AttachMode;
pub use bpffs::prepare as prepare_pin_dir;
pub use endpoints::{CounterRow, EndpointRow};
pub use ipcache::{IpcacheEntry, IpcacheRow};
pub use loader::{Datapath, DatapathConfig, ELF};
pub use masq::{MasqExclusion, MasqRow, MasqSync};
pub use nat::NatRow;
pub use netdev::{NetdevConfig, NetdevRow};
pub use pod::{
    HOST_IFNAME_PREFIX, PodSpec, PoolIdPerFamily, delete_veth_quietly, host_ifname, is_host_ifname,
};
pub use stats::{DatapathStats, MapStat, ProgramAttachment, read_stats};

/// Default bpffs directory for weft's pinned maps and links.
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/weft";

/// Why a datapath operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DatapathError {
    /// /sys/fs/bpf is not a bpffs and mounting one failed.
    #[error(
        "{path} is not a bpf filesystem and mounting one failed: mount it with \
         `mount -t bpf bpf {path}` (needs CAP_SYS_ADMIN; in a pod, mount the host's /sys/fs/bpf)"
    )]
    BpffsMount {
        /// The mount point.
        path: PathBuf,
        /// The mount error.
        #[source]
        source: nix::Error,
    },
    /// Creating or reading a directory or pin under bpffs failed.
    #[error("cannot use {path}: {source}")]
    Pin {
        /// The path.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: io::Error,
    },
    /// An inspection found no (or not every) weft map pinned where it looked.
    #[error(
        "no weft datapath is pinned in {}: {} missing. Is weft-agent running with --pin-dir {}? \
         (Its maps are created by `weft-agent run`; nothing was created here.)",
        pin_dir.display(), missing.join(", "), pin_dir.display()
    )]
    NotPinned {
        /// The directory looked in.
        pin_dir: PathBuf,
        /// The maps without a pin there.
        missing: Vec<&'static str>,
    },
    /// The process may not write under the bpffs directory.
    #[error(
        "cannot create {path}: permission denied. weft-agent needs root (or CAP_SYS_ADMIN, \
         CAP_BPF and CAP_NET_ADMIN) and a writable bpffs"
    )]
    PinPermission {
        /// The directory.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: io::Error,
    },
    /// The process may not load eBPF programs.
    #[error(
        "loading eBPF needs CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON (or root): run weft-agent \
         as root or grant those capabilities"
    )]
    Privileges {
        /// What the kernel said.
        #[source]
        source: Box<aya::EbpfError>,
    },
    /// The embedded eBPF object could not be parsed (a build problem).
    #[error("the embedded eBPF object is invalid: rebuild weft-agent")]
    Object {
        /// The parse error.
        #[source]
        source: Box<aya_obj::ParseError>,
    },
    /// A pinned map has a different shape than this build expects.
    #[error(
        "pinned map {path} does not match this weft build ({what}: pinned {pinned}, expected \
         {expected}); it was left by a weft with another map layout. Stop the agent, remove the \
         pin (`rm {path}`) and start it again; pods keep their interfaces and are re-added"
    )]
    PinnedMapMismatch {
        /// The pin.
        path: PathBuf,
        /// Which property differs.
        what: &'static str,
        /// The pinned map's value.
        pinned: u32,
        /// The value this build expects.
        expected: u32,
    },
    /// The kernel refused to load the eBPF object.
    #[error("loading the eBPF object failed")]
    Load {
        /// aya's error.
        #[source]
        source: Box<aya::EbpfError>,
    },
    /// A map or program the agent needs is not in the object (ELF contract broken).
    #[error("the eBPF object has no {kind} named {name}: rebuild weft-agent")]
    Missing {
        /// "map" or "program".
        kind: &'static str,
        /// Its name.
        name: &'static str,
    },
    /// A program could not be loaded, attached or re-attached.
    #[error("{action} {program} on {ifname}")]
    Program {
        /// What was attempted.
        action: &'static str,
        /// The program.
        program: &'static str,
        /// The interface ("-" when not interface-specific).
        ifname: String,
        /// aya's error.
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    /// A pinned link could not be opened, converted or pinned.
    #[error("link pin {path}")]
    Link {
        /// The pin.
        path: PathBuf,
        /// aya's error.
        #[source]
        source: Box<aya::programs::links::LinkError>,
    },
    /// Pinning a link failed.
    #[error("pinning link at {path}")]
    PinLink {
        /// The pin.
        path: PathBuf,
        /// aya's error.
        #[source]
        source: Box<aya::pin::PinError>,
    },
    /// A map read or write failed.
    #[error("map {map}: {action}")]
    Map {
        /// The map.
        map: &'static str,
        /// What was attempted.
        action: &'static str,
        /// aya's error.
        #[source]
        source: Box<aya::maps::MapError>,
    },
    /// A test injected a failure (`WEFT_TEST_FAULTS`).
    #[error(transparent)]
    Injected(#[from] crate::faults::Injected),
    /// The pod's interfaces could not be built.
    #[error("wiring pod interface {host_ifname}")]
    Netlink {
        /// The host-side veth.
        host_ifname: String,
        /// The netlink error.
        #[source]
        source: Box<netlink::NetlinkError>,
    },
    /// A native device named on the command line or in the configuration does not exist.
    #[error("no network device named {ifname}")]
    NoDevice {
        /// The name.
        ifname: String,
        /// The lookup error.
        #[source]
        source: nix::Error,
    },
    /// The endpoints map is full.
    #[error("cannot add endpoint {ip}: the endpoints map is full")]
    Full {
        /// The address that did not fit.
        ip: IpAddr,
    },
}
