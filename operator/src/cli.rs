//! `weft-operator`'s command line, in Cilium's operator vocabulary. Every setting is optional
//! here: a flag that is given wins over the same key in `--config-dir` (a mounted
//! cilium-config ConfigMap), which wins over the default ([`crate::config`] resolves them).
//! The setting flags are generated from the rows of `weft_cluster_ipam::operator_keys`
//! ([`KeyFlags`]; their help is the row's meaning); this file names no key.

use std::{collections::BTreeMap, path::PathBuf};

use clap::{ArgMatches, Args, Command, FromArgMatches, Parser, Subcommand};
use weft_cluster_ipam::operator_keys::KEYS;
use weft_k8s::config_ref::{clap_arg, clap_values};

/// weft's operator: hands out pod CIDRs (cluster-pool) and pool blocks (multi-pool) to
/// CiliumNodes, deletes the CiliumNodes of deleted nodes, and elects a leader.
#[derive(Debug, Clone, Default, Parser)]
#[command(name = "weft-operator", version)]
pub struct Cli {
    /// A one-off task instead of running the operator.
    #[command(subcommand)]
    pub task: Option<Task>,
    /// The settings given as flags.
    #[command(flatten)]
    pub keys: KeyFlags,
    /// A directory of one file per cilium-config key (a mounted ConfigMap).
    #[arg(long, env = "WEFT_OPERATOR_CONFIG_DIR", global = true)]
    pub config_dir: Option<PathBuf>,
    /// A kubeconfig; without it: `KUBECONFIG`, `~/.kube/config` or the in-cluster account.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The metric names `/metrics` serves: `weft` (`weft_operator_…`) or `cilium` (Cilium's
    /// `cilium_operator_…` where the meaning is the same, weft's for the rest).
    #[arg(long, env = "WEFT_METRICS_NAMING", default_value = "weft")]
    pub metrics_naming: weft_k8s::metrics_naming::Naming,
    /// `--debug`, `--log-level`, `--log-format` (Cilium's; the keys of the same names).
    #[command(flatten)]
    pub log: weft_k8s::telemetry::LogArgs,
}

/// A one-off task (the settings' flags, `--config-dir` and `--kubeconfig` apply to it too).
#[derive(Debug, Clone, Subcommand)]
pub enum Task {
    /// IPAM migrations.
    #[command(subcommand)]
    Migrate(Migration),
}

/// An IPAM migration.
#[derive(Debug, Clone, Subcommand)]
pub enum Migration {
    /// Cluster-pool → multi-pool: print, per CiliumNode, the blocks that would move into
    /// `ipam-default-ip-pool` and every refusal; exit 1 if a node would be refused. (The move
    /// itself is the operator's, with `--enable-cluster-pool-to-multi-pool-migration`.)
    ClusterPoolToMultiPool {
        /// Only report; write nothing (required: the operator does the move).
        #[arg(long, required = true)]
        dry_run: bool,
    },
}

/// The flags of the operator's settings that were given, by key (a list flag may have several
/// values).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyFlags {
    given: BTreeMap<&'static str, Vec<String>>,
}

impl KeyFlags {
    /// The values the flag of `key` was given (empty when it was not).
    #[must_use]
    pub fn given(&self, key: &str) -> &[String] {
        self.given.get(key).map_or(&[], Vec::as_slice)
    }
}

impl FromArgMatches for KeyFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = Self::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for row in &KEYS {
            let values = clap_values(row, matches);
            if !values.is_empty() {
                self.given.insert(row.key, values);
            }
        }
        Ok(())
    }
}

impl Args for KeyFlags {
    fn augment_args(command: Command) -> Command {
        KEYS.iter()
            .filter_map(clap_arg)
            .map(|arg| arg.global(true))
            .fold(command, Command::arg)
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}
