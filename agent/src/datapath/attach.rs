//! tc attachment of weft's programs: `from_container` on host-side veths (ingress),
//! `to_netdev` / `from_netdev` on native devices (egress / ingress), `from_overlay` on the
//! tunnel device (ingress). One code path serves every [`Hook`].
//!
//! TCX (kernel 6.6+): links pinned at `<pin_dir>/links/<program>/<ifname>`. A pinned link
//! keeps the program attached while no agent runs; on start every pinned link is switched to the
//! newly loaded program with an atomic `bpf_link_update`, so forwarding never pauses. Links whose
//! interface is gone are unpinned.
//!
//! Which one a hook uses: [`AttachMode`] (`auto`: netlink tc on pod veths, whose attach is on
//! every pod's start-up path; TCX on native devices where the kernel has it).
//!
//! Netlink tc (pod veths, older kernels, or forced): a `clsact` qdisc and a direct-action
//! filter at priority 1, handle 1, named after the program, as Cilium's legacy attach does. Filters live
//! in the kernel without the agent; on start the agent replaces the filter on every interface
//! its maps list (interfaces map for veths, native-devices map for devices, tunnel map for the
//! tunnel device) with the new
//! program (an atomic netlink replace).

use std::{fs, io, path::PathBuf};

use agent_common::maps;
use aya::programs::{
    LinkOrder, SchedClassifier, TcAttachType,
    links::{FdLink, LinkError, PinnedLink},
    tc::{self, NlOptions, SchedClassifierLink, TcAttachOptions, TcError, TcHandle},
};
use tracing::{debug, info};

use super::{Datapath, DatapathError, bpffs};

/// A program and the tc hook it runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hook {
    /// Program name in the object (also the netlink filter name and the links subdirectory).
    pub program: &'static str,
    /// Ingress or egress.
    pub attach_type: TcAttachType,
}

/// `from_container` on tc ingress of host-side veths.
pub(super) const FROM_CONTAINER: Hook = Hook {
    program: maps::PROG_FROM_CONTAINER,
    attach_type: TcAttachType::Ingress,
};
/// `to_netdev` on tc egress of native devices.
pub(super) const TO_NETDEV: Hook = Hook {
    program: maps::PROG_TO_NETDEV,
    attach_type: TcAttachType::Egress,
};
/// `from_netdev` on tc ingress of native devices.
pub(super) const FROM_NETDEV: Hook = Hook {
    program: maps::PROG_FROM_NETDEV,
    attach_type: TcAttachType::Ingress,
};
/// `from_overlay` on tc ingress of the tunnel device.
pub(super) const FROM_OVERLAY: Hook = Hook {
    program: maps::PROG_FROM_OVERLAY,
    attach_type: TcAttachType::Ingress,
};
/// Every hook, in the order links are re-adopted on start.
pub(super) const HOOKS: [Hook; 4] = [FROM_CONTAINER, TO_NETDEV, FROM_NETDEV, FROM_OVERLAY];
/// Netlink filter priority and handle (Cilium's defaults).
const NL_PRIORITY: u16 = 1;
const NL_HANDLE: TcHandle = TcHandle::new(0, 1);

/// How weft's programs are attached to interfaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttachMode {
    /// Netlink tc on pod veths; on native devices TCX where the kernel has it (6.6+), netlink
    /// tc otherwise. A TCX attach waits for an RCU grace period in the kernel, which is most of
    /// a pod's start-up (`cargo xtask bench ipam`: ADD p50 19.8 ms with TCX, 5.2 ms with
    /// netlink tc); a native device is attached once.
    #[default]
    Auto,
    /// TCX links, pinned.
    Tcx,
    /// Legacy netlink tc filters on a clsact qdisc.
    Netlink,
}

impl AttachMode {
    /// `Auto` decided for the running kernel's native devices.
    #[must_use]
    pub fn resolve(self) -> Self {
        match self {
            Self::Auto
                if aya::util::KernelVersion::current()
                    .is_ok_and(|v| v >= aya::util::KernelVersion::new(6, 6, 0)) =>
            {
                Self::Tcx
            }
            Self::Auto => Self::Netlink,
            mode => mode,
        }
    }

