//! The operator benchmark's table: one column per mode, the floors, each phase's times, ratios,
//! writes per node, memory and CPU time, the targets beside them. Prints only.

use std::time::Duration;

use super::{
    CLUSTER_MASK, ModeResult, OperatorOptions, POOLS, PRE_ALLOCATE, TARGET_RSS_MIB, TARGET_SECONDS,
    TARGET_WRITES, floor, phase::Phase,
};

#[expect(clippy::cast_precision_loss, reason = "KiB counts far below 2^52")]
pub(super) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub(super) fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

pub(super) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// Rows of label, one value per mode, and the target column.
struct Table<'a> {
    results: &'a [ModeResult],
    rows: Vec<(String, Vec<String>, String)>,
}

impl<'a> Table<'a> {
    /// A row without a target.
    fn row(&mut self, label: &str, value: impl Fn(&'a ModeResult) -> String) {
        self.target(label, value, "", |_| true);
    }

    /// A row with a note in the target column.
    fn noted(&mut self, label: &str, value: impl Fn(&'a ModeResult) -> String, note: &str) {
        self.row(label, value);
        if let Some(last) = self.rows.last_mut() {
            note.clone_into(&mut last.2);
        }
    }

    /// A row with a target: `met` says for each mode whether it is met.
    fn target(
        &mut self,
        label: &str,
        value: impl Fn(&'a ModeResult) -> String,
        target: &str,
        met: impl Fn(&'a ModeResult) -> bool,
    ) {
        let values = self.results.iter().map(&value).collect();
        let verdict = if target.is_empty() {
            String::new()
        } else {
            let each: Vec<&str> = self
                .results
                .iter()
                .map(|r| if met(r) { "met" } else { "MISSED" })
                .collect();
            format!("{target}: {}", each.join("/"))
        };
        self.rows.push((label.to_owned(), values, verdict));
    }

    fn print(&self) {
        let label = self.rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let width = self
            .rows
            .iter()
            .flat_map(|r| r.1.iter().map(String::len))
            .max()
            .unwrap_or(0)
            .max(12);
        print!("{:<label$}", "");
        for r in self.results {
            print!("  {:<width$}", r.mode.name());
        }
        println!("  target (issue 13)");
        for (name, values, target) in &self.rows {
            print!("{name:<label$}");
            for v in values {
                print!("  {v:<width$}");
            }
            println!("  {}", target.trim_end());
        }
    }
}

fn writes(p: &Phase) -> String {
    format!("{:.2} ({}+{})", p.writes_per_node(), p.writes.0, p.writes.1)
}

fn burst_rows(t: &mut Table, n: usize) {
    t.target(
        &format!("{n} created: every node served"),
        |r| secs(r.burst.all_served()),
        &format!("< {TARGET_SECONDS} s"),
        |r| r.burst.all_served().as_secs_f64() < TARGET_SECONDS,
    );
    t.row("  first / median node served", |r| {
        format!(
            "{} / {}",
            ms(r.burst.quantile(0.0)),
            ms(r.burst.quantile(0.5))
        )
    });
    t.row("  x floor (store + list)", |r| {
        let ratio = r.burst.all_served().as_secs_f64() / r.floor.store_and_list.as_secs_f64();
        format!("{ratio:.1}x")
    });
    t.row("  x floor (store + PATCH)", |r| {
        let ratio = r.burst.all_served().as_secs_f64() / r.floor.store_and_write.as_secs_f64();
        format!("{ratio:.1}x")
    });
    t.target(
        "  API writes per node (spec+status)",
        |r| writes(&r.burst),
        &format!("<= {TARGET_WRITES}"),
        |r| r.burst.writes_per_node() <= TARGET_WRITES,
    );
    t.row("  operator RSS idle -> after (x idle)", |r| {
        let (idle, after) = (mib(r.idle.rss_kib), mib(r.burst.proc_after.rss_kib));
        format!("{idle:.1} -> {after:.1} MiB ({:.2}x)", after / idle)
    });
    t.row("  operator CPU time", |r| {
        let per_node = r.burst.cpu_s * 1000.0 / f64::from(u32::try_from(n).unwrap_or(u32::MAX));
        format!("{:.2} s ({per_node:.2} ms/node)", r.burst.cpu_s)
    });
}

fn churn_rows(t: &mut Table, c: usize) {
    t.target(
        &format!("{c} deleted + {c} added: new served"),
        |r| secs(r.churn.all_served()),
        &format!("< {TARGET_SECONDS} s"),
        |r| r.churn.all_served().as_secs_f64() < TARGET_SECONDS,
    );
    t.row("  old CiliumNodes deleted by the operator", |r| {
        let at = r.churn.progress.gone_at.map_or_else(|| "-".into(), secs);
        format!("{at} ({} DELETEs)", r.churn.deletes)
    });
    t.target(
        "  API writes per new node (spec+status)",
        |r| writes(&r.churn),
        &format!("<= {TARGET_WRITES}"),
        |r| r.churn.writes_per_node() <= TARGET_WRITES,
    );
    t.row("  operator CPU time", |r| format!("{:.2} s", r.churn.cpu_s));
}

fn end_rows(t: &mut Table) {
    t.target(
        "operator RSS at the end / peak (HWM)",
        |r| {
            let p = r.churn.proc_after;
            format!("{:.1} / {:.1} MiB", mib(p.rss_kib), mib(p.hwm_kib))
        },
        &format!("< {TARGET_RSS_MIB} MiB"),
        |r| mib(r.churn.proc_after.hwm_kib) < TARGET_RSS_MIB,
    );
    t.target(
        "times a block was held by two nodes",
        |r| {
            let (b, c) = (&r.burst.progress.holders, &r.churn.progress.holders);
            let example = b.first_double.as_ref().or(c.first_double.as_ref());
            format!(
                "{} in {} states{}",
                b.doubles + c.doubles,
                b.states + c.states,
                example.map_or_else(String::new, |e| format!(": {e}"))
            )
        },
        "0, every watch event checked",
        |r| r.burst.progress.holders.doubles + r.churn.progress.holders.doubles == 0,
    );
    t.row("served blocks that changed afterwards", |r| {
        (r.burst.moved + r.churn.moved).to_string()
    });
    t.row("warnings in the operator's log", |r| {
        r.log_warnings.to_string()
    });
}

/// Print the table for `results` (one per mode).
pub fn print(opts: &OperatorOptions, n: usize, results: &[ModeResult]) {
    let c = opts.churn;
    let mut t = Table {
        results,
        rows: Vec::new(),
    };
    t.noted(
        "floor: store + list, no operator",
        |r| ms(r.floor.store_and_list),
        "baseline",
    );
    t.noted(
        &format!("floor: store + 1 PATCH/node ({} conns)", floor::WRITERS),
        |r| ms(r.floor.store_and_write),
        "baseline",
    );
    burst_rows(&mut t, n);
    churn_rows(&mut t, c);
    end_rows(&mut t);
    println!(
        "weft-operator: {n} CiliumNodes created at once, then {c} deleted and {c} added (release \
         build, Kubernetes API emulator in this process over loopback HTTP)"
    );
    t.print();
    println!(
        "cluster-pool: /{CLUSTER_MASK} blocks of {}; multi-pool: pools {} and {} (/{} blocks), \
         {PRE_ALLOCATE} addresses requested per pool per node",
        opts.cluster_cidr, POOLS[0].1, POOLS[1].1, POOLS[0].2
    );
    println!(
        "times are from the first create to the watch event that showed it; floors are medians of \
         {} runs on fresh emulators with no operator; writes are counted {:?} after the last \
         node was served",
        floor::TRIALS,
        super::SETTLE
    );
}
