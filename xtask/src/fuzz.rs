//! `cargo xtask fuzz`: run the cargo-fuzz targets in `fuzz/` for a bounded time each (not part
//! of `cargo xtask test` or CI: it needs nightly and libFuzzer). Installs cargo-fuzz on first
//! use. Each target starts from its checked-in seeds (`fuzz/corpus/<target>/`, read only) plus
//! a scratch corpus under the target directory that grows across runs (and `fuzz/<target>.dict`
//! as a libFuzzer dictionary when there is one); a crash stops that
//! target, the others still run, and the summary names the inputs to fix and keep.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::{run, target_dir, workspace_root};

/// Arguments of `cargo xtask fuzz`.
#[derive(Debug, Args)]
pub struct FuzzArgs {
    /// How long to fuzz each target, in seconds.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Fuzz only this target (default: every target in `fuzz/fuzz_targets/`).
    pub target: Option<String>,
}

/// Install cargo-fuzz if needed, then fuzz each target for `--seconds`.
pub fn fuzz(args: &FuzzArgs) -> Result<()> {
    ensure_cargo_fuzz()?;
    let fuzz_dir = workspace_root().join("fuzz");
    let all = targets(&fuzz_dir)?;
    let chosen: Vec<String> = match &args.target {
        Some(t) if all.contains(t) => vec![t.clone()],
        Some(t) => bail!("no fuzz target {t:?}; the targets are {}", all.join(", ")),
        None => all,
    };
    let mut failed = Vec::new();
    for target in &chosen {
        let scratch = target_dir().join("fuzz-corpus").join(target);
        fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
        let mut cmd = Command::new("cargo");
        cmd.current_dir(workspace_root())
            // The fuzz build never loads the datapath: skip the eBPF build (agent/build.rs).
            .env("AYA_BUILD_SKIP", "1")
            .args(["+nightly", "fuzz", "run", target.as_str()])
            .arg(&scratch)
            .arg(fuzz_dir.join("corpus").join(target))
            .args([
                "--",
                &format!("-max_total_time={}", args.seconds),
                "-timeout=10",
                "-rss_limit_mb=2048",
                "-print_final_stats=1",
            ]);
        let dict = fuzz_dir.join(format!("{target}.dict"));
        if dict.exists() {
            cmd.arg(format!("-dict={}", dict.display()));
        }
        println!("==> fuzz {target} for {} s", args.seconds);
        let start = Instant::now();
        if let Err(error) = run::echo_run(&mut cmd) {
            println!(
                "==> {target}: FAILED after {:.0?}: {error}",
                start.elapsed()
            );
            failed.push(target.clone());
        } else {
            println!("==> {target}: no findings in {:.0?}", start.elapsed());
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    bail!(
        "fuzzing found inputs that break {}: the crashing input is in fuzz/artifacts/<target>/; \
         fix the agent, then copy the input to fuzz/regressions/<target>/ so the test suite \
         replays it",
        failed.join(", ")
    )
}

/// The fuzz targets: the file stems in `fuzz/fuzz_targets/`, sorted.
fn targets(fuzz_dir: &Path) -> Result<Vec<String>> {
    let dir = fuzz_dir.join("fuzz_targets");
    let mut out: Vec<String> = fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| {
            let path: PathBuf = e.ok()?.path();
            (path.extension()? == "rs").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    out.sort();
    Ok(out)
}

/// `cargo install cargo-fuzz` unless `cargo fuzz` already runs (idempotent, cheap when there).
fn ensure_cargo_fuzz() -> Result<()> {
    let present = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if present {
        return Ok(());
    }
    run::echo_run(Command::new("cargo").args(["install", "--locked", "cargo-fuzz"]))
        .context("installing cargo-fuzz")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_has_a_seed_corpus_and_a_regressions_dir() {
        let fuzz_dir = workspace_root().join("fuzz");
        let targets = targets(&fuzz_dir).expect("targets");
        assert!(targets.len() >= 4, "{targets:?}");
        for t in targets {
            let seeds = fuzz_dir.join("corpus").join(&t);
            let n = fs::read_dir(&seeds).map_or(0, Iterator::count);
            assert!(n > 0, "no seeds in {}", seeds.display());
            assert!(fuzz_dir.join("regressions").join(&t).is_dir(), "{t}");
        }
    }
}