    /// How `hook`'s program is attached under this configured mode (see [`AttachMode::Auto`]).
    pub(super) fn for_hook(self, hook: Hook) -> Self {
        match self {
            Self::Auto if hook == FROM_CONTAINER => Self::Netlink,
            mode => mode.resolve(),
        }
    }

    /// The mode of pod veths (`from_container`).
    #[must_use]
    pub fn of_pods(self) -> Self {
        self.for_hook(FROM_CONTAINER)
    }

    /// The mode of native devices (`to_netdev`, `from_netdev`).
    #[must_use]
    pub fn of_devices(self) -> Self {
        self.for_hook(TO_NETDEV)
    }

    /// `tcx` or `netlink`, or both with where each is used.
    #[must_use]
    pub fn describe(self) -> String {
        let word = |mode: Self| {
            if mode == Self::Netlink {
                "netlink"
            } else {
                "tcx"
            }
        };
        let (pods, devices) = (word(self.of_pods()), word(self.of_devices()));
        if pods == devices {
            pods.to_owned()
        } else {
            format!("{pods} (pod veths), {devices} (native devices)")
        }
    }
}

impl Datapath {
    fn links_dir(&self, hook: Hook) -> PathBuf {
        self.pin_dir.join("links").join(hook.program)
    }

    /// Attach `from_container` to tc ingress of `ifname` (idempotent).
    ///
    /// # Errors
    /// The interface does not exist, or the kernel refused the attachment.
    pub fn attach_from_container(&mut self, ifname: &str) -> Result<(), DatapathError> {
        self.attach_hook(FROM_CONTAINER, ifname)
    }

    /// Detach `from_container` from `ifname` (unpin its TCX link, or delete its netlink
    /// filter). Unknown interface: no-op.
    ///
    /// # Errors
    /// The pin or filter exists but cannot be removed.
    pub fn detach_from_container(&mut self, ifname: &str) -> Result<bool, DatapathError> {
        self.detach_hook(FROM_CONTAINER, ifname)
    }

    /// Interfaces that have a pinned `from_container` TCX link (empty in netlink mode, where
    /// the interfaces map is the record).
    ///
    /// # Errors
    /// The links directory cannot be read.
    pub fn attached_interfaces(&self) -> Result<Vec<String>, DatapathError> {
        self.attached(FROM_CONTAINER)
    }

    /// Attach `hook`'s program to `ifname` (idempotent).
    pub(super) fn attach_hook(&mut self, hook: Hook, ifname: &str) -> Result<(), DatapathError> {
        if self.attach_mode.for_hook(hook) == AttachMode::Netlink {
            let program = self.classifier(hook.program)?;
            attach_netlink(program, hook, ifname)?;
            info!(ifname, program = hook.program, "attached (netlink tc)");
            return Ok(());
        }
        let dir = self.links_dir(hook);
        bpffs::create_dir(&dir)?;
        let path = dir.join(ifname);
        let program = self.classifier(hook.program)?;
        if path.exists() {
            // Our own link already; make sure it runs this program.
            return readopt(program, hook, &path, ifname).map(|_| ());
        }
        let id = attach_tcx(program, hook, ifname)?;
        pin_link(program, hook, id, &path, ifname)?;
        info!(ifname, program = hook.program, "attached");
        Ok(())
    }

    /// Detach `hook`'s program from `ifname`; `Ok(false)` if it was not attached.
    pub(super) fn detach_hook(&mut self, hook: Hook, ifname: &str) -> Result<bool, DatapathError> {
        if self.attach_mode.for_hook(hook) == AttachMode::Netlink {
            return match tc::qdisc_detach_program(ifname, hook.attach_type, hook.program) {
                Ok(()) => Ok(true),
                // No filter, or no interface any more (the filter went with it).
                Err(TcError::IoError(e))
                    if e.kind() == io::ErrorKind::NotFound
                        || e.raw_os_error() == Some(libc::ENODEV) =>
                {
                    Ok(false)
                }
                Err(source) => Err(program_error(hook, "detaching", ifname, source.into())),
            };
        }
        let path = self.links_dir(hook).join(ifname);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(DatapathError::Pin { path, source }),
        }
    }

    /// Interfaces with a pinned TCX link of `hook` (empty in netlink mode).
    pub(super) fn attached(&self, hook: Hook) -> Result<Vec<String>, DatapathError> {
        let dir = self.links_dir(hook);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(DatapathError::Pin { path: dir, source }),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| DatapathError::Pin {
                path: dir.clone(),
                source,
            })?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
}

