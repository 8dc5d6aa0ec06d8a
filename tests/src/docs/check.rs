//! Checks of the user's documentation (README.md and `docs/*.md`): every relative link
//! resolves to a file inside the repository (and a `#anchor` to one of its headings), no link
//! leaves the repository, every `weft-agent …`, `weft-operator …` and `cargo xtask …` command
//! shown in a shell code block (no info string, or `sh`, `bash`, `shell`, `console`; a
//! diagram is marked `text`) names subcommands and `--flags` that exist, and every versioned map
//! name (`weft_…_vN`) is one the agent pins. The command trees are the binaries' own clap
//! definitions; xtask's (which the tests may not depend on) is read from its `Command` and
//! `BenchTarget` enums. Pure text work: it reads files, runs nothing.

use std::{
    collections::BTreeMap,
    fmt, fs,
    path::{Component, Path, PathBuf},
};

use clap::CommandFactory as _;

mod shell;

use self::shell::{check_clap, command_tokens, is_prefix, is_program, is_separator, strip_comment};

/// One problem in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The file, relative to the repository root.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// What is wrong, and the fix.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

/// `cargo xtask`'s subcommands and the values of `bench`'s target.
#[derive(Clone, Debug, Default)]
pub struct XtaskTree {
    /// kebab-case subcommands.
    pub subcommands: Vec<String>,
    /// kebab-case `cargo xtask bench <target>` values.
    pub bench_targets: Vec<String>,
}

/// What the documentation is checked against.
#[derive(Debug)]
pub struct Checker {
    root: PathBuf,
    agent: clap::Command,
    operator: clap::Command,
    xtask: XtaskTree,
    maps: Vec<String>,
}

impl Checker {
    /// A checker for the repository at `root`, against the real command trees and map names.
    ///
    /// # Panics
    /// xtask's sources cannot be read.
    #[must_use]
    pub fn for_repo(root: &Path) -> Self {
        let read = |path: &str| {
            let path = root.join(path);
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let xtask = XtaskTree {
            subcommands: enum_variants(&read("xtask/src/main.rs"), "enum Command"),
            bench_targets: enum_variants(&read("xtask/src/bench.rs"), "enum BenchTarget"),
        };
        assert!(
            !xtask.subcommands.is_empty() && !xtask.bench_targets.is_empty(),
            "found no variants of xtask's Command or BenchTarget enums: the checker's reading of \
             xtask/src/main.rs or bench.rs no longer matches them"
        );
        Self::new(
            root,
            xtask,
            agent_common::maps::PINNED_MAPS.map(str::to_owned).to_vec(),
        )
    }

    /// A checker for `root` with the given xtask tree and map names (the clap trees are the
    /// binaries').
    #[must_use]
    pub fn new(root: &Path, xtask: XtaskTree, maps: Vec<String>) -> Self {
        let mut agent = weft_agent::cli::Cli::command();
        agent.build();
        let mut operator = weft_operator::cli::Cli::command();
        operator.build();
        Self {
            root: root.to_path_buf(),
            agent,
            operator,
            xtask,
            maps,
        }
    }

    /// Checks one file (`rel`: relative to the root).
    ///
    /// # Panics
    /// The file cannot be read.
    #[must_use]
    pub fn check_file(&self, rel: &Path) -> Vec<Finding> {
        let path = self.root.join(rel);
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        self.check_text(rel, &text)
    }

    /// Checks `text` as if it were the file `rel`.
    #[must_use]
    pub fn check_text(&self, rel: &Path, text: &str) -> Vec<Finding> {
        let mut findings = Vec::new();
        let mut add = |line: usize, message: String| {
            findings.push(Finding {
                file: rel.to_path_buf(),
                line,
                message,
            });
        };
        let own_slugs = heading_slugs(text);
        let mut fence: Option<String> = None;
        let mut shell = false;
        let mut pending = String::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            for problem in self.map_names(line) {
                add(number, problem);
            }
            if line.contains("../shared") || line.contains("/work/shared") {
                add(
                    number,
                    "names a directory outside the repository (`shared/`), which a clone does \
                     not have: say it here or leave it out"
                        .to_owned(),
                );
            }
            let trimmed = line.trim_start();
            if let Some(open) = &fence {
                if trimmed.starts_with(open.as_str()) {
                    fence = None;
                    continue;
                }
                if let Some(head) = line.trim_end().strip_suffix('\\') {
                    pending.push_str(head);
                    pending.push(' ');
                    continue;
                }
                pending.push_str(line);
                if shell {
                    for problem in self.commands(&pending) {
                        add(number, problem);
                    }
                }
                pending.clear();
                continue;
            }
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                fence = Some(trimmed[..3].to_owned());
                shell = matches!(
                    trimmed[3..].trim(),
                    "" | "sh" | "bash" | "shell" | "console"
                );
                continue;
            }
            for target in links(line) {
                if let Some(problem) = self.link(rel, &target, &own_slugs) {
                    add(number, problem);
                }
            }
        }
        findings
    }

    /// A versioned map name that the agent does not pin.
    fn map_names(&self, line: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let mut rest = line;
        while let Some(at) = rest.find("weft_") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            let name = &tail[..end];
            let versioned = name
                .rsplit_once("_v")
                .is_some_and(|(_, v)| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
            if versioned && !self.maps.iter().any(|m| m == name) {
                problems.push(format!(
                    "map {name} does not exist; the agent pins {}",
                    self.maps.join(", ")
                ));
            }
            rest = &tail[end..];
        }
        problems
    }

    /// A link target that leaves the repository or does not resolve.
    fn link(&self, rel: &Path, target: &str, own_slugs: &[String]) -> Option<String> {
        if target.contains("://") || target.starts_with("mailto:") {
            return Some(format!(
                "link {target} leaves the repository: link to a file in it instead"
            ));
        }
        let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
        if file.is_empty() {
            return (!own_slugs.iter().any(|s| s == anchor))
                .then(|| format!("link {target}: this file has no heading with that anchor"));
        }
        let resolved = if file.starts_with('/') {
            return Some(format!(
                "link {target} is absolute: write it relative to {}",
                rel.display()
            ));
        } else {
            let base = rel.parent().unwrap_or_else(|| Path::new(""));
            match normalize(&base.join(file)) {
                Some(path) => path,
                None => {
                    return Some(format!(
                        "link {target} leaves the repository (a clone has nothing there)"
                    ));
                }
            }
        };
        let path = self.root.join(&resolved);
        if !path.exists() {
            return Some(format!(
                "link {target}: {} does not exist in the repository",
                resolved.display()
            ));
        }
        if anchor.is_empty() || path.is_dir() {
            return None;
        }
        let text = fs::read_to_string(&path).ok()?;
        let slugs = heading_slugs(&text);
        (!slugs.iter().any(|s| s == anchor)).then(|| {
            format!(
                "link {target}: {} has no heading with the anchor #{anchor}",
                resolved.display()
            )
        })
    }

    /// Problems of the commands on one (joined) code line.
    fn commands(&self, line: &str) -> Vec<String> {
        let line = line.trim_start().trim_start_matches("$ ");
        let line = strip_comment(line);
        let tokens: Vec<String> = line
            .split_whitespace()
            .map(|t| t.trim_matches(|c| c == '\'' || c == '"').to_owned())
            .collect();
        let mut problems = Vec::new();
        let mut at_start = true;
        for (at, token) in tokens.iter().enumerate() {
            if is_separator(token) || token.ends_with(';') {
                at_start = true;
                continue;
            }
            if !at_start || is_prefix(token) {
                continue;
            }
            at_start = false;
            let rest = command_tokens(&tokens[at + 1..]);
            if is_program(token, "weft-agent") {
                problems.extend(check_clap(&self.agent, rest));
            } else if is_program(token, "weft-operator") {
                problems.extend(check_clap(&self.operator, rest));
            } else if token == "cargo" && rest.first().is_some_and(|t| t == "xtask") {
                problems.extend(self.check_xtask(&rest[1..]));
            }
        }
        problems
    }

    fn check_xtask(&self, args: &[String]) -> Option<String> {
        let sub = args.iter().find(|t| !t.starts_with('-'))?;
        if !self.xtask.subcommands.iter().any(|s| s == sub) {
            return Some(format!(
                "cargo xtask has no subcommand {sub} (it has: {})",
                self.xtask.subcommands.join(", ")
            ));
        }
        if sub != "bench" {
            return None;
        }
        let target = args
            .iter()
            .skip_while(|t| *t != "bench")
            .skip(1)
            .find(|t| !t.starts_with('-'));
        match target {
            Some(t) if self.xtask.bench_targets.iter().any(|b| b == t) => None,
            Some(t) => Some(format!(
                "cargo xtask bench has no target {t} (it has: {})",
                self.xtask.bench_targets.join(", ")
            )),
            None => Some("cargo xtask bench needs a target".to_owned()),
        }
    }
}

