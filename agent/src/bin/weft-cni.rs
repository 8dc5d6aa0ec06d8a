//! `weft-cni`: the CNI plugin container runtimes call. Reads `CNI_*` and the network
//! configuration on stdin, asks the local weft-agent, prints the result or the CNI error.

use std::io::{Read as _, Write as _};

fn main() {
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let mut stdin = Vec::new();
    // An unreadable stdin is treated as empty: the decode step reports it with code 6.
    let _ = std::io::stdin().read_to_end(&mut stdin);
    let outcome = weft_agent::cni::client::run(&env, &stdin);
    if !outcome.stdout.is_empty() {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", outcome.stdout);
    }
    std::process::exit(outcome.exit_code);
}