/// Switch every attachment to the freshly loaded programs; forget those whose device is gone.
pub(super) fn adopt_links(datapath: &mut Datapath) -> Result<(), DatapathError> {
    for hook in HOOKS {
        adopt_hook(datapath, hook)?;
    }
    Ok(())
}

fn adopt_hook(datapath: &mut Datapath, hook: Hook) -> Result<(), DatapathError> {
    if datapath.attach_mode.for_hook(hook) == AttachMode::Netlink {
        let ifindexes = if hook == FROM_CONTAINER {
            datapath.iface_indexes()?
        } else if hook == FROM_OVERLAY {
            datapath.tunnel_ifindex()?.into_iter().collect()
        } else {
            datapath.netdev_indexes()?
        };
        for ifindex in ifindexes {
            let ifname = nix::net::if_::if_indextoname(ifindex)
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default();
            if ifname.is_empty() {
                info!(ifindex, "interface gone; nothing to re-attach");
                continue;
            }
            let program = datapath.classifier(hook.program)?;
            match attach_netlink(program, hook, &ifname) {
                Ok(()) => {}
                // Gone since it was looked up (a pod deleted meanwhile).
                Err(_) if nix::net::if_::if_nametoindex(ifname.as_str()).is_err() => {
                    info!(ifname, "interface gone; nothing to re-attach");
                }
                Err(error) => return Err(error),
            }
        }
        return convert_links(datapath, hook);
    }
    let dir = datapath.links_dir(hook);
    for ifname in datapath.attached(hook)? {
        let path = dir.join(&ifname);
        let program = datapath.classifier(hook.program)?;
        if !readopt(program, hook, &path, &ifname)? {
            info!(
                ifname,
                program = hook.program,
                "interface gone; removed its link pin"
            );
            fs::remove_file(&path).map_err(|source| DatapathError::Pin { path, source })?;
        }
    }
    Ok(())
}

/// TCX links a previous agent pinned in TCX mode, now that `hook` is attached by netlink tc:
/// a TCX program runs before any tc filter, so the old program would keep deciding. Each
/// interface gets the filter first, then its link pin goes (which detaches the link): no
/// moment without the program.
fn convert_links(datapath: &mut Datapath, hook: Hook) -> Result<(), DatapathError> {
    let dir = datapath.links_dir(hook);
    for ifname in datapath.attached(hook)? {
        let path = dir.join(&ifname);
        if nix::net::if_::if_nametoindex(ifname.as_str()).is_ok() {
            let program = datapath.classifier(hook.program)?;
            attach_netlink(program, hook, &ifname)?;
            info!(
                ifname,
                program = hook.program,
                "TCX link replaced by a netlink tc filter"
            );
        }
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(DatapathError::Pin { path, source }),
        }
    }
    Ok(())
}

/// Attach `program` to `ifname` by a new TCX link. A link of the same program whose last
/// reference just went (its pin removed) is released by the kernel a moment later, from a work
/// queue: until then the attach is refused with EEXIST, so it is retried for up to a second.
fn attach_tcx(
    program: &mut SchedClassifier,
    hook: Hook,
    ifname: &str,
) -> Result<tc::SchedClassifierLinkId, DatapathError> {
    const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
    let started = std::time::Instant::now();
    loop {
        let attached = program.attach_with_options(
            ifname,
            hook.attach_type,
            TcAttachOptions::TcxOrder(LinkOrder::default()),
        );
        match attached {
            Err(aya::programs::ProgramError::SyscallError(e))
                if e.io_error.raw_os_error() == Some(libc::EEXIST)
                    && started.elapsed() < RELEASE_WAIT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => {
                return other.map_err(|source| program_error(hook, "attaching", ifname, source));
            }
        }
    }
}

