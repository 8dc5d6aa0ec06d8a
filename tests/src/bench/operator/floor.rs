//! The operator benchmark's baselines, measured on a fresh emulator with no operator: the time
//! to merely store the CiliumNodes and list them back over HTTP (the floor: no operator can
//! serve nodes faster than the API server takes them in and shows them), and the same plus one
//! merge PATCH per node from as many keep-alive connections as the operator's writer keeps in
//! flight (the API work a perfect operator would do, by the simplest client). The client is a
//! few lines of HTTP/1.1 over `std::net`, so the baseline measures the emulator, not a client
//! library.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use serde_json::Value;

use super::http::Conn;
use crate::kube::Emulator;

/// Connections the write baseline uses: the operator writer's writes in flight.
pub const WRITERS: usize = 32;

/// What the baseline measured (medians of [`TRIALS`] runs, each on a fresh emulator).
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// Storing every CiliumNode and listing them back over HTTP.
    pub store_and_list: Duration,
    /// Storing every CiliumNode, then one merge PATCH per node from [`WRITERS`] connections.
    pub store_and_write: Duration,
}

/// Runs of each baseline; the median is kept.
pub const TRIALS: usize = 3;

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort_unstable();
    runs[runs.len() / 2]
}

/// One merge PATCH per node (`bodies[i]` for node `i`) from [`WRITERS`] keep-alive connections.
fn write_all(emu: &Emulator, bodies: &[Vec<u8>]) -> Result<()> {
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..WRITERS)
            .map(|w| {
                scope.spawn(move || -> Result<()> {
                    let mut conn = Conn::open(emu)?;
                    for (i, body) in bodies.iter().enumerate().skip(w).step_by(WRITERS) {
                        let url = format!("{PATH}/node-{i}");
                        let (code, answer) = conn.request("PATCH", &url, Some(body))?;
                        ensure!(
                            code == 200,
                            "PATCH node-{i} answered {code}: {}",
                            String::from_utf8_lossy(&answer)
                        );
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker
                .join()
                .map_err(|_| anyhow::anyhow!("a baseline writer panicked"))??;
        }
        Ok(())
    })
}

const PATH: &str = "/apis/cilium.io/v2/ciliumnodes";

/// Measure: `create` stores node `i`, `patch(i)` is its merge patch, `served` says whether a
/// stored node holds what the patch gave it.
///
/// # Errors
/// A request fails, or the emulator does not show what was stored and written.
pub fn measure(
    nodes: usize,
    create: impl Fn(&Emulator, usize),
    patch: impl Fn(usize) -> Value,
    served: impl Fn(&Value) -> bool,
) -> Result<Floor> {
    let bodies: Vec<Vec<u8>> = (0..nodes)
        .map(|i| serde_json::to_vec(&patch(i)))
        .collect::<Result<_, _>>()?;
    let (mut listed, mut written) = (Vec::new(), Vec::new());
    for _ in 0..TRIALS {
        let emu = Emulator::start();
        let mut conn = Conn::open(&emu)?;
        let started = Instant::now();
        for i in 0..nodes {
            create(&emu, i);
        }
        let (code, body) = conn.request("GET", PATH, None)?;
        listed.push(started.elapsed());
        ensure!(code == 200, "LIST answered {code}");
        let doc: Value = serde_json::from_slice(&body).context("the list's JSON")?;
        let items = doc["items"].as_array().map_or(0, Vec::len);
        ensure!(items == nodes, "listed {items} of {nodes}");

        let emu = Emulator::start();
        let started = Instant::now();
        for i in 0..nodes {
            create(&emu, i);
        }
        write_all(&emu, &bodies)?;
        written.push(started.elapsed());
        let unserved = emu
            .list("ciliumnodes")
            .iter()
            .filter(|n| !served(n))
            .count();
        ensure!(
            unserved == 0,
            "{unserved} nodes not served after the baseline's writes"
        );
    }
    Ok(Floor {
        store_and_list: median(listed),
        store_and_write: median(written),
    })
}
