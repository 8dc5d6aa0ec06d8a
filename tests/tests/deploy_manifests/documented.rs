//! The install page's commands, run as a reader would run them (without a cluster): every
//! overlay `docs/install.md` writes with `cat > <dir>/kustomization.yaml <<'EOF'` is written
//! beside a copy of `deploy/`, and every `kubectl apply -k`, `kubectl delete -k` and
//! `kubectl kustomize` of its shell blocks builds with `kubectl kustomize`. No page and no
//! kustomization asks for a `kustomize` binary (`kustomize create`, `edit`, `build`): the
//! install needs kubectl alone.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use weft_tests::unique;

use crate::{
    deploy_dir,
    helm::{set_values, try_render},
    kustomization_dirs,
};

/// The page whose commands are checked.
const INSTALL_PAGE: &str = "docs/install.md";

fn repo_root() -> PathBuf {
    deploy_dir()
        .parent()
        .expect("deploy/ is in the repository")
        .to_path_buf()
}

/// The shell blocks of a Markdown page (```sh fences, also indented in list items), each with
/// its indentation removed.
fn shell_blocks(page: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, Vec<String>)> = None;
    for line in page.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut current {
            None if trimmed == "```sh" => current = Some((indent, Vec::new())),
            None => {}
            Some(_) if trimmed == "```" => {
                blocks.push(current.take().expect("in a block").1);
            }
            Some((indent, lines)) => {
                lines.push(line.get(*indent..).unwrap_or(trimmed).to_owned());
            }
        }
    }
    assert!(current.is_none(), "an unclosed ```sh block");
    blocks
}

/// Copy the tree at `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("a name"));
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            fs::copy(&path, &target).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

/// The kustomization directory a `kubectl` line builds, if it is one of the three commands.
fn kustomize_target(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split('#').next()?.split_whitespace().collect();
    let kubectl = words.iter().position(|w| *w == "kubectl")?;
    let rest = &words[kubectl + 1..];
    match rest {
        ["kustomize", dir, ..] => Some((*dir).to_owned()),
        ["apply" | "delete", ..] => {
            let k = rest.iter().position(|w| *w == "-k")?;
            Some((*rest.get(k + 1)?).to_owned())
        }
        _ => None,
    }
}

#[test]
fn every_documented_overlay_and_kubectl_command_builds() {
    let root = repo_root();
    let page = fs::read_to_string(root.join(INSTALL_PAGE)).expect("the install page");
    let scratch = std::env::temp_dir().join(unique("weft-documented-"));
    copy_tree(&deploy_dir(), &scratch.join("deploy"));
    let (mut overlays, mut commands) = (0, Vec::new());
    for block in shell_blocks(&page) {
        let mut lines = block.iter();
        while let Some(line) = lines.next() {
            if let Some(rest) = line.strip_prefix("cat > ") {
                let (file, marker) = rest.split_once(" <<'").unwrap_or_else(|| {
                    panic!("{INSTALL_PAGE}: a heredoc without a quoted marker: {line}")
                });
                let marker = marker.trim_end_matches('\'');
                let body: Vec<&str> = lines
                    .by_ref()
                    .take_while(|l| l.as_str() != marker)
                    .map(String::as_str)
                    .collect();
                let path = scratch.join(file);
                fs::create_dir_all(path.parent().expect("a directory")).expect("mkdir");
                fs::write(&path, body.join("\n") + "\n").expect("write the overlay");
                overlays += 1;
            } else if let Some(dir) = kustomize_target(line) {
                commands.push((line.clone(), dir));
            }
        }
    }
    let mut failures = Vec::new();
    for (line, dir) in &commands {
        let out = Command::new("kubectl")
            .arg("kustomize")
            .arg(scratch.join(dir))
            .output()
            .expect("run kubectl kustomize");
        if !out.status.success() || out.stdout.is_empty() {
            failures.push(format!(
                "`{line}`: kubectl kustomize {dir}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let _ = fs::remove_dir_all(&scratch);
    assert!(
        failures.is_empty(),
        "{INSTALL_PAGE}:\n{}",
        failures.join("\n")
    );
    assert!(
        overlays >= 2,
        "{INSTALL_PAGE}: the overlays it writes were not found"
    );
    let dirs: Vec<&str> = commands.iter().map(|(_, dir)| dir.as_str()).collect();
    for install in [
        "deploy/crds/",
        "deploy/standalone/",
        "deploy/with-cilium/",
        "my-weft/",
    ] {
        assert!(
            dirs.contains(&install),
            "{INSTALL_PAGE}: no command builds {install}: {dirs:?}"
        );
    }
}

#[test]
fn no_page_or_kustomization_needs_a_kustomize_binary() {
    let root = repo_root();
    let mut texts = vec![root.join("README.md")];
    for entry in fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            texts.push(path);
        }
    }
    texts.extend(
        kustomization_dirs()
            .iter()
            .map(|d| d.join("kustomization.yaml")),
    );
    for path in texts {
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for line in text.lines() {
            for command in ["kustomize create", "kustomize edit", "kustomize build"] {
                assert!(
                    !line.contains(command),
                    "{}: `{command}` needs a kustomize binary the install does not have; use \
                     `kubectl kustomize` / `kubectl apply -k` and an overlay written by hand:\n{line}",
                    path.display()
                );
            }
        }
    }
}

/// A shell line's words (single and double quotes kept together, quotes removed).
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote) = (Vec::new(), String::new(), None);
    let mut in_word = false;
    for c in line.chars() {
        match (quote, c) {
            (None, '#') if !in_word => break,
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (_, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    assert!(quote.is_none(), "unclosed quote in `{line}`");
    if in_word {
        words.push(word);
    }
    words
}

#[test]
fn every_documented_helm_command_renders() {
    let page = fs::read_to_string(repo_root().join(INSTALL_PAGE)).expect("the install page");
    let mut commands = 0;
    for block in shell_blocks(&page) {
        let joined = block.join("\n").replace("\\\n", " ");
        for line in joined.lines() {
            let words = shell_words(line);
            let Some(helm) = words.iter().position(|w| w == "helm") else {
                continue;
            };
            let args = &words[helm + 1..];
            if !matches!(
                args.first().map(String::as_str),
                Some("install" | "upgrade" | "template")
            ) {
                continue;
            }
            assert!(
                args.iter().any(|a| a == "deploy/helm/weft"),
                "{INSTALL_PAGE}: `{line}` does not install deploy/helm/weft"
            );
            let mut sets = Vec::new();
            let mut rest = args.iter();
            while let Some(arg) = rest.next() {
                if arg == "--set" {
                    sets.push(rest.next().expect("a --set expression").clone());
                } else if let Some(expression) = arg.strip_prefix("--set=") {
                    sets.push(expression.to_owned());
                } else {
                    assert!(
                        !arg.starts_with("--set") && arg != "-f" && arg != "--values",
                        "{INSTALL_PAGE}: `{line}`: {arg} is not checked here; use --set"
                    );
                }
            }
            let values =
                set_values(&sets).unwrap_or_else(|e| panic!("{INSTALL_PAGE}: `{line}`: {e}"));
            if let Err(error) = try_render(&values) {
                panic!("{INSTALL_PAGE}: `{line}` does not render ({values}):\n{error}");
            }
            commands += 1;
        }
    }
    assert!(
        commands >= 2,
        "{INSTALL_PAGE}: its helm commands were not found"
    );
}
