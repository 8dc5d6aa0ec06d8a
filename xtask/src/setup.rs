//! `cargo xtask setup`: installs, idempotently, everything the build and the tests need on
//! a fresh Debian machine: the nightly toolchain with `rust-src` (the eBPF crate is built
//! with `-Z build-std`), `bpf-linker` linked against nightly's own libLLVM, and the Debian
//! packages the datapath tests and the demo call; in a venv under [`TOOLS_VENV`], from PyPI,
//! `kubernetes-validate` and `helm-python-sdk` for the deploy manifests' test and
//! `moto[server]` (with boto3) for the EC2 tests. Each item prints one line, `ok: ...` when
//! already present or `installing: ...` before installing it.

use std::{
    env, fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::run::{self, display, output, succeeds};

/// Debian packages used by the tests, benchmarks and demo (`nsenter` is in util-linux,
/// `modprobe` in kmod, `ping` in iputils-ping, `sysctl` in procps; containerd, runc and the
/// static busybox, the only thing in the containers' image, for the runtime tests;
/// python3-venv for the venv that holds kubernetes-validate; buildah, the CA bundle and
/// `strip` for `cargo xtask image`; iptables and nftables, with which the Services tests and
/// benchmark write kube-proxy's rules; prometheus for `promtool check metrics`, which lints the
/// agent's and the operator's `/metrics` in tests/tests/metrics_naming.rs; curl, with which
/// `demo-aws`'s nodes read their instance metadata).
const DEB_PACKAGES: &[&str] = &[
    "bpftool",
    "iproute2",
    "iperf3",
    "qperf",
    "tcpdump",
    "containernetworking-plugins",
    "iputils-ping",
    "procps",
    "util-linux",
    "kmod",
    "containerd",
    "runc",
    "busybox-static",
    "python3-venv",
    "buildah",
    "ca-certificates",
    "binutils",
    "iptables",
    "nftables",
    "prometheus",
    "curl",
];

/// The venv that holds Python tools from PyPI (outside the repository, like the bpf-linker
/// prefix, so `cargo clean` keeps it). tests/tests/deploy_manifests/ runs
/// `<venv>/bin/kubernetes-validate`.
const TOOLS_VENV: &str = "/opt/weft-tools/venv";

/// The kubernetes-validate release the manifests are checked with (it ships the schemas of
/// Kubernetes 1.25 to 1.37; the test validates against 1.33).
const KUBERNETES_VALIDATE_VERSION: &str = "1.37.0";

/// The helm-python-sdk release the Helm chart is rendered with: Python bindings (ctypes) to
/// `libhelm_c`, a C ABI over Helm's own Go SDK (helm.sh/helm/v4 4.2.3: its chart loader and
/// template engine, Sprig 3.3.0), shipped built in its manylinux wheel. No helm binary and no
/// Go toolchain are needed; rendering runs offline.
const HELM_PYTHON_SDK_VERSION: &str = "0.2.2";

/// The moto release the EC2 tests use as a second, independent EC2.
const MOTO_VERSION: &str = "5.2.5";

/// The boto3 release (moto's client, and the judge of the EC2 emulator's XML in
/// tests/tests/ec2_emulator/boto3.rs: botocore's own serializer and parser).
const BOTO3_VERSION: &str = "1.44.8";

/// The bpf-linker release line the eBPF build is known to work with.
const BPF_LINKER_VERSION: &str = "^0.13";

/// Runs every setup step in order, stopping at the first item that cannot be installed.
pub fn setup() -> Result<()> {
    nightly_toolchain()?;
    rust_src()?;
    bpf_linker()?;
    deb_packages()?;
    kubernetes_validate()?;
    helm_python_sdk()?;
    moto()
}

fn nightly_toolchain() -> Result<()> {
    let list = output(Command::new("rustup").args(["toolchain", "list"]))
        .context("rustup is required: install it from https://rustup.rs")?;
    // `+nightly` resolves to the undated `nightly-<host>` toolchain, not `nightly-2025-...`.
    let present = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .any(|name| {
            name == "nightly"
                || name
                    .strip_prefix("nightly-")
                    .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
        });
    if present {
        println!("ok: nightly toolchain");
        return Ok(());
    }
    install(
        "nightly toolchain",
        Command::new("rustup").args(["toolchain", "install", "nightly", "--profile", "minimal"]),
    )
}

fn rust_src() -> Result<()> {
    let list = output(Command::new("rustup").args([
        "component",
        "list",
        "--toolchain",
        "nightly",
        "--installed",
    ]))?;
    if list.lines().any(|l| l.trim() == "rust-src") {
        println!("ok: rust-src (nightly)");
        return Ok(());
    }
    install(
        "rust-src (nightly)",
        Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]),
    )
}

/// `rustup run nightly` puts nightly's `lib` directory on the loader path, which is where
/// the libLLVM that bpf-linker was linked against lives.
fn bpf_linker_works() -> bool {
    succeeds(Command::new("rustup").args(["run", "nightly", "bpf-linker", "--version"]))
}

