//! Renders `docs/configuration.md` from the code: the agent's cilium-config keys
//! (`weft_agent::config::reference`), the flags of `weft-agent run` that are no keys (its clap
//! definition), and the operator's settings (`weft_cluster_ipam::operator_keys` and its clap
//! definition). Written by `cargo xtask gen-config-ref`; `tests/tests/docs/` fails while the
//! checked-in file differs. Pure: returns the text, writes nothing.

use std::fmt::Write as _;

use clap::CommandFactory as _;
use weft_agent::config::reference as agent;
use weft_cluster_ipam::operator_keys as operator;

/// The command that regenerates the file.
pub const COMMAND: &str = "cargo xtask gen-config-ref";

/// The whole page.
#[must_use]
pub fn render() -> String {
    let mut out = String::new();
    out.push_str(HEADER);
    agent_keys(&mut out);
    agent_flags(&mut out);
    operator_keys(&mut out);
    operator_flags(&mut out);
    out
}

const HEADER: &str =
    "<!-- Generated from the code by `cargo xtask gen-config-ref`; do not edit. -->
# Configuration reference

Both programs read Cilium's `cilium-config` keys. `weft-agent run` reads them from
`--config-dir` (a mounted ConfigMap: one file per key) or `--config` (a YAML or JSON map), then
the node's CiliumNodeConfig `defaults`, then flags of the same name: each layer wins over the
one before. `--config` also takes the whole ConfigMap manifest as `kubectl -n kube-system get
cm cilium-config -o yaml` prints it: its `data` is used, and an info line says so; any other
manifest or a file that is no map is refused, naming the file. `weft-operator` reads each
setting from its flag, else from the same key in `--config-dir`, else the default. One
ConfigMap can serve Cilium and weft: the agent judges each of Cilium's keys it does not read
(ignored as harmless, or refused because running without it would break traffic or security;
[cilium-features.md](cilium-features.md) has the table), and lists keys nobody knows in one
warning at start, a misspelt one with the key it is closest to, e.g.
`ipam-multipool-pre-allocation (config file; did you mean ipam-multi-pool-pre-allocation?)`.
A bad value stops start-up, before anything is served, with the key and what it accepts, e.g.
`invalid value \"maybe\" for enable-ipv6: expected true or false`.

Values are read as Cilium reads them: booleans `true`/`false` (also `1`/`0`, `t`/`f`,
`yes`/`no`, in any case), Go durations (`15s`, `500ms`, `1m30s`). A boolean flag alone means
true, as in Cilium: `--enable-ipv6` is `--enable-ipv6=true`.

";

/// A table cell: inline code when `code`, with `|` escaped.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn code(text: &str) -> String {
    format!("`{}`", cell(text))
}

fn default_cell(default: agent::DefaultValue) -> String {
    match default {
        agent::DefaultValue::Value(v) => code(v),
        agent::DefaultValue::Empty(meaning) => format!("empty: {}", cell(meaning)),
    }
}

/// The long flags of a clap command (help and version left out).
fn longs(command: &clap::Command) -> Vec<String> {
    command
        .get_arguments()
        .filter_map(|arg| arg.get_long().map(str::to_owned))
        .filter(|long| long != "help" && long != "version")
        .collect()
}

