//! `cargo xtask image`: weft's container image, built on a machine with no registry access.
//!
//! The image is `FROM scratch` (see `Containerfile` at the workspace root) over a root staged
//! here: `weft-agent`, `weft-cni` and `weft-operator` built in release mode with a static C
//! runtime (`+crt-static`) and stripped (binutils' `strip`), the shared libraries any of them still needs (none
//! when the static build works; whatever `ldd` lists otherwise) and the CA bundle the operator's
//! TLS client reads. Static matters beyond size: the DaemonSet's `install-cni` step copies
//! `weft-cni` onto the node, where it runs with the node's C library, not the image's.
//!
//! Debian's `buildah` (installed by `cargo xtask setup`) builds the image with timestamps pinned
//! to the epoch, so the same binaries give the same digest, and writes it as an OCI archive
//! that `ctr images import`, `podman load` or `skopeo copy oci-archive:…` take.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::{run, setup, target_dir, workspace_root};

/// The image's repository; the tag is the workspace version.
pub const REPOSITORY: &str = "ghcr.io/weft-project/weft";

/// The programs the image carries, all in `/usr/bin` (the image's `PATH`).
const BINARIES: [&str; 3] = ["weft-agent", "weft-cni", "weft-operator"];

/// Where Debian's ca-certificates keeps the bundle rustls' native roots read; the image gets
/// it at the same path.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Arguments of `cargo xtask image`.
#[derive(Debug, Args)]
pub struct ImageArgs {
    /// Where to write the OCI archive (default `<target>/image/weft-<version>.oci.tar`).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The image reference the archive carries, `ghcr.io/weft-project/weft:<version>`.
#[must_use]
pub fn reference() -> String {
    format!("{REPOSITORY}:{}", env!("CARGO_PKG_VERSION"))
}

/// The archive `cargo xtask image` writes when no `--output` is given.
#[must_use]
pub fn default_archive() -> PathBuf {
    target_dir()
        .join("image")
        .join(format!("weft-{}.oci.tar", env!("CARGO_PKG_VERSION")))
}

/// Runs setup, then [`build`].
pub fn image(args: &ImageArgs) -> Result<()> {
    run::require_root("buildah builds the image in root's container storage")?;
    setup::setup()?;
    build(args)
}

/// Builds the static release binaries, stages the root and builds the archive (setup done).
pub fn build(args: &ImageArgs) -> Result<()> {
    let triple = host_triple()?;
    build_static(&triple)?;
    let release = target_dir().join(&triple).join("release");
    let root = target_dir().join("image").join("root");
    stage(&release, &root)?;
    let archive = args.output.clone().unwrap_or_else(default_archive);
    build_archive(&root, &archive)?;
    report(&root, &archive)
}

/// The host's target triple, from `rustc -vV` (so the command works on arm64 machines too).
fn host_triple() -> Result<String> {
    let info = run::output(Command::new("rustc").arg("-vV"))?;
    info.lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .context("`rustc -vV` printed no `host:` line")
}

/// `cargo build --release --target <host>` with a static C runtime. An explicit `--target`
/// keeps the flags off build scripts and proc macros (which cannot link statically), and the
/// target-specific variable keeps them off the eBPF build `agent/build.rs` runs.
fn build_static(triple: &str) -> Result<()> {
    let flags_var = format!(
        "CARGO_TARGET_{}_RUSTFLAGS",
        triple.to_uppercase().replace(['-', '.'], "_")
    );
    run::echo_run(
        Command::new("cargo")
            .current_dir(workspace_root())
            .env(flags_var, "-C target-feature=+crt-static")
            .args(["build", "--release", "--target", triple])
            .args(["-p", "weft-agent", "-p", "weft-operator", "--bins"]),
    )
}

/// Fills `root` (emptied first) with the binaries, their shared libraries and the CA bundle.
fn stage(release: &Path, root: &Path) -> Result<()> {
    if root.exists() {
        fs::remove_dir_all(root).with_context(|| format!("emptying {}", root.display()))?;
    }
    let bin = root.join("usr/bin");
    fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    for name in BINARIES {
        let built = release.join(name);
        copy(&built, &bin.join(name))?;
        run::run(Command::new("strip").arg("--strip-all").arg(bin.join(name)))?;
        for library in shared_libraries(&built)? {
            copy(&library, &under(root, &library))?;
        }
    }
    let bundle = Path::new(CA_BUNDLE);
    if !bundle.is_file() {
        bail!(
            "{CA_BUNDLE} is missing: install Debian's ca-certificates (`cargo xtask setup` does)"
        );
    }
    copy(bundle, &under(root, bundle))
}

/// The shared libraries `ldd` says `binary` loads (its interpreter included); none for a
/// static executable.
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .with_context(|| format!("running `ldd {}`", binary.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.contains("statically linked") {
        // ldd exits 1 with "not a dynamic executable" for a static binary.
        return Ok(Vec::new());
    }
    Ok(text.lines().filter_map(library_path).collect())
}

/// The file an `ldd` line names: `libc.so.6 => /lib/…/libc.so.6 (0x…)` or
/// `/lib64/ld-linux-x86-64.so.2 (0x…)`; none for the kernel's vDSO.
fn library_path(line: &str) -> Option<PathBuf> {
    let path = line
        .split_once("=>")
        .map_or(line, |(_, target)| target)
        .split_whitespace()
        .next()?;
    path.starts_with('/').then(|| PathBuf::from(path))
}

/// `path` (absolute on the build machine) inside `root`.
fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// `buildah build` of the Containerfile over `root`, then `buildah push` to an OCI archive
/// whose index names the image (`ctr images import` registers it under that name).
fn build_archive(root: &Path, archive: &Path) -> Result<()> {
    let reference = reference();
    let containerfile = workspace_root().join("Containerfile");
    run::echo_run(
        Command::new("buildah")
            .args([
                "build",
                "--format",
                "oci",
                "--timestamp",
                "0",
                "--layers=false",
            ])
            .args(["--pull=never", "--tag", &reference, "--file"])
            .arg(&containerfile)
            .arg(root),
    )?;
    if let Some(dir) = archive.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if archive.exists() {
        fs::remove_file(archive).with_context(|| format!("replacing {}", archive.display()))?;
    }
    run::echo_run(
        Command::new("buildah")
            .args(["push", "--format", "oci", &reference])
            .arg(format!("oci-archive:{}:{reference}", archive.display())),
    )
}

/// Prints the archive's path and size and what is in the image.
fn report(root: &Path, archive: &Path) -> Result<()> {
    let size = |path: &Path| {
        fs::metadata(path)
            .map(|meta| meta.len())
            .with_context(|| format!("reading the size of {}", path.display()))
    };
    println!("==> {} in {}", reference(), archive.display());
    println!("    archive: {}", mebibytes(size(archive)?));
    for name in BINARIES {
        let binary = root.join("usr/bin").join(name);
        println!("    /usr/bin/{name}: {}", mebibytes(size(&binary)?));
    }
    Ok(())
}

fn mebibytes(bytes: u64) -> String {
    #[allow(
        clippy::cast_precision_loss,
        reason = "a size to print, to one decimal"
    )]
    let mib = bytes as f64 / (1024.0 * 1024.0);
    format!("{mib:.1} MiB")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::library_path;

    #[test]
    fn ldd_lines_name_the_library_files() {
        let lines = [
            "\tlinux-vdso.so.1 (0x00007ffd)",
            "\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f4e)",
            "\t/lib64/ld-linux-x86-64.so.2 (0x00007f4e)",
        ];
        let paths: Vec<_> = lines.iter().filter_map(|line| library_path(line)).collect();
        assert_eq!(
            paths,
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
    }
}