fn bpf_linker() -> Result<()> {
    if bpf_linker_works() {
        println!("ok: bpf-linker");
        return Ok(());
    }
    // Link against nightly's libLLVM instead of a system LLVM: make a prefix whose
    // lib/libLLVM.so points at nightly's versioned libLLVM.so.<ver> and hand it to
    // bpf-linker's build via LLVM_PREFIX, selecting the matching llvm-<major> feature.
    let sysroot = output(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))?;
    let lib_dir = Path::new(sysroot.trim()).join("lib");
    let libllvm = find_libllvm(&lib_dir)?;
    let verbose = output(Command::new("rustc").args(["+nightly", "-vV"]))?;
    let major = llvm_major(&verbose)?;

    let prefix = llvm_prefix_dir()?;
    let link = prefix.join("lib").join("libLLVM.so");
    fs::create_dir_all(prefix.join("lib"))
        .with_context(|| format!("creating {}", prefix.join("lib").display()))?;
    if link.symlink_metadata().is_ok() {
        fs::remove_file(&link).with_context(|| format!("removing stale {}", link.display()))?;
    }
    symlink(&libllvm, &link)
        .with_context(|| format!("linking {} -> {}", link.display(), libllvm.display()))?;

    // --force: a bpf-linker left over from an older nightly (whose libLLVM is gone) must
    // be rebuilt, and plain `cargo install` would call it up to date.
    let mut cmd = Command::new("cargo");
    cmd.env("LLVM_PREFIX", &prefix).args([
        "install",
        "bpf-linker",
        "--force",
        "--version",
        BPF_LINKER_VERSION,
        "--no-default-features",
        "--features",
        &format!("llvm-{major}"),
    ]);
    install(
        &format!("bpf-linker {BPF_LINKER_VERSION} (llvm-{major})"),
        &mut cmd,
    )?;
    if !bpf_linker_works() {
        bail!(
            "bpf-linker was installed but `rustup run nightly bpf-linker --version` still fails; \
             check that $CARGO_HOME/bin is on PATH and rerun `cargo xtask setup`"
        );
    }
    Ok(())
}

/// The `libLLVM.so.<version>` shared object in nightly's `lib` directory.
fn find_libllvm(lib_dir: &Path) -> Result<PathBuf> {
    let entries =
        fs::read_dir(lib_dir).with_context(|| format!("listing {}", lib_dir.display()))?;
    for entry in entries {
        let entry = entry?;
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("libLLVM.so.")
        {
            return Ok(entry.path());
        }
    }
    bail!(
        "no libLLVM.so.* in {}: the nightly toolchain looks incomplete, \
         reinstall it with `rustup toolchain install nightly --force`",
        lib_dir.display()
    )
}

/// The LLVM major version from `rustc -vV` output (`LLVM version: 22.1.4` gives 22).
fn llvm_major(rustc_verbose: &str) -> Result<u32> {
    rustc_verbose
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version:"))
        .and_then(|v| v.trim().split('.').next())
        .and_then(|major| major.parse().ok())
        .context("`rustc +nightly -vV` does not report an `LLVM version: N.x` line")
}

/// `$CARGO_HOME/weft-llvm-prefix` (default `~/.cargo`): outside the repository so that
/// `cargo clean` does not break a later reinstall.
fn llvm_prefix_dir() -> Result<PathBuf> {
    let cargo_home = match env::var_os("CARGO_HOME") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env::var_os("HOME").context("neither CARGO_HOME nor HOME is set")?)
            .join(".cargo"),
    };
    Ok(cargo_home.join("weft-llvm-prefix"))
}

fn deb_installed(package: &str) -> bool {
    output(Command::new("dpkg-query").args(["-W", "-f=${Status}", package]))
        .is_ok_and(|status| status.trim() == "install ok installed")
}

