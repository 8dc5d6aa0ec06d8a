//! `weft-agent bpf …`: print the datapath maps for people (table) or scripts (JSON).

use serde::Serialize;
use weft_agent::{
    cli::{BpfCommand, EndpointCommand, ListCommand, Output},
    datapath::Datapath,
};

fn json(rows: &impl Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(rows)?);
    Ok(())
}

pub fn bpf(datapath: &mut Datapath, command: &BpfCommand) -> anyhow::Result<()> {
    match *command {
        BpfCommand::Endpoint(EndpointCommand::List { output }) => {
            let rows = datapath.list_endpoints()?;
            if output == Output::Json {
                return json(&rows);
            }
            println!(
                "{:<40} {:>8} {:<18} {:<18} {:>9} {:>10} {:>6}",
                "IP", "IFINDEX", "POD MAC", "NODE MAC", "IDENTITY", "POOL ID", "FLAGS"
            );
            for r in rows {
                println!(
                    "{:<40} {:>8} {:<18} {:<18} {:>9} {:>10} {:>#6x}",
                    r.ip, r.ifindex, r.pod_mac, r.node_mac, r.identity, r.pool_id, r.flags
                );
            }
        }
        BpfCommand::Counters { output } => {
            let rows = datapath.counters()?;
            if output == Output::Json {
                return json(&rows);
            }
            println!("{:<22} {:>12} {:>14}", "REASON", "PACKETS", "BYTES");
            for r in rows {
                println!("{:<22} {:>12} {:>14}", r.reason, r.packets, r.bytes);
            }
        }
        BpfCommand::Ipcache(ListCommand::List { output }) => ipcache(datapath, output)?,
        BpfCommand::Masq(ListCommand::List { output }) => masq(datapath, output)?,
        BpfCommand::Nat(ListCommand::List { output }) => nat(datapath, output)?,
        BpfCommand::Netdev(ListCommand::List { output }) => netdev(datapath, output)?,
    }
    Ok(())
}

fn ipcache(datapath: &mut Datapath, output: Output) -> anyhow::Result<()> {
    let rows = datapath.list_ipcache()?;
    if output == Output::Json {
        return json(&rows);
    }
    println!(
        "{:<44} {:<28} {:<40} {:>5}",
        "PREFIX", "IDENTITY", "TUNNEL ENDPOINT", "FLAGS"
    );
    for r in rows {
        let identity = r.identity_name.map_or_else(
            || r.identity.to_string(),
            |n| format!("{} (reserved:{n})", r.identity),
        );
        let tunnel = r.tunnel_endpoint.map_or("-".to_owned(), |t| t.to_string());
        println!(
            "{:<44} {identity:<28} {tunnel:<40} {:>#5x}",
            r.prefix.to_string(),
            r.flags
        );
    }
    Ok(())
}

fn masq(datapath: &mut Datapath, output: Output) -> anyhow::Result<()> {
    let rows = datapath.list_masq()?;
    if output == Output::Json {
        return json(&rows);
    }
    println!("{:<12} {:<44} ORIGIN", "POOL", "CIDR");
    for r in rows {
        println!(
            "{:<12} {:<44} {}",
            r.pool,
            r.cidr.to_string(),
            r.origin.join(",")
        );
    }
    Ok(())
}

fn nat(datapath: &mut Datapath, output: Output) -> anyhow::Result<()> {
    let rows = datapath.list_nat()?;
    if output == Output::Json {
        return json(&rows);
    }
    // `addr:port`, IPv6 as `[addr]:port`.
    let at = |addr, port| std::net::SocketAddr::new(addr, port).to_string();
    let table: Vec<[String; 3]> = rows
        .iter()
        .map(|r| {
            [
                at(r.saddr, r.sport),
                at(r.daddr, r.dport),
                at(r.to_addr, r.to_port),
            ]
        })
        .collect();
    let w = table
        .iter()
        .flatten()
        .map(String::len)
        .max()
        .unwrap_or(0)
        .max(22);
    println!(
        "{:<6} {:<8} {:<w$} {:<w$} {:<w$} {:<8} {:>8}",
        "PROTO", "DIR", "SOURCE", "DESTINATION", "REWRITE TO", "KIND", "AGE(s)"
    );
    for (r, [source, destination, to]) in rows.iter().zip(table) {
        println!(
            "{:<6} {:<8} {source:<w$} {destination:<w$} {to:<w$} {:<8} {:>8}",
            r.proto, r.direction, r.kind, r.age_secs
        );
    }
    Ok(())
}

fn netdev(datapath: &mut Datapath, output: Output) -> anyhow::Result<()> {
    let rows = datapath.list_netdevs()?;
    if output == Output::Json {
        return json(&rows);
    }
    println!(
        "{:>8} {:<16} {:<16} {:<40}",
        "IFINDEX", "DEVICE", "MASQ IPV4", "MASQ IPV6"
    );
    for r in rows {
        let show = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
        println!(
            "{:>8} {:<16} {:<16} {:<40}",
            r.ifindex,
            show(r.ifname),
            show(r.masq_v4.map(|a| a.to_string())),
            show(r.masq_v6.map(|a| a.to_string()))
        );
    }
    Ok(())
}