/// README.md and every `docs/*.md`, relative to `root`, sorted.
///
/// # Panics
/// `docs/` cannot be read.
#[must_use]
pub fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md")];
    let dir = root.join("docs");
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut docs: Vec<PathBuf> = entries
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path()
        })
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter_map(|p| p.file_name().map(|n| Path::new("docs").join(n)))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The link targets of one line of prose: `[text](target)` outside inline code.
fn links(line: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            prose.push(' ');
        } else {
            prose.push(if in_code { ' ' } else { c });
        }
    }
    let mut targets = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let tail = &rest[at + 2..];
        let Some(end) = tail.find(')') else { break };
        let target = tail[..end].split_whitespace().next().unwrap_or("");
        if !target.is_empty() {
            targets.push(target.to_owned());
        }
        rest = &tail[end..];
    }
    targets
}

/// `path` with `.` and `..` folded, or `None` when it climbs above its start.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped, blanks
/// to `-`, `-1`, `-2`, … for repeats).
#[must_use]
pub fn heading_slugs(text: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut slugs = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        let Some(title) = trimmed.strip_prefix('#') else {
            continue;
        };
        if in_fence {
            continue;
        }
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let base: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let count = seen.entry(base.clone()).or_insert(0);
        slugs.push(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    slugs
}

/// The kebab-case variants of the Rust enum opened by `header` (`enum Command`) in `source`.
#[must_use]
pub fn enum_variants(source: &str, header: &str) -> Vec<String> {
    let Some(start) = source.find(&format!("{header} {{")) else {
        return Vec::new();
    };
    let mut variants = Vec::new();
    for line in source[start..].lines().skip(1) {
        let trimmed = line.trim();
        if trimmed == "}" {
            break;
        }
        if line.starts_with("    ") && !line.starts_with("     ") {
            let ident: String = trimmed
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            if ident.starts_with(|c: char| c.is_ascii_uppercase()) {
                variants.push(kebab(&ident));
            }
        }
    }
    variants
}

fn kebab(ident: &str) -> String {
    let mut out = String::new();
    for (i, c) in ident.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}
