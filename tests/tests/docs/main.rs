//! The user's documentation: the checked-in configuration reference equals a fresh rendering
//! from the code; README.md and every `docs/*.md` pass the checks of `weft_tests::docs::check`
//! (links resolve inside the repository, shown commands, flags and map names exist); and the
//! checks themselves fail on a bad snippet. No root, no network: text work only.

mod checker;

use std::fs;

use weft_tests::docs::{self, check::Checker, config_ref};

#[test]
fn the_configuration_reference_is_current() {
    assert_current(&docs::config_ref_path(), &config_ref::render());
}

#[test]
fn the_page_of_cilium_s_features_is_current() {
    assert_current(&docs::features_path(), &docs::features::render());
}

fn assert_current(path: &std::path::Path, fresh: &str) {
    let checked_in = fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `{}` and check the file in",
            path.display(),
            config_ref::COMMAND
        )
    });
    if checked_in != fresh {
        let line = checked_in
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| checked_in.lines().count().min(fresh.lines().count()));
        panic!(
            "{} is stale (first difference at line {}: {:?} should be {:?}): run `{}` and \
             check the result in",
            path.display(),
            line + 1,
            checked_in.lines().nth(line).unwrap_or(""),
            fresh.lines().nth(line).unwrap_or(""),
            config_ref::COMMAND
        );
    }
}

#[test]
fn readme_and_docs_pass_the_checks() {
    let root = docs::repo_root();
    let checker = Checker::for_repo(&root);
    let files = docs::check::doc_files(&root);
    assert!(files.len() > 3, "found only {files:?}");
    let findings: Vec<String> = files
        .iter()
        .flat_map(|file| checker.check_file(file))
        .map(|f| f.to_string())
        .collect();
    assert!(
        findings.is_empty(),
        "{} problem(s) in the documentation:\n{}",
        findings.len(),
        findings.join("\n")
    );
}

/// docs/architecture.md: `weft-agent` → `weft-cluster-ipam` ← `weft-operator`, all three →
/// `weft-k8s`, both programs → `weft-aws-imds` (which depends on no weft crate), and neither
/// program depends on the other (so the agent links no cloud API client, only IMDS's).
#[test]
fn the_crates_depend_one_way_as_the_architecture_says() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(docs::repo_root())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let deps = |package: &str| -> Vec<String> {
        let found = meta["packages"]
            .as_array()
            .and_then(|all| all.iter().find(|p| p["name"] == package));
        let found = found.unwrap_or_else(|| panic!("{package} is not a workspace member"));
        found["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str())
            .filter(|name| name.starts_with("weft-"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        deps("weft-agent"),
        ["weft-aws-imds", "weft-cluster-ipam", "weft-k8s"]
    );
    assert_eq!(
        deps("weft-operator"),
        ["weft-aws-imds", "weft-cluster-ipam", "weft-k8s"]
    );
    assert_eq!(deps("weft-cluster-ipam"), ["weft-k8s"]);
    assert_eq!(deps("weft-k8s"), Vec::<String>::new());
    assert_eq!(deps("weft-aws-imds"), Vec::<String>::new());
}

/// docs/architecture.md: a module with children is `foo.rs` beside `foo/`, never `foo/mod.rs`.
#[test]
fn no_crate_uses_mod_rs() {
    fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
        for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() && !matches!(name, "target" | ".git" | "node_modules") {
                walk(&path, found);
            } else if name == "mod.rs" {
                found.push(path.display().to_string());
            }
        }
    }
    let mut found = Vec::new();
    walk(&docs::repo_root(), &mut found);
    assert!(
        found.is_empty(),
        "move each to the folder's name + .rs (`git mv foo/mod.rs foo.rs`): {found:?}"
    );
}
