//! Logging as Cilium users set it: `--log-format json` makes every line of `weft-agent`'s
//! stderr a JSON object, an error is printed once (no second `Error:` copy), and a `RUST_LOG`
//! that does not parse stops the agent with the reason instead of silencing it.

use std::process::{Command, Output};

use serde_json::Value;
use weft_tests::{bin_path, unique};

/// `weft-agent <args> ipam explain web --socket <nowhere>`: fails after logging is set up.
fn explain(args: &[&str], rust_log: &str) -> Output {
    let socket = std::env::temp_dir().join(unique("weft-no-agent-"));
    Command::new(bin_path("weft-agent"))
        .args(args)
        .args(["ipam", "explain", "web", "--socket"])
        .arg(&socket)
        .env("RUST_LOG", rust_log)
        .output()
        .expect("run weft-agent ipam explain")
}

#[test]
fn json_lines_and_the_error_once() {
    let out = explain(&["--log-format", "json"], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "explain with no agent failed: {stderr}"
    );
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(lines.len(), 1, "one line, the error:\n{stderr}");
    assert_eq!(lines[0]["level"], "ERROR", "{stderr}");
    let message = lines[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("weft-agent: ") && message.contains("is weft-agent running"),
        "{stderr}"
    );
}

#[test]
fn an_unparsable_rust_log_is_refused_with_the_reason() {
    let out = explain(&[], "infoo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "weft-agent: RUST_LOG=\"infoo\": \"infoo\" is not a level (trace, debug, info, warn, \
         error, off); a target needs one, e.g. infoo=debug"
    );
}
