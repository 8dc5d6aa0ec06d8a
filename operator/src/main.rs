//! `weft-operator`: parse the command line, set up logging, run.

use std::process::ExitCode;

use clap::Parser as _;
use tracing_subscriber::EnvFilter;
use weft_operator::{cli::Cli, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("weft-operator: starting the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let text = format!("weft-operator: {}", weft_operator::chain(&error));
            tracing::error!("{text}");
            eprintln!("{text}");
            ExitCode::FAILURE
        }
    }
}
