//! Taking the datapath off a node for good (`weft-agent cleanup`): the host-side veths
//! ([`is_host_ifname`]; their pod ends and routes go with them), the tunnel device (its
//! routes go with it), weft's netlink tc filters on
//! every interface (the [`HOOKS`] programs, by name) and the `clsact` qdisc of an interface
//! where they were the last filters, then every pin under the pin directory: unpinning a TCX
//! link whose last reference is the pin detaches its program, unpinning a map frees it.
//!
//! Runs in the calling thread's network namespace, without loading the eBPF object (loading
//! would re-attach). Must not touch an interface, filter or qdisc that is not weft's, and is
//! idempotent: a second run finds nothing.

use std::{
    fmt, fs, io,
    path::{Path, PathBuf},
};

use aya::programs::{
    TcAttachType,
    tc::{self, TcError},
};
use futures::TryStreamExt as _;
use rtnetlink::{Handle, packet_route::tc::TcHandle};

use super::{
    attach::HOOKS,
    netlink::{self, NetlinkError},
    pod::is_host_ifname,
};

/// Why taking the datapath off the node failed.
#[derive(Debug, thiserror::Error)]
pub enum TeardownError {
    /// The node's interfaces cannot be listed.
    #[error("cannot list the network interfaces (if_nameindex): is /sys mounted?")]
    Interfaces {
        /// The error.
        #[source]
        source: nix::Error,
    },
    /// A host-side veth cannot be deleted.
    #[error(
        "cannot delete weft's veth {ifname}: run as root (CAP_NET_ADMIN) in the host's network namespace"
    )]
    Veth {
        /// The veth.
        ifname: String,
        /// The netlink error.
        #[source]
        source: Box<NetlinkError>,
    },
    /// The tunnel device cannot be deleted.
    #[error(
        "cannot delete weft's tunnel device: run as root (CAP_NET_ADMIN) in the host's network namespace"
    )]
    Tunnel {
        /// The netlink error.
        #[source]
        source: Box<NetlinkError>,
    },
    /// A netlink tc filter of weft's cannot be removed.
    #[error("cannot remove the tc filter {program} from {ifname}: run as root (CAP_NET_ADMIN)")]
    Filter {
        /// The program (the filter's name).
        program: &'static str,
        /// The interface.
        ifname: String,
        /// aya's error.
        #[source]
        source: Box<TcError>,
    },
    /// Opening an rtnetlink socket failed.
    #[error("cannot open an rtnetlink socket: check the open file limit and CAP_NET_ADMIN")]
    Connect {
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The filters left on an interface cannot be listed, or its `clsact` qdisc removed.
    #[error("cannot {action} on {ifname}: run as root (CAP_NET_ADMIN)")]
    Qdisc {
        /// What was attempted.
        action: &'static str,
        /// The interface.
        ifname: String,
        /// The netlink error.
        #[source]
        source: Box<rtnetlink::Error>,
    },
    /// A pin (or a directory of pins) cannot be read or removed.
    #[error("cannot remove {}: the pin directory must be on a writable bpffs (mount the host's /sys/fs/bpf read-write)", path.display())]
    Pin {
        /// The pin or directory.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: io::Error,
    },
}

/// One thing removed from the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removed {
    /// What it was (`veth`, `tc filter`, `clsact qdisc`, `pin`, `file`, ...).
    pub what: &'static str,
    /// Which one (a name, a path).
    pub name: String,
}

impl fmt::Display for Removed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "removed {}: {}", self.what, self.name)
    }
}

/// Remove weft's veths, tunnel device, tc filters (and `clsact` qdiscs left empty) and every pin under
/// `pin_dir` (and the directory); what was removed, in that order.
///
/// # Errors
/// A removal failed; what came before it is removed, and a second run carries on.
pub async fn teardown(pin_dir: &Path) -> Result<Vec<Removed>, TeardownError> {
    let mut removed = Vec::new();
    remove_veths(&mut removed).await?;
    remove_tunnel(&mut removed).await?;
    remove_tc(&mut removed).await?;
    remove_pin_dir(pin_dir, &mut removed)?;
    Ok(removed)
}

/// Delete weft's host-side veths (their pod ends and routes go with them), adding each to
/// `removed` as it goes.
///
/// # Errors
/// The interfaces cannot be listed, or a veth cannot be deleted (those before it are).
pub async fn remove_veths(removed: &mut Vec<Removed>) -> Result<(), TeardownError> {
    for ifname in interfaces()? {
        if !is_host_ifname(&ifname) {
            continue;
        }
        let deleted =
            netlink::delete_pod_iface(&ifname)
                .await
                .map_err(|source| TeardownError::Veth {
                    ifname: ifname.clone(),
                    source: Box::new(source),
                })?;
        if deleted {
            removed.push(Removed {
                what: "veth",
                name: ifname,
            });
        }
    }
    Ok(())
}

/// Delete weft's tunnel device (the routes through it go with it), adding it to `removed`.
///
/// # Errors
/// The device is there but cannot be deleted.
pub async fn remove_tunnel(removed: &mut Vec<Removed>) -> Result<(), TeardownError> {
    let gone = netlink::tunnel::remove_all()
        .await
        .map_err(|source| TeardownError::Tunnel {
            source: Box::new(source),
        })?;
    removed.extend(gone.into_iter().map(|name| Removed {
        what: "tunnel device",
        name: name.to_owned(),
    }));
    Ok(())
}