fn agent_keys(out: &mut String) {
    let cli = weft_agent::cli::Cli::command();
    let run = cli
        .find_subcommand("run")
        .expect("weft-agent has a run subcommand");
    let mut flags = longs(run);
    // Global flags (the logging ones) are taken by `run` too.
    flags.extend(
        cli.get_arguments()
            .filter(|arg| arg.is_global_set())
            .filter_map(|arg| arg.get_long().map(str::to_owned)),
    );
    out.push_str(
        "## weft-agent: cilium-config keys\n\n\
         *modes*: the IPAM modes that read the key. *store*: `kubernetes` (without `--store`), \
         `single-host` (with `--store`) or both. *flag*: whether `weft-agent run` also takes \
         it as `--<key>`.\n\n\
         | key | default | modes | store | flag | Cilium | meaning |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for row in &agent::REFERENCE {
        let doc = &row.doc;
        let modes = match doc.modes {
            agent::Modes::All => "every".to_owned(),
            agent::Modes::Only(modes) => modes
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        };
        let store = match row.stores {
            agent::Stores::Both => "both",
            agent::Stores::Kubernetes => "kubernetes",
            agent::Stores::Embedded => "single-host",
        };
        let flag = if flags.iter().any(|f| f == doc.key) {
            "yes"
        } else {
            "key only"
        };
        let cilium = match doc.cilium {
            agent::Cilium::Agent => format!("cilium-agent `{}`", doc.key),
            agent::Cilium::Operator => format!("cilium-operator `{}`", doc.key),
            agent::Cilium::Weft(instead) => format!("weft's ({})", cell(instead)),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {modes} | {store} | {flag} | {cilium} | {} |",
            code(doc.key),
            default_cell(doc.default),
            cell(doc.meaning),
        );
    }
    out.push('\n');
}

/// One row per long flag of `command` that `skip` does not reject.
fn flag_rows(out: &mut String, command: &clap::Command, skip: &dyn Fn(&str) -> bool) {
    for arg in command.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if long == "help" || long == "version" || skip(long) {
            continue;
        }
        let env = arg
            .get_env()
            .map_or_else(|| "—".to_owned(), |e| code(&e.to_string_lossy()));
        let default = arg
            .get_default_values()
            .iter()
            .map(|v| code(&v.to_string_lossy()))
            .collect::<Vec<_>>();
        let default = if default.is_empty() {
            "—".to_owned()
        } else {
            default.join(", ")
        };
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        let mut flag = code(&format!("--{long}"));
        for alias in arg.get_visible_aliases().unwrap_or_default() {
            let _ = write!(flag, " (Cilium's {})", code(&format!("--{alias}")));
        }
        let _ = writeln!(out, "| {flag} | {env} | {default} | {} |", cell(&help));
    }
}

fn agent_flags(out: &mut String) {
    let cli = weft_agent::cli::Cli::command();
    let run = cli
        .find_subcommand("run")
        .expect("weft-agent has a run subcommand");
    out.push_str(
        "## weft-agent run: flags that are not keys\n\n\
         | flag | environment | default | meaning |\n\
         |---|---|---|---|\n",
    );
    let is_key = |long: &str| agent::lookup(long).is_some();
    flag_rows(out, &cli, &is_key);
    flag_rows(out, run, &is_key);
    out.push('\n');
}

fn operator_keys(out: &mut String) {
    out.push_str(
        "## weft-operator: flags and keys\n\n\
         Each is a flag `--<key>` and a key of `--config-dir`. List values take several values \
         separated by commas or the flag given more than once; in the ConfigMap they are \
         separated by spaces, as in Cilium's. See [operator.md](operator.md) and \
         [azure.md](azure.md) for what they do.\n\n\
         | key | default | modes | Cilium | meaning |\n\
         |---|---|---|---|---|\n",
    );
    for doc in &operator::KEYS {
        let modes = match doc.modes {
            operator::Modes::All => "every".to_owned(),
            operator::Modes::Only(modes) => modes
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        };
        let cilium = match doc.cilium {
            operator::Cilium::Operator => format!("cilium-operator `{}`", doc.key),
            operator::Cilium::Weft(instead) => format!("weft's ({})", cell(instead)),
            operator::Cilium::Agent => format!("cilium-agent `{}`", doc.key),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {modes} | {cilium} | {} |",
            code(doc.key),
            default_cell(doc.default),
            cell(doc.meaning),
        );
    }
    out.push('\n');
}

fn operator_flags(out: &mut String) {
    let cli = weft_operator::cli::Cli::command();
    out.push_str(
        "## weft-operator: flags that are not keys\n\n\
         | flag | environment | default | meaning |\n\
         |---|---|---|---|\n",
    );
    flag_rows(out, &cli, &|long| operator::lookup(long).is_some());
}
