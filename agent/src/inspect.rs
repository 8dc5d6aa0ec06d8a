//! `weft-agent bpf …`: print the datapath maps for people (table) or scripts (JSON).

use weft_agent::{
    cli::{BpfCommand, EndpointCommand, Output},
    datapath::Datapath,
};

pub fn bpf(datapath: &mut Datapath, command: &BpfCommand) -> anyhow::Result<()> {
    match *command {
        BpfCommand::Endpoint(EndpointCommand::List { output }) => {
            let rows = datapath.list_endpoints()?;
            if output == Output::Json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return Ok(());
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
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return Ok(());
            }
            println!("{:<22} {:>12} {:>14}", "REASON", "PACKETS", "BYTES");
            for r in rows {
                println!("{:<22} {:>12} {:>14}", r.reason, r.packets, r.bytes);
            }
        }
    }
    Ok(())
}