fn deb_packages() -> Result<()> {
    let mut missing = Vec::new();
    for &package in DEB_PACKAGES {
        if deb_installed(package) {
            println!("ok: {package}");
        } else {
            println!("installing: {package}");
            missing.push(package);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let names = missing.join(" ");
    let manual = format!("run `apt-get install {names}` as root");
    let what = if missing.len() == 1 { "is" } else { "are" };
    if !run::is_root()? {
        bail!("{names} {what} missing and installing needs root: {manual}");
    }
    let apt_failed = |err: anyhow::Error| {
        err.context(format!(
            "{names} {what} missing and apt-get failed: {manual}"
        ))
    };
    run::run(Command::new("apt-get").arg("update")).map_err(apt_failed)?;
    run::run(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&missing),
    )
    .map_err(apt_failed)?;
    let still_missing: Vec<_> = missing.into_iter().filter(|p| !deb_installed(p)).collect();
    if !still_missing.is_empty() {
        let names = still_missing.join(" ");
        bail!("{names} still not installed after apt-get: run `apt-get install {names}` as root");
    }
    Ok(())
}

/// `kubernetes-validate` at [`KUBERNETES_VALIDATE_VERSION`] in [`TOOLS_VENV`] (created with
/// Debian's python3-venv when missing); a venv with another version is upgraded in place.
fn kubernetes_validate() -> Result<()> {
    let venv = Path::new(TOOLS_VENV);
    let tool = venv.join("bin").join("kubernetes-validate");
    let installed = output(Command::new(&tool).arg("--version")).ok();
    if installed.as_deref().map(str::trim) == Some(KUBERNETES_VALIDATE_VERSION) {
        println!("ok: kubernetes-validate {KUBERNETES_VALIDATE_VERSION} ({TOOLS_VENV})");
        return Ok(());
    }
    if !run::is_root()? {
        bail!(
            "kubernetes-validate {KUBERNETES_VALIDATE_VERSION} is missing from {TOOLS_VENV} and \
             installing it needs root: run `cargo xtask setup` as root"
        );
    }
    if !venv.join("bin").join("pip").exists() {
        install(
            &format!("python venv {TOOLS_VENV}"),
            Command::new("python3").args(["-m", "venv"]).arg(venv),
        )?;
    }
    install(
        &format!("kubernetes-validate {KUBERNETES_VALIDATE_VERSION}"),
        Command::new(venv.join("bin").join("pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &format!("kubernetes-validate=={KUBERNETES_VALIDATE_VERSION}"),
        ]),
    )
}

/// `helm-python-sdk` at [`HELM_PYTHON_SDK_VERSION`] in [`TOOLS_VENV`] (after
/// [`kubernetes_validate`], which creates the venv); another version is replaced in place.
fn helm_python_sdk() -> Result<()> {
    let venv = Path::new(TOOLS_VENV);
    let python = venv.join("bin").join("python3");
    let installed = output(Command::new(&python).args([
        "-c",
        "import importlib.metadata as m; print(m.version('helm-python-sdk'))",
    ]))
    .ok();
    if installed.as_deref().map(str::trim) == Some(HELM_PYTHON_SDK_VERSION) {
        println!("ok: helm-python-sdk {HELM_PYTHON_SDK_VERSION} ({TOOLS_VENV})");
        return Ok(());
    }
    if !run::is_root()? {
        bail!(
            "helm-python-sdk {HELM_PYTHON_SDK_VERSION} is missing from {TOOLS_VENV} and \
             installing it needs root: run `cargo xtask setup` as root"
        );
    }
    install(
        &format!("helm-python-sdk {HELM_PYTHON_SDK_VERSION}"),
        Command::new(venv.join("bin").join("pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            &format!("helm-python-sdk=={HELM_PYTHON_SDK_VERSION}"),
        ]),
    )
}

/// `moto[server]` at [`MOTO_VERSION`] and boto3 at [`BOTO3_VERSION`] in [`TOOLS_VENV`] (after
/// [`kubernetes_validate`], which creates the venv): `<venv>/bin/moto_server`.
fn moto() -> Result<()> {
    let venv = Path::new(TOOLS_VENV);
    let python = venv.join("bin").join("python3");
    let installed = output(Command::new(&python).args([
        "-c",
        "import importlib.metadata as m, flask; print(m.version('moto'), m.version('boto3'))",
    ]))
    .ok();
    let wanted = format!("{MOTO_VERSION} {BOTO3_VERSION}");
    if installed.as_deref().map(str::trim) == Some(wanted.as_str()) {
        println!("ok: moto[server] {MOTO_VERSION}, boto3 {BOTO3_VERSION} ({TOOLS_VENV})");
        return Ok(());
    }
    if !run::is_root()? {
        bail!(
            "moto[server] {MOTO_VERSION} or boto3 {BOTO3_VERSION} is missing from {TOOLS_VENV} and \
             installing them needs root: run `cargo xtask setup` as root"
        );
    }
    install(
        &format!("moto[server] {MOTO_VERSION}, boto3 {BOTO3_VERSION}"),
        Command::new(venv.join("bin").join("pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &format!("moto[server]=={MOTO_VERSION}"),
            &format!("boto3=={BOTO3_VERSION}"),
        ]),
    )
}

/// Prints `installing: <what> (<cmd>)`, runs `cmd` with its output streaming, and on
/// failure names the missing piece and the command to run by hand.
fn install(what: &str, cmd: &mut Command) -> Result<()> {
    let line = display(cmd);
    println!("installing: {what} ({line})");
    run::run(cmd)
        .with_context(|| format!("{what} is missing and installing it failed: run `{line}`"))
}

#[cfg(test)]
mod tests {
    use super::llvm_major;

    #[test]
    fn llvm_major_comes_from_rustc_verbose_version() {
        let verbose = "rustc 1.97.0-nightly (e50aa6fba 2026-05-19)\nhost: x86_64-unknown-linux-gnu\n\
                       release: 1.97.0-nightly\nLLVM version: 22.1.4\n";
        assert_eq!(llvm_major(verbose).expect("has an LLVM line"), 22);
        assert!(llvm_major("rustc 1.0.0\n").is_err());
    }
}
