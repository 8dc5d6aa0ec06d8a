//! The operator benchmark's last table (issue 29): for every size run, per mode, the time until
//! every node was served against the store + PATCH floor of the same size, the operator's CPU
//! time per node and its peak RSS; then the slope of the CPU time per node from the smallest
//! size to the largest (1.0x: every node costs the same however many there are). Prints only.

use super::{
    ModeResult,
    report::{mib, secs},
};

/// Issue 29's targets: every node served within this multiple of the store + PATCH floor…
const TARGET_FLOOR_RATIO: f64 = 2.0;
/// …the CPU time per node at the largest size within this multiple of that at the smallest…
const TARGET_SLOPE: f64 = 1.2;
/// …and the peak RSS at the largest size below this.
const TARGET_RSS_MIB: f64 = 40.0;

/// Time until every node was served, over the store + PATCH floor.
fn floor_ratio(r: &ModeResult) -> f64 {
    r.burst.all_served().as_secs_f64() / r.floor.store_and_write.as_secs_f64()
}

/// The operator's CPU time per node of the burst, milliseconds.
fn cpu_ms_per_node(r: &ModeResult) -> f64 {
    r.burst.cpu_s * 1000.0 / f64::from(u32::try_from(r.nodes).unwrap_or(u32::MAX))
}

/// The operator's peak RSS over the whole run of one size, MiB.
fn rss_peak(r: &ModeResult) -> f64 {
    mib(r.churn.proc_after.hwm_kib)
}

fn verdict(target: &str, met: impl Iterator<Item = bool>) -> String {
    let each: Vec<&str> = met.map(|m| if m { "met" } else { "MISSED" }).collect();
    format!("{target}: {}", each.join("/"))
}

/// Print the table for `sizes` (one list of results per size, the modes in the same order).
pub fn print(sizes: &[Vec<ModeResult>]) {
    let Some(first) = sizes.first() else {
        return;
    };
    let mut rows: Vec<(String, Vec<String>, String)> = Vec::new();
    for results in sizes {
        let n = results.first().map_or(0, |r| r.nodes);
        rows.push((
            format!("{n} nodes: every node served"),
            results
                .iter()
                .map(|r| {
                    format!(
                        "{} = {:.1}x floor {}",
                        secs(r.burst.all_served()),
                        floor_ratio(r),
                        secs(r.floor.store_and_write)
                    )
                })
                .collect(),
            verdict(
                &format!("<= {TARGET_FLOOR_RATIO}x floor"),
                results.iter().map(|r| floor_ratio(r) <= TARGET_FLOOR_RATIO),
            ),
        ));
        rows.push((
            "  operator CPU per node".to_owned(),
            results
                .iter()
                .map(|r| format!("{:.3} ms ({:.2} s)", cpu_ms_per_node(r), r.burst.cpu_s))
                .collect(),
            String::new(),
        ));
        rows.push((
            "  operator RSS peak (HWM)".to_owned(),
            results
                .iter()
                .map(|r| format!("{:.1} MiB", rss_peak(r)))
                .collect(),
            String::new(),
        ));
    }
    if let Some(last) = sizes.last().filter(|_| sizes.len() > 1) {
        let (n0, n1) = (
            first.first().map_or(0, |r| r.nodes),
            last.first().map_or(0, |r| r.nodes),
        );
        let slopes: Vec<f64> = first
            .iter()
            .zip(last)
            .map(|(a, b)| cpu_ms_per_node(b) / cpu_ms_per_node(a))
            .collect();
        rows.push((
            format!("CPU per node at {n1} / at {n0}"),
            slopes.iter().map(|s| format!("{s:.2}x")).collect(),
            verdict(
                &format!("<= {TARGET_SLOPE}x"),
                slopes.iter().map(|s| *s <= TARGET_SLOPE),
            ),
        ));
    }
    if let Some(last) = sizes.last() {
        let n = last.first().map_or(0, |r| r.nodes);
        rows.push((
            format!("RSS peak at {n} nodes"),
            last.iter()
                .map(|r| format!("{:.1} MiB", rss_peak(r)))
                .collect(),
            verdict(
                &format!("< {TARGET_RSS_MIB} MiB"),
                last.iter().map(|r| rss_peak(r) < TARGET_RSS_MIB),
            ),
        ));
    }

    let label = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let width = rows
        .iter()
        .flat_map(|r| r.1.iter().map(String::len))
        .max()
        .unwrap_or(0)
        .max(12);
    println!(
        "weft-operator at every size (the floor is store + 1 PATCH/node, measured at each size in \
         the same run; CPU time is the burst's, read in clock ticks)"
    );
    print!("{:<label$}", "");
    for r in first {
        print!("  {:<width$}", r.mode.name());
    }
    println!("  target (issue 29)");
    for (name, values, target) in &rows {
        print!("{name:<label$}");
        for v in values {
            print!("  {v:<width$}");
        }
        println!("  {}", target.trim_end());
    }
}
