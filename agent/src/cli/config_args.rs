//! The cilium-config keys `weft-agent run` also takes as flags, and the config file or
//! directory they come from; [`ConfigArgs::flags`] hands them to the configuration as one layer.
//! The key flags are generated from the rows of [`crate::config::reference::REFERENCE`] that
//! have one (their help is the row's meaning); this file names no key.

use std::{collections::BTreeMap, path::PathBuf};

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches, builder::PathBufValueParser};
use weft_k8s::config_ref::{clap_arg, clap_values};

use crate::config::reference::REFERENCE;

/// The id of `--config-dir`.
const CONFIG_DIR: &str = "config_dir";
/// The id of `--config`.
const CONFIG: &str = "config";

/// cilium-config keys: a directory of one file per key or a YAML/JSON map, and the same keys
/// as flags (flags win). A boolean flag alone means true, as in Cilium (`--enable-ipv6`);
/// `--enable-ipv6=false` and `--enable-ipv6 false` set it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigArgs {
    /// Directory with one file per key (a mounted ConfigMap).
    pub config_dir: Option<PathBuf>,
    /// A YAML or JSON map of keys, or the cilium-config ConfigMap manifest (its `data` is used).
    pub config: Option<PathBuf>,
    /// The key flags given, by key.
    given: BTreeMap<String, String>,
}

impl ConfigArgs {
    /// The flags that were given, as cilium-config keys.
    #[must_use]
    pub fn flags(&self) -> BTreeMap<String, String> {
        self.given.clone()
    }
}

impl FromArgMatches for ConfigArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = Self::default();
        args.update_from_arg_matches(matches)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        if let Some(dir) = matches.get_one::<PathBuf>(CONFIG_DIR) {
            self.config_dir = Some(dir.clone());
        }
        if let Some(file) = matches.get_one::<PathBuf>(CONFIG) {
            self.config = Some(file.clone());
        }
        for row in &REFERENCE {
            if let Some(value) = clap_values(&row.doc, matches).pop() {
                self.given.insert(row.name().to_owned(), value);
            }
        }
        Ok(())
    }
}

impl Args for ConfigArgs {
    fn augment_args(command: Command) -> Command {
        let command = command
            .arg(
                Arg::new(CONFIG_DIR)
                    .long("config-dir")
                    .env("WEFT_CONFIG_DIR")
                    .value_name("CONFIG_DIR")
                    .value_parser(PathBufValueParser::new())
                    .help("Directory with one file per key (a mounted ConfigMap)"),
            )
            .arg(
                Arg::new(CONFIG)
                    .long("config")
                    .value_name("CONFIG")
                    .value_parser(PathBufValueParser::new())
                    .help(
                        "A YAML or JSON map of keys, or the cilium-config ConfigMap manifest (its \
                         `data` is used)",
                    ),
            );
        REFERENCE
            .iter()
            .filter_map(|row| clap_arg(&row.doc))
            .fold(command, Command::arg)
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}