/// Point the pinned link at `program`. `Ok(false)`: the link is defunct (interface deleted).
fn readopt(
    program: &mut SchedClassifier,
    hook: Hook,
    path: &PathBuf,
    ifname: &str,
) -> Result<bool, DatapathError> {
    let pinned = PinnedLink::from_pin(path).map_err(|source| DatapathError::Link {
        path: path.clone(),
        source: Box::new(source),
    })?;
    let link = SchedClassifierLink::try_from(FdLink::from(pinned)).map_err(|source| {
        DatapathError::Link {
            path: path.clone(),
            source: Box::new(source),
        }
    })?;
    match program.attach_to_link(link) {
        Ok(id) => {
            // The pin keeps the link; drop our handle without detaching.
            let link = program
                .take_link(id)
                .map_err(|source| program_error(hook, "taking the link of", ifname, source))?;
            drop(
                FdLink::try_from(link).map_err(|source: LinkError| DatapathError::Link {
                    path: path.clone(),
                    source: Box::new(source),
                })?,
            );
            debug!(ifname, "re-adopted link");
            Ok(true)
        }
        Err(aya::programs::ProgramError::SyscallError(e))
            if e.io_error.raw_os_error() == Some(libc::ENOLINK) =>
        {
            Ok(false)
        }
        Err(source) => Err(program_error(hook, "re-attaching", ifname, source)),
    }
}

/// Attach (or atomically replace) our netlink filter on `ifname` and leave it in the kernel.
fn attach_netlink(
    program: &mut SchedClassifier,
    hook: Hook,
    ifname: &str,
) -> Result<(), DatapathError> {
    match tc::qdisc_add_clsact(ifname) {
        Ok(()) => {}
        Err(TcError::NetlinkError(e)) if e.raw_os_error() == Some(libc::EEXIST) => {}
        Err(source) => {
            return Err(program_error(
                hook,
                "adding clsact for",
                ifname,
                source.into(),
            ));
        }
    }
    // Replace our filter if a previous agent left it; create it otherwise.
    let replaced =
        SchedClassifierLink::attached(ifname, hook.attach_type, NL_PRIORITY, NL_HANDLE, None)
            .ok()
            .and_then(|link| program.attach_to_link(link).ok());
    let id = match replaced {
        Some(id) => id,
        None => program
            .attach_with_options(
                ifname,
                hook.attach_type,
                TcAttachOptions::Netlink(NlOptions {
                    priority: NL_PRIORITY,
                    handle: NL_HANDLE,
                    classid: None,
                }),
            )
            .map_err(|source| program_error(hook, "attaching", ifname, source))?,
    };
    let link = program
        .take_link(id)
        .map_err(|source| program_error(hook, "taking the link of", ifname, source))?;
    // The filter must outlive this process: never run the link's detach-on-drop.
    std::mem::forget(link);
    Ok(())
}

fn pin_link(
    program: &mut SchedClassifier,
    hook: Hook,
    id: tc::SchedClassifierLinkId,
    path: &PathBuf,
    ifname: &str,
) -> Result<(), DatapathError> {
    let link = program
        .take_link(id)
        .map_err(|source| program_error(hook, "taking the link of", ifname, source))?;
    let fd_link = FdLink::try_from(link).map_err(|source| DatapathError::Link {
        path: path.clone(),
        source: Box::new(source),
    })?;
    fd_link.pin(path).map_err(|source| DatapathError::PinLink {
        path: path.clone(),
        source: Box::new(source),
    })?;
    Ok(())
}

fn program_error(
    hook: Hook,
    action: &'static str,
    ifname: &str,
    source: aya::programs::ProgramError,
) -> DatapathError {
    DatapathError::Program {
        action,
        program: hook.program,
        ifname: ifname.into(),
        source: Box::new(source),
    }
}
