//! `net.ipv4.conf.<link>.rp_filter` of a cloud interface: Cilium's device configurator turns
//! reverse-path filtering off on each ENI it configures (a pod's replies arrive on the ENI
//! owning its address while the main table would route them elsewhere), and `weft-agent
//! cleanup` puts back the value it found. Touches no other sysctl.

use std::{fs, io, path::PathBuf};

/// A sysctl could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("sysctl {}", path.display())]
pub struct RpFilterError {
    /// The file under `/proc/sys`.
    pub path: PathBuf,
    /// The IO error.
    #[source]
    pub source: io::Error,
}

fn path(ifname: &str) -> PathBuf {
    PathBuf::from(format!("/proc/sys/net/ipv4/conf/{ifname}/rp_filter"))
}

/// The current value of the link's `rp_filter` (`0`, `1` or `2`).
///
/// # Errors
/// The file cannot be read (no such link).
pub fn get(ifname: &str) -> Result<String, RpFilterError> {
    let path = path(ifname);
    fs::read_to_string(&path)
        .map(|v| v.trim().to_owned())
        .map_err(|source| RpFilterError { path, source })
}

/// Set the link's `rp_filter` to `value`.
///
/// # Errors
/// The file cannot be written.
pub fn set(ifname: &str, value: &str) -> Result<(), RpFilterError> {
    let path = path(ifname);
    fs::write(&path, value).map_err(|source| RpFilterError { path, source })
}
