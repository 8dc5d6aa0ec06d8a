//! Builds `agent-ebpf` for bpfel-unknown-none with aya-build (nightly + bpf-linker) and puts the
//! object in `OUT_DIR`, where `datapath::loader` embeds it.

use std::process::Command;

use anyhow::{Context as _, anyhow};

fn main() -> anyhow::Result<()> {
    let metadata = cargo_metadata_ebpf_dir()?;
    if std::env::var_os("AYA_BUILD_SKIP").is_some_and(|v| v == "1" || v == "true") {
        // Builds that never load the datapath (`cargo xtask fuzz`) embed an empty object;
        // aya-build skips the eBPF build but leaves no file for `include_bytes!`.
        let out = std::env::var("OUT_DIR").context("OUT_DIR")?;
        let object = std::path::Path::new(&out).join("weft");
        if !object.exists() {
            std::fs::write(&object, b"").context("writing the empty eBPF object")?;
        }
    } else {
        // Fail with the fix instead of a linker error deep inside the nested cargo build.
        let linker = Command::new("rustup")
            .args(["run", "nightly", "bpf-linker", "--version"])
            .output();
        match linker {
            Ok(out) if out.status.success() => {}
            _ => {
                return Err(anyhow!(
                    "bpf-linker (built against nightly's LLVM) or the nightly toolchain is \
                     missing: run `cargo xtask setup` once, then build again"
                ));
            }
        }
    }
    // aya-build passes every stderr line of the nested cargo on as a `cargo:warning`, so each
    // `Compiling …` of the eBPF build showed up as `warning: weft-agent@…` on every build. A
    // quiet nested cargo prints no progress; compiler warnings and errors still come through.
    // SAFETY: the build script is single-threaded here; nothing reads the environment meanwhile.
    unsafe { std::env::set_var("CARGO_TERM_QUIET", "true") };
    // aya-build watches agent-ebpf; the ABI crate is compiled into the object too.
    println!("cargo:rerun-if-changed={metadata}/../agent-common/src");
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "agent-ebpf",
            root_dir: &metadata,
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
    .context("building the eBPF programs (agent-ebpf)")
}

fn cargo_metadata_ebpf_dir() -> anyhow::Result<String> {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").context("CARGO_MANIFEST_DIR")?;
    let dir = std::path::Path::new(&manifest).join("../agent-ebpf");
    let dir = dir
        .canonicalize()
        .with_context(|| format!("agent-ebpf not found at {}", dir.display()))?;
    Ok(dir.display().to_string())
}
