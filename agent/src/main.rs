//! `weft-agent`: parse the command line, set up logging, run the command.

use std::net::IpAddr;

use anyhow::{Context as _, bail};
use clap::Parser as _;
use tracing_subscriber::EnvFilter;
use weft_agent::{
    cli::{BpfCommand, Cli, Command, EndpointCommand, Output, PodAdd, PodCommand},
    datapath::{Datapath, DatapathConfig, PodSpec},
};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = DatapathConfig {
        pin_dir: cli.pin_dir,
        attach_mode: cli.attach_mode.into(),
    };
    let mut datapath = Datapath::load(&config).context("loading the datapath")?;
    match cli.command {
        Command::Run => {
            tracing::info!(pin_dir = %config.pin_dir.display(), "datapath ready");
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            tracing::info!("stopping; pinned maps and links stay, pods keep forwarding");
        }
        Command::Pod(PodCommand::Add(add)) => pod_add(&mut datapath, &add).await?,
        Command::Pod(PodCommand::Del { id, ifname }) => {
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
        Command::Bpf(BpfCommand::Endpoint(EndpointCommand::List { output })) => {
            let rows = datapath.list_endpoints()?;
            if output == Output::Json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                println!(
                    "{:<40} {:>8} {:<18} {:<18} {:>9} {:>5} {:>6}",
                    "IP", "IFINDEX", "POD MAC", "NODE MAC", "IDENTITY", "POOL", "FLAGS"
                );
                for r in rows {
                    println!(
                        "{:<40} {:>8} {:<18} {:<18} {:>9} {:>5} {:>#6x}",
                        r.ip, r.ifindex, r.pod_mac, r.node_mac, r.identity, r.pool_id, r.flags
                    );
                }
            }
        }
        Command::Bpf(BpfCommand::Counters { output }) => {
            let rows = datapath.counters()?;
            if output == Output::Json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                println!("{:<22} {:>12} {:>14}", "REASON", "PACKETS", "BYTES");
                for r in rows {
                    println!("{:<22} {:>12} {:>14}", r.reason, r.packets, r.bytes);
                }
            }
        }
    }
    Ok(())
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
        pool_id: add.pool_id,
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
