//! `kube-emulator`: the Kubernetes API server emulator of `weft_tests::kube` as a program, for
//! tests whose clients run in other processes (the operator, kubectl). It serves every built-in
//! type (core v1, Leases, the Cilium CRDs), writes a kubeconfig if asked, then prints
//! `listening on <address>` as the first line of stdout, and serves until SIGTERM or SIGINT,
//! when it stops and exits 0. The store lives in memory: every start is an empty cluster.
//!
//! Requests with a token must carry the right one (else 401). Requests without credentials are
//! let in unless `--require-token` is given: kubectl (client-go) sends a kubeconfig's token
//! only over TLS, and the emulator speaks plain HTTP, so kubectl always comes anonymously.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::Context as _;
use clap::{Parser, builder::NonEmptyStringValueParser};
use weft_tests::{
    emulator::program::{self, Program, write_atomically},
    kube::Emulator,
};

/// Serve the Kubernetes API emulator until SIGTERM or SIGINT.
#[derive(Debug, Parser)]
#[command(name = "kube-emulator", version)]
struct Args {
    /// Address to listen on; port 0 picks a free port (the first line of stdout names it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Write a kubeconfig here (server URL, bearer token, namespace `default`) before the
    /// address line is printed.
    #[arg(long, value_name = "PATH")]
    kubeconfig_out: Option<PathBuf>,
    /// The bearer token clients must send [default: weft-emulator-token].
    #[arg(long, value_parser = NonEmptyStringValueParser::new())]
    token: Option<String>,
    /// Refuse requests without the token (401) instead of letting them in anonymously; kubectl
    /// then cannot talk to it (it sends no credentials over plain HTTP).
    #[arg(long)]
    require_token: bool,
}

fn main() -> anyhow::Result<()> {
    program::run(run(Args::parse()))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let program = Program::new("kube-emulator")?;
    let mut builder = Emulator::builder().listen(args.listen);
    if let Some(token) = &args.token {
        builder = builder.token(Some(token));
    }
    if !args.require_token {
        builder = builder.allow_anonymous();
    }
    let emulator = builder.try_start().context("starting the emulator")?;
    if let Some(path) = &args.kubeconfig_out {
        write_atomically(path, &emulator.kubeconfig(&emulator.url()))?;
    }
    program.announce(&format!("listening on {}", emulator.addr()))?;
    program.serve_until_stopped(emulator).await;
    Ok(())
}
