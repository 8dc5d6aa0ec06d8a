//! `weft-agent`: parse the command line, set up logging, run the command. Logging starts after
//! the configuration is read (`run` and `ipam simulate`: the config file or directory), so the
//! `debug`, `log-level` and `log-format` keys count from the first line. Every error is printed
//! once, with its chain: through the log once logging runs, on stderr before.

use std::net::IpAddr;

use anyhow::{Context as _, bail};
use weft_k8s::telemetry;
mod inspect;

use std::collections::BTreeMap;

use weft_agent::{
    cli::{
        CleanupArgs, Cli, CniCommand, Command, ConfigArgs, IpamCommand, Output, PodAdd, PodCommand,
    },
    cni::proto::{Request, Response},
    daemon::{Daemon, DaemonOptions, StoreSource},
    datapath::{Datapath, DatapathConfig, PodSpec, PoolIdPerFamily},
};

fn main() -> std::process::ExitCode {
    let cli = weft_agent::cli::parse();
    if let Command::Status { output, socket } = &cli.command {
        return status(socket, *output);
    }
    let keys = match &cli.command {
        Command::Run(args) => config_file(&args.config),
        Command::Ipam(IpamCommand::Simulate { config, .. }) => config_file(config),
        _ => Ok(BTreeMap::new()),
    };
    let rust_log = std::env::var("RUST_LOG").ok();
    let logging = keys.and_then(|keys| {
        telemetry::resolve(&cli.log, &keys, rust_log.as_deref())
            .and_then(|settings| telemetry::init(&settings))
            .map_err(|e| anyhow::anyhow!(weft_agent::error::chain(&e)))
    });
    if let Err(error) = logging {
        eprintln!("weft-agent: {error:#}");
        return std::process::ExitCode::FAILURE;
    }
    match start(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            let error: &(dyn std::error::Error + 'static) = error.as_ref();
            tracing::error!("weft-agent: {}", weft_agent::error::chain(error));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The runtime, and the command on it.
fn start(cli: Cli) -> anyhow::Result<()> {
    // CNI requests, netlink drivers, watches and writers run side by side; a few workers are
    // enough for a node's pod churn and keep the agent's footprint small.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(run(cli))
}

/// `weft-agent status`: print the report; exit 1 when unhealthy or not running.
fn status(socket: &std::path::Path, output: Output) -> std::process::ExitCode {
    match weft_agent::cni::query::agent_status(socket) {
        Ok(report) => {
            if output == Output::Json {
                match serde_json::to_string_pretty(&report) {
                    Ok(json) => println!("{json}"),
                    Err(e) => eprintln!("encoding the status: {e}"),
                }
            } else {
                print!("{}", report.render());
            }
            if report.healthy() {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("{error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = DatapathConfig {
        pin_dir: cli.pin_dir(),
        attach_mode: cli.attach_mode.into(),
    };
    match cli.command {
        Command::Run(args) => {
            if let Some(rules) = weft_agent::faults::init()? {
                tracing::warn!(
                    ?rules,
                    "{} is set: faults are injected on purpose; never set it outside tests",
                    weft_agent::faults::ENV
                );
            }
            let opts = DaemonOptions {
                node_name: weft_agent::cli::node_name(args.node_name)?,
                store: match args.store {
                    Some(dir) => StoreSource::Embedded(dir),
                    None => StoreSource::Kubernetes {
                        kubeconfig: args.kubeconfig,
                    },
                },
                health_addr: Some(args.health_addr),
                prometheus_addr: args.prometheus_serve_addr,
                metrics_naming: args.metrics_naming,
                state_dir: args.state_dir,
                socket: args.socket,
                delete_queue: args.delete_queue_dir,
                datapath: config,
                config_file: config_file(&args.config)?,
                config_flags: args.config.flags(),
                allow_unsupported_features: args.allow_unsupported_features,
            };
            Daemon::run(opts, shutdown_signal())
                .await
                .map_err(|e| anyhow::anyhow!(weft_agent::error::chain(&e)))?;
        }
        Command::Ipam(command) => ipam(command)?,
        Command::Pod(PodCommand::Add(add)) => {
            let mut datapath = Datapath::load(&config).context("loading the datapath")?;
            pod_add(&mut datapath, &add).await?;
        }
        Command::Pod(PodCommand::Del { id, ifname }) => {
            let mut datapath = Datapath::load(&config).context("loading the datapath")?;
            let removed = datapath.remove_pod(&id, &ifname).await?;
            println!(
                "{}",
                if removed {
                    "removed"
                } else {
                    "not found (nothing to do)"
                }
            );
        }
        Command::Bpf(command) => {
            let mut datapath =
                Datapath::open_pinned(&config).context("opening the pinned datapath")?;
            inspect::bpf(&mut datapath, &command)?;
        }
        Command::Cni(CniCommand::Install(args)) => {
            let options = weft_agent::cni::install::Options {
                bin_src: args.bin_src,
                bin_dir: args.bin_dir,
                conf_dir: args.conf_dir,
            };
            let report = weft_agent::cni::install::install(&options)
                .map_err(|e| anyhow::anyhow!(weft_agent::error::chain(&e)))?;
            print!("{report}");
        }
        Command::Cleanup(args) => cleanup(config.pin_dir, args).await?,
        Command::Status { .. } => unreachable!("handled before the runtime starts"),
    }
    Ok(())
}

/// `weft-agent ipam simulate` and `ipam explain`.
fn ipam(command: IpamCommand) -> anyhow::Result<()> {
    match command {
        IpamCommand::Simulate {
            store,
            node_name,
            state_dir,
            config,
        } => {
            let node_name = weft_agent::cli::node_name(node_name)?;
            let input = weft_agent::simulate::PlanInput {
                store: &store,
                node_name: &node_name,
                state_dir: state_dir.as_deref(),
            };
            let plan = weft_agent::simulate::plan(input, &config_file(&config)?, &config.flags())
                .map_err(|e| anyhow::anyhow!(weft_agent::error::chain(&e)))?;
            println!("{}", serde_json::to_string_pretty(&plan)?);
        }
        IpamCommand::Explain { pod, socket } => {
            match weft_agent::cni::client::ask(&socket, &Request::Explain { owner: pod.clone() }) {
                Ok(Response::Explained(lines)) => {
                    for line in lines {
                        println!("{pod} {line}");
                    }
                }
                Ok(Response::Error(e)) => bail!("{}\n{}", e.msg, e.details),
                Ok(other) => bail!("unexpected answer from the agent: {other:?}"),
                Err(e) => bail!(
                    "{}; is weft-agent running with --socket {}?",
                    weft_agent::error::chain(&e),
                    socket.display()
                ),
            }
        }
    }
    Ok(())
}

/// `weft-agent cleanup`: remove weft from this node and print what went.
async fn cleanup(pin_dir: std::path::PathBuf, args: CleanupArgs) -> anyhow::Result<()> {
    let options = weft_agent::cleanup::Options {
        pin_dir,
        state_dir: args.state_dir,
        socket: args.socket,
        delete_queue: args.delete_queue_dir,
        bin_dir: args.bin_dir,
        conf_dir: args.conf_dir,
    };
    let report = weft_agent::cleanup::cleanup(&options)
        .await
        .map_err(|e| anyhow::anyhow!(weft_agent::error::chain(&e)))?;
    print!("{report}");
    let failed = report.failed().count();
    if failed > 0 {
        bail!(
            "{failed} of {} cleanup steps failed (each says why above; the others ran): fix the \
             cause and run cleanup again, it carries on where it stopped",
            report.steps.len()
        );
    }
    Ok(())
}

async fn shutdown_signal() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// The config file or directory layer (`--config` / `--config-dir`).
fn config_file(args: &ConfigArgs) -> anyhow::Result<BTreeMap<String, String>> {
    weft_agent::config::file::load(args.config_dir.as_deref(), args.config.as_deref())
        .map_err(|e| anyhow::anyhow!(weft_agent::error::chain(&e)))
}

async fn pod_add(datapath: &mut Datapath, add: &PodAdd) -> anyhow::Result<()> {
    if add.ips.iter().any(IpAddr::is_ipv4) && add.gateway_v4.is_none() {
        bail!("--gateway-v4 is required with an IPv4 --ip (the node's router IP, e.g. 10.0.0.1)");
    }
    if add.ips.iter().any(IpAddr::is_ipv6) && add.gateway_v6.is_none() {
        bail!("--gateway-v6 is required with an IPv6 --ip (the node's router IP, e.g. fd00::1)");
    }
    let spec = PodSpec {
        container_id: &add.id,
        netns: &add.netns,
        ifname: &add.ifname,
        addrs: &add.ips,
        gateway_v4: add.gateway_v4,
        gateway_v6: add.gateway_v6,
        identity: add.identity,
        pool_id: PoolIdPerFamily::both(add.pool_id),
        flags: 0,
        mtu: add.mtu,
    };
    let iface = datapath.add_pod(&spec).await?;
    println!(
        "{}",
        serde_json::json!({
            "container_id": add.id,
            "host_ifname": weft_agent::datapath::host_ifname(&add.id, &add.ifname),
            "host_ifindex": iface.host_ifindex,
            "pod_ifindex": iface.pod_ifindex,
            "ips": add.ips,
        })
    );
    Ok(())
}
