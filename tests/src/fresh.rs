//! Refusing a stale binary: the tests spawn `weft-agent`, `weft-cni` and `weft-operator` as
//! built, and `cargo test -p weft-tests` does not rebuild other packages' binaries. Cargo's
//! dep-info file beside each binary (`<bin>.d`) lists every source it was built from; a
//! source newer than the binary means the test would run old code, so it stops and names the
//! build command. (`cargo xtask test`, which CI runs, builds every target first.)

use std::{
    path::{Path, PathBuf},
    time::SystemTime,
};

/// The command that brings every spawned binary up to date.
pub const BUILD_COMMAND: &str = "cargo build --workspace --bins";

/// The sources listed in `binary`'s dep-info file that changed after it was built (none when
/// there is no dep-info file: a binary cargo did not build is taken as it is).
#[must_use]
pub fn newer_sources(binary: &Path) -> Vec<PathBuf> {
    let Ok(built) = std::fs::metadata(binary).and_then(|m| m.modified()) else {
        return Vec::new();
    };
    let Ok(dep_info) = std::fs::read_to_string(binary.with_extension("d")) else {
        return Vec::new();
    };
    sources(&dep_info)
        .into_iter()
        .filter(|source| modified(source).is_some_and(|at| at > built))
        .collect()
}

/// Panic, naming [`BUILD_COMMAND`], when `binary` is older than one of its sources.
pub fn refuse_stale(binary: &Path) {
    let newer = newer_sources(binary);
    assert!(
        newer.is_empty(),
        "{} is older than its sources ({}{}): run `{BUILD_COMMAND}` first (`cargo xtask test` \
         does), or the test runs old code",
        binary.display(),
        newer
            .iter()
            .take(3)
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if newer.len() > 3 { ", …" } else { "" },
    );
}

/// The files a dep-info text (`target: source source …`, spaces escaped as `\ `) lists;
/// directories are left out (their mtime says nothing about the sources).
fn sources(dep_info: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in dep_info.lines() {
        let Some((_, deps)) = line.split_once(": ") else {
            continue;
        };
        let mut current = String::new();
        let mut chars = deps.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    current.push(' ');
                    chars.next();
                }
                ' ' => {
                    if !current.is_empty() {
                        out.push(PathBuf::from(std::mem::take(&mut current)));
                    }
                }
                c => current.push(c),
            }
        }
        if !current.is_empty() {
            out.push(PathBuf::from(current));
        }
    }
    out.retain(|p| !p.is_dir());
    out
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_touched_after_the_build_is_named() {
        let dir = std::env::temp_dir().join(crate::unique("weft-fresh-"));
        std::fs::create_dir_all(dir.join("with space")).expect("mkdir");
        let source = dir.join("with space/main.rs");
        let other = dir.join("lib.rs");
        std::fs::write(&source, "fn main() {}").expect("write");
        std::fs::write(&other, "").expect("write");
        let binary = dir.join("prog");
        std::fs::write(&binary, "").expect("write");
        let listed = format!(
            "{}: {} {} {}\n",
            binary.display(),
            source.display().to_string().replace(' ', "\\ "),
            other.display(),
            dir.display()
        );
        std::fs::write(dir.join("prog.d"), listed).expect("write");
        let past = SystemTime::now() - std::time::Duration::from_mins(1);
        std::fs::File::options()
            .write(true)
            .open(&binary)
            .and_then(|f| f.set_modified(past))
            .expect("set mtime");
        std::fs::File::options()
            .write(true)
            .open(&other)
            .and_then(|f| f.set_modified(past - std::time::Duration::from_mins(1)))
            .expect("set mtime");
        assert_eq!(newer_sources(&binary), [source]);
        assert!(newer_sources(&dir.join("missing")).is_empty());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
