//! Loading the embedded eBPF object: check every pinned map against the object's definition,
//! load with the pins (so a restarted agent keeps the same maps and their contents), load the
//! programs and re-adopt the tc links a previous agent left pinned.

use std::path::{Path, PathBuf};

use agent_common::maps;
use aya::{
    Ebpf, EbpfLoader,
    maps::{MapInfo, MapType},
    programs::SchedClassifier,
};

use super::{DEFAULT_PIN_DIR, DatapathError, attach, attach::AttachMode, bpffs};

/// The eBPF object built by `agent/build.rs` from `agent-ebpf`.
pub static ELF: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/weft"));

/// Where the datapath keeps its pins.
#[derive(Clone, Debug)]
pub struct DatapathConfig {
    /// bpffs directory for maps (`<dir>/<map>`) and links (`<dir>/links/...`).
    pub pin_dir: PathBuf,
    /// TCX or netlink tc (`Auto`: netlink tc on pod veths, TCX on native devices from 6.6).
    pub attach_mode: AttachMode,
}

impl Default for DatapathConfig {
    fn default() -> Self {
        Self {
            pin_dir: PathBuf::from(DEFAULT_PIN_DIR),
            attach_mode: AttachMode::Auto,
        }
    }
}

/// The loaded datapath. Dropping it leaves pinned maps and attached links in place, so pods
/// keep forwarding while no agent runs; the next [`Datapath::load`] adopts them.
#[derive(Debug)]
pub struct Datapath {
    pub(super) ebpf: Ebpf,
    pub(super) pin_dir: PathBuf,
    pub(super) attach_mode: AttachMode,
}

impl Datapath {
    /// Load the object, adopting pinned maps and links under `config.pin_dir`.
    ///
    /// # Errors
    /// bpffs cannot be mounted, a pin has the wrong shape, the process lacks privileges, or
    /// re-adopting a link failed.
    pub fn load(config: &DatapathConfig) -> Result<Self, DatapathError> {
        let pin_dir = config.pin_dir.clone();
        bpffs::prepare(&pin_dir)?;
        remove_retired(&pin_dir)?;
        check_pins(&pin_dir)?;
        let mut datapath = Self {
            ebpf: load_object(&pin_dir)?,
            pin_dir,
            attach_mode: config.attach_mode,
        };
        for hook in attach::HOOKS {
            datapath.load_program(hook.program)?;
        }
        attach::adopt_links(&mut datapath)?;
        Ok(datapath)
    }

    /// Open the maps a running (or stopped) agent pinned under `config.pin_dir`, to inspect
    /// them: nothing is mounted, created, pinned, loaded or attached, so the running agent's
    /// programs and links stay as they are.
    ///
    /// # Errors
    /// A map is not pinned there (the directory is not the agent's `--pin-dir`), a pin has
    /// the wrong shape, or the process lacks privileges.
    pub fn open_pinned(config: &DatapathConfig) -> Result<Self, DatapathError> {
        let pin_dir = config.pin_dir.clone();
        let missing: Vec<&'static str> = maps::PINNED_MAPS
            .into_iter()
            .filter(|name| !pin_dir.join(name).exists())
            .collect();
        if !missing.is_empty() {
            return Err(DatapathError::NotPinned { pin_dir, missing });
        }
        check_pins(&pin_dir)?;
        Ok(Self {
            ebpf: load_object(&pin_dir)?,
            pin_dir,
            attach_mode: config.attach_mode,
        })
    }

    /// The bpffs directory this datapath pins into.
    #[must_use]
    pub fn pin_dir(&self) -> &Path {
        &self.pin_dir
    }

    /// How programs are attached, as configured (`auto` is decided per hook when attaching).
    #[must_use]
    pub const fn attach_mode(&self) -> AttachMode {
        self.attach_mode
    }

    /// The loaded program `name` (tests run it with `BPF_PROG_TEST_RUN`).
    ///
    /// # Errors
    /// The object has no such classifier, or loading it failed.
    pub fn program(&mut self, name: &'static str) -> Result<&mut SchedClassifier, DatapathError> {
        self.load_program(name)?;
        self.classifier(name)
    }

