//! `cargo xtask bench masq`: per-packet cost of `to_netdev` on established masqueraded flows
//! and of the other masquerade decisions, and of `from_netdev`'s reverse NAT, against the
//! empty classifier (`BPF_PROG_TEST_RUN`). Needs root.

use anyhow::bail;
use weft_tests::bench::{masq, prog::ProgOptions};

const USAGE: &str = "use [--repeat N] [--trials N]";

fn main() -> anyhow::Result<()> {
    let mut opts = ProgOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--repeat" | "--trials" => {
                let n: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                if n == 0 {
                    bail!("{arg} needs a positive integer");
                }
                if arg == "--repeat" {
                    opts.repeat = n;
                } else {
                    opts.trials = n as usize;
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}: {USAGE}"),
        }
    }
    weft_tests::require_root();
    masq::run(&opts);
    Ok(())
}
