//! Replays every input the fuzzers found (`fuzz/regressions/<target>/`) and every seed
//! (`fuzz/corpus/<target>/`) through the same checks as the fuzz targets, on stable and
//! without libFuzzer, so a fixed finding stays fixed in CI. No root needed.

use std::{fs, path::Path};

#[path = "../../fuzz/src/lib.rs"]
mod checks;

/// Run every file of `dir/<target>/` through target `target`; a panic names the file.
fn replay(dir: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz")
        .join(dir);
    let mut count = 0;
    for target in checks::TARGETS {
        let Ok(entries) = fs::read_dir(root.join(target)) else {
            panic!("{}/{target} is missing", root.display());
        };
        let mut files: Vec<_> = entries
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| !n.to_string_lossy().starts_with('.'))
            })
            .collect();
        files.sort();
        for file in files {
            let data = fs::read(&file).expect("readable input");
            let outcome = std::panic::catch_unwind(|| checks::run(target, &data));
            assert!(outcome.is_ok(), "{target} fails on {}", file.display());
            count += 1;
        }
    }
    count
}

#[test]
fn fuzz_findings_stay_fixed() {
    replay("regressions");
}

#[test]
fn fuzz_seeds_pass() {
    assert!(replay("corpus") >= 4 * 3, "every target has a few seeds");
}
