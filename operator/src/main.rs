//! `weft-operator`: parse the command line, read the config directory, set up logging from both
//! (logging starts after the configuration is resolved, so the `debug`, `log-level` and
//! `log-format` keys count from the first line), run (or the one-off task asked for:
//! `migrate cluster-pool-to-multi-pool --dry-run`). Every error is printed once, with its
//! chain: through the log once logging runs, on stderr before.

use std::{collections::BTreeMap, process::ExitCode};

use clap::Parser as _;
use weft_k8s::{config_values::read_config_dir, telemetry};
use weft_operator::{
    chain,
    cli::{Cli, Migration, Task},
    migrate, run,
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let file = match &cli.config_dir {
        Some(dir) => match read_config_dir(dir) {
            Ok(file) => file,
            Err(error) => {
                eprintln!("weft-operator: {}", chain(&error));
                return ExitCode::FAILURE;
            }
        },
        None => BTreeMap::new(),
    };
    let rust_log = std::env::var("RUST_LOG").ok();
    if let Err(error) = telemetry::resolve(&cli.log, &file, rust_log.as_deref())
        .and_then(|settings| telemetry::init(&settings))
    {
        eprintln!("weft-operator: {}", chain(&error));
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!("weft-operator: starting the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(Task::Migrate(Migration::ClusterPoolToMultiPool { .. })) = &cli.task {
        // 0: every node would move; 1: a node would be refused; 2: the dry run failed.
        let report = runtime.block_on(migrate::dry_run_cli(&cli, &file, &mut std::io::stdout()));
        runtime.shutdown_timeout(run::EXIT_TIMEOUT);
        return match report {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(error) => {
                eprintln!("weft-operator: {}", chain(&error));
                ExitCode::from(2)
            }
        };
    }
    let outcome = runtime.block_on(run::run(cli, file));
    // Tasks still blocked (a request in flight) must not hold the exit up.
    runtime.shutdown_timeout(run::EXIT_TIMEOUT);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("weft-operator: {}", chain(&error));
            ExitCode::FAILURE
        }
    }
}
