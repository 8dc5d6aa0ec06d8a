//! Running external commands: echoing them like `set -x`, streaming their output, and
//! turning a failed start or a non-zero exit into an [`anyhow`] error that names the
//! command, so every failure message says exactly what to rerun by hand.

use std::{
    fs,
    io::ErrorKind,
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail};

/// Renders `cmd` as a shell-like line: explicitly set environment variables, the program
/// and its arguments, quoting anything that is not plainly shell-safe.
pub fn display(cmd: &Command) -> String {
    let envs = cmd.get_envs().filter_map(|(key, value)| {
        value.map(|value| {
            format!(
                "{}={}",
                key.to_string_lossy(),
                quote(&value.to_string_lossy())
            )
        })
    });
    let words = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|word| quote(&word.to_string_lossy()));
    envs.chain(words).collect::<Vec<_>>().join(" ")
}

fn quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:=+,@%^".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Prints `+ <cmd>` and then runs it with inherited stdio (see [`run`]).
pub fn echo_run(cmd: &mut Command) -> Result<()> {
    println!("+ {}", display(cmd));
    run(cmd)
}

/// Runs `cmd` with inherited stdio, so its output streams to the terminal; a failure to
/// start it or a non-zero exit becomes an error naming the command.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().map_err(|err| start_error(cmd, &err))?;
    if !status.success() {
        bail!("`{}` failed ({status})", display(cmd));
    }
    Ok(())
}

/// Runs `cmd` capturing its output and returns its stdout; on a non-zero exit the error
/// names the command and includes its stderr.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|err| start_error(cmd, &err))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            display(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{}` printed non-UTF-8", display(cmd)))
}

/// Whether `cmd` starts and exits successfully; its output is discarded.
pub fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn start_error(cmd: &Command, err: &std::io::Error) -> anyhow::Error {
    let program = cmd.get_program().to_string_lossy();
    if err.kind() == ErrorKind::NotFound {
        anyhow::anyhow!(
            "cannot run `{}`: `{program}` is not installed or not on PATH",
            display(cmd)
        )
    } else {
        anyhow::anyhow!("cannot run `{}`: {err}", display(cmd))
    }
}

/// Whether this process runs with effective uid 0, read from `/proc/self/status`
/// (`Uid:` lists real, effective, saved and filesystem uids).
pub fn is_root() -> Result<bool> {
    let status = fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let euid = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|uids| uids.split_whitespace().nth(1))
        .context("no effective uid in /proc/self/status")?;
    Ok(euid == "0")
}

/// Fails with `why` unless this process runs as root.
pub fn require_root(why: &str) -> Result<()> {
    if !is_root()? {
        bail!("{why}: run as root");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::display;

    #[test]
    fn display_quotes_only_what_needs_it() {
        let mut cmd = Command::new("dpkg-query");
        cmd.env("LLVM_PREFIX", "/tmp/a b")
            .args(["-W", "-f=${Status}", "it's", "fd00:200::11"]);
        assert_eq!(
            display(&cmd),
            r"LLVM_PREFIX='/tmp/a b' dpkg-query -W '-f=${Status}' 'it'\''s' fd00:200::11"
        );
    }
}