    pub(super) fn classifier(
        &mut self,
        name: &'static str,
    ) -> Result<&mut SchedClassifier, DatapathError> {
        let program = self.ebpf.program_mut(name).ok_or(DatapathError::Missing {
            kind: "program",
            name,
        })?;
        program.try_into().map_err(|source| DatapathError::Program {
            action: "expected a classifier:",
            program: name,
            ifname: "-".into(),
            source: Box::new(source),
        })
    }

    fn load_program(&mut self, name: &'static str) -> Result<(), DatapathError> {
        let program = self.classifier(name)?;
        if program.fd().is_ok() {
            return Ok(());
        }
        program.load().map_err(|source| DatapathError::Program {
            action: "loading",
            program: name,
            ifname: "-".into(),
            source: Box::new(source),
        })
    }
}

/// Unpin maps of layouts this build replaced (a counters map of fewer reasons, ...).
/// The embedded object with its maps: each of [`maps::PINNED_MAPS`] opened from its pin under
/// `pin_dir`, or created and pinned there when it has none. Loads no program.
fn load_object(pin_dir: &Path) -> Result<Ebpf, DatapathError> {
    let mut loader = EbpfLoader::new();
    for name in maps::PINNED_MAPS {
        loader.map_pin_path(name, pin_dir.join(name));
    }
    loader.load(ELF).map_err(|source| match &source {
        aya::EbpfError::MapError(aya::maps::MapError::CreateError { io_error, .. })
            if io_error.raw_os_error() == Some(libc::EPERM) =>
        {
            DatapathError::Privileges {
                source: Box::new(source),
            }
        }
        _ => DatapathError::Load {
            source: Box::new(source),
        },
    })
}

fn remove_retired(pin_dir: &Path) -> Result<(), DatapathError> {
    for name in maps::RETIRED_MAPS {
        let path = pin_dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(pin = %path.display(), "removed the pin of a retired map layout");
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(DatapathError::Pin { path, source }),
        }
    }
    Ok(())
}

/// Refuse to adopt a pinned map whose type, key, value, capacity or flags differ from the
/// object's definition (aya would reuse it unchecked).
fn check_pins(pin_dir: &Path) -> Result<(), DatapathError> {
    let object = aya_obj::Object::parse(ELF).map_err(|source| DatapathError::Object {
        source: Box::new(source),
    })?;
    for name in maps::PINNED_MAPS {
        let path = pin_dir.join(name);
        if !path.exists() {
            continue;
        }
        let def = object
            .maps
            .get(name)
            .ok_or(DatapathError::Missing { kind: "map", name })?;
        let info = MapInfo::from_pin(&path).map_err(|source| DatapathError::Map {
            map: name,
            action: "reading the pinned map's info",
            source: Box::new(source),
        })?;
        let pinned_type = info.map_type().map_or(u32::MAX, |t: MapType| t as u32);
        let checks = [
            ("map type", pinned_type, def.map_type()),
            ("key size", info.key_size(), def.key_size()),
            ("value size", info.value_size(), def.value_size()),
            ("max entries", info.max_entries(), def.max_entries()),
            ("flags", info.map_flags(), def.map_flags()),
        ];
        for (what, pinned, expected) in checks {
            if pinned != expected {
                return Err(DatapathError::PinnedMapMismatch {
                    path,
                    what,
                    pinned,
                    expected,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The build script's output (what cargo prints as `warning: weft-agent@…` lines) beside the
    /// `OUT_DIR` the object was embedded from: the nested eBPF build's progress must not be in it,
    /// only its real warnings and errors.
    #[test]
    fn the_ebpf_build_prints_no_progress_as_warnings() {
        let out = std::path::Path::new(env!("OUT_DIR"));
        let output = out.parent().expect("OUT_DIR has a parent").join("output");
        let text = std::fs::read_to_string(&output)
            .unwrap_or_else(|e| panic!("{}: {e}", output.display()));
        let progress: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.starts_with("cargo:warning=") && {
                    let l = l.trim_start_matches("cargo:warning=").trim_start();
                    l.starts_with("Compiling ") || l.starts_with("Finished ")
                }
            })
            .collect();
        assert!(progress.is_empty(), "{}: {progress:#?}", output.display());
    }
}
