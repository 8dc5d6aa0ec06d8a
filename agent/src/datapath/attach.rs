//! tc attachment of `from_container` to host-side veths, through TCX links pinned at
//! `<pin_dir>/links/from_container/<ifname>`. A pinned link keeps the program attached while
//! no agent runs; on start every pinned link is switched to the newly loaded program with an
//! atomic `bpf_link_update`, so forwarding never pauses. Links whose interface is gone are
//! unpinned.

use std::{fs, io, path::PathBuf};

use agent_common::maps;
use aya::programs::{
    LinkOrder, SchedClassifier, TcAttachType,
    links::{FdLink, LinkError, PinnedLink},
    tc::{SchedClassifierLink, TcAttachOptions},
};
use tracing::{debug, info};

use super::{Datapath, DatapathError, bpffs};

const PROGRAM: &str = maps::PROG_FROM_CONTAINER;

impl Datapath {
    fn links_dir(&self) -> PathBuf {
        self.pin_dir.join("links").join(PROGRAM)
    }

    /// Attach `from_container` to tc ingress of `ifname` (idempotent).
    ///
    /// # Errors
    /// The interface does not exist, or the kernel refused the attachment.
    pub fn attach_from_container(&mut self, ifname: &str) -> Result<(), DatapathError> {
        let dir = self.links_dir();
        bpffs::create_dir(&dir)?;
        let path = dir.join(ifname);
        let program = self.classifier(PROGRAM)?;
        if path.exists() {
            // Our own link already; make sure it runs this program.
            return readopt(program, &path, ifname).map(|_| ());
        }
        let id = program
            .attach_with_options(
                ifname,
                TcAttachType::Ingress,
                TcAttachOptions::TcxOrder(LinkOrder::default()),
            )
            .map_err(|source| program_error("attaching", ifname, source))?;
        pin_link(program, id, &path, ifname)?;
        info!(ifname, "attached from_container");
        Ok(())
    }

    /// Detach `from_container` from `ifname` by unpinning its link. Unknown interface: no-op.
    ///
    /// # Errors
    /// The pin exists but cannot be removed.
    pub fn detach_from_container(&mut self, ifname: &str) -> Result<bool, DatapathError> {
        let path = self.links_dir().join(ifname);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(DatapathError::Pin { path, source }),
        }
    }

    /// Interfaces that have a pinned `from_container` link.
    ///
    /// # Errors
    /// The links directory cannot be read.
    pub fn attached_interfaces(&self) -> Result<Vec<String>, DatapathError> {
        let dir = self.links_dir();
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

/// Switch every pinned link to the freshly loaded program; unpin links whose device is gone.
pub(super) fn adopt_links(datapath: &mut Datapath) -> Result<(), DatapathError> {
    let dir = datapath.links_dir();
    for ifname in datapath.attached_interfaces()? {
        let path = dir.join(&ifname);
        let program = datapath.classifier(PROGRAM)?;
        if !readopt(program, &path, &ifname)? {
            info!(ifname, "interface gone; removed its link pin");
            fs::remove_file(&path).map_err(|source| DatapathError::Pin { path, source })?;
        }
    }
    Ok(())
}

/// Point the pinned link at `program`. `Ok(false)`: the link is defunct (interface deleted).
fn readopt(
    program: &mut SchedClassifier,
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
                .map_err(|source| program_error("taking the link of", ifname, source))?;
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
        Err(source) => Err(program_error("re-attaching", ifname, source)),
    }
}

fn pin_link(
    program: &mut SchedClassifier,
    id: aya::programs::tc::SchedClassifierLinkId,
    path: &PathBuf,
    ifname: &str,
) -> Result<(), DatapathError> {
    let link = program
        .take_link(id)
        .map_err(|source| program_error("taking the link of", ifname, source))?;
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
    action: &'static str,
    ifname: &str,
    source: aya::programs::ProgramError,
) -> DatapathError {
    DatapathError::Program {
        action,
        program: PROGRAM,
        ifname: ifname.into(),
        source: Box::new(source),
    }
}