/// Remove weft's netlink tc filters from every interface, and the `clsact` qdiscs they were
/// the last filters of, adding each to `removed` as it goes.
///
/// # Errors
/// The interfaces cannot be listed, rtnetlink cannot be reached, or a filter or qdisc cannot
/// be removed (those before it are).
pub async fn remove_tc(removed: &mut Vec<Removed>) -> Result<(), TeardownError> {
    let handle = connect()?;
    for ifname in interfaces()? {
        remove_filters(&handle, &ifname, removed).await?;
    }
    Ok(())
}

/// Remove every pin under `pin_dir` (unpinning a TCX link whose last reference is the pin
/// detaches its program), then the directory, adding each to `removed` as it goes. Absent:
/// nothing to do.
///
/// # Errors
/// A pin or directory cannot be read or removed (those before it are).
pub fn remove_pin_dir(pin_dir: &Path, removed: &mut Vec<Removed>) -> Result<(), TeardownError> {
    remove_pins(pin_dir, removed)
}

/// The names of the interfaces in this network namespace.
fn interfaces() -> Result<Vec<String>, TeardownError> {
    let list =
        nix::net::if_::if_nameindex().map_err(|source| TeardownError::Interfaces { source })?;
    Ok(list
        .iter()
        .map(|i| i.name().to_string_lossy().into_owned())
        .collect())
}

fn connect() -> Result<Handle, TeardownError> {
    let (conn, handle, _) =
        rtnetlink::new_connection().map_err(|source| TeardownError::Connect { source })?;
    tokio::spawn(conn);
    Ok(handle)
}

/// Remove weft's netlink filters from `ifname`, then its `clsact` qdisc if no filter is left.
async fn remove_filters(
    handle: &Handle,
    ifname: &str,
    removed: &mut Vec<Removed>,
) -> Result<(), TeardownError> {
    let mut ours = false;
    for hook in HOOKS {
        match tc::qdisc_detach_program(ifname, hook.attach_type, hook.program) {
            Ok(()) => {
                ours = true;
                let direction = match hook.attach_type {
                    TcAttachType::Ingress => "ingress",
                    _ => "egress",
                };
                removed.push(Removed {
                    what: "tc filter",
                    name: format!("{} on {ifname} {direction}", hook.program),
                });
            }
            // None of ours there, or the interface went away meanwhile.
            Err(TcError::IoError(e))
                if matches!(e.kind(), io::ErrorKind::NotFound)
                    || e.raw_os_error() == Some(libc::ENODEV) => {}
            Err(source) => {
                return Err(TeardownError::Filter {
                    program: hook.program,
                    ifname: ifname.to_owned(),
                    source: Box::new(source),
                });
            }
        }
    }
    if !ours {
        return Ok(());
    }
    let Ok(ifindex) = nix::net::if_::if_nametoindex(ifname) else {
        return Ok(());
    };
    let ifindex = i32::try_from(ifindex).unwrap_or(i32::MAX);
    let qdisc_error = |action, source| TeardownError::Qdisc {
        action,
        ifname: ifname.to_owned(),
        source: Box::new(source),
    };
    for ingress in [true, false] {
        let request = handle.traffic_filter(ifindex).get();
        let request = if ingress {
            request.ingress()
        } else {
            request.egress()
        };
        let left = request
            .execute()
            .try_next()
            .await
            .map_err(|e| qdisc_error("list the tc filters", e))?;
        if left.is_some() {
            // Someone else's filters: their qdisc stays.
            return Ok(());
        }
    }
    let mut request = handle.qdisc().del(ifindex);
    request.message_mut().header.parent = TcHandle::CLSACT;
    request.message_mut().header.handle = TcHandle {
        major: 0xffff,
        minor: 0,
    };
    request
        .execute()
        .await
        .map_err(|e| qdisc_error("delete the clsact qdisc", e))?;
    removed.push(Removed {
        what: "clsact qdisc",
        name: ifname.to_owned(),
    });
    Ok(())
}

/// Remove everything under `dir` (links first: `links/` sorts before the map names), then
/// `dir`. Absent: nothing to do.
fn remove_pins(dir: &Path, removed: &mut Vec<Removed>) -> Result<(), TeardownError> {
    let pin_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TeardownError::Pin { path, source }
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(pin_error(dir)(e)),
    };
    let mut paths = entries
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(pin_error(dir))?;
    paths.sort();
    for path in paths {
        if path.is_dir() {
            remove_pins(&path, removed)?;
        } else {
            fs::remove_file(&path).map_err(pin_error(&path))?;
            removed.push(Removed {
                what: "pin",
                name: path.display().to_string(),
            });
        }
    }
    fs::remove_dir(dir).map_err(pin_error(dir))?;
    removed.push(Removed {
        what: "pin directory",
        name: dir.display().to_string(),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::host_ifname;
    use super::is_host_ifname;

    #[test]
    fn only_weft_s_veth_names_are_weft_s() {
        assert!(is_host_ifname(&host_ifname("0123abcd", "eth0")));
        for other in [
            "eth0",
            "lxc0123456789ab",
            "wft0123",
            "wft0123456789abc",
            "wft0123456789AB",
        ] {
            assert!(!is_host_ifname(other), "{other}");
        }
    }
}
