//! The vocabulary of a program's configuration table: what each row of `weft-agent`'s and
//! `weft-operator`'s key tables says about a key for the user (its default, the IPAM modes that
//! read it, Cilium's equivalent, a one-line meaning), and the shape of the flag it also is.
//! Generic over the program's IPAM mode enum. Data only: it parses no value and knows no key.

/// A key's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultValue {
    /// This value; resolving it gives the same configuration as leaving the key out.
    Value(&'static str),
    /// Empty (unset), which means what the text says (resolving an empty value changes nothing).
    Empty(&'static str),
}

impl DefaultValue {
    /// The value to give for the default: the text of [`Self::Value`], else empty.
    #[must_use]
    pub const fn as_given(self) -> &'static str {
        match self {
            Self::Value(value) => value,
            Self::Empty(_) => "",
        }
    }
}

/// Which IPAM modes (of the program's enum `M`) read a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modes<M: 'static> {
    /// Every mode.
    All,
    /// Only these.
    Only(&'static [M]),
}

/// Cilium's equivalent of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cilium {
    /// The same key of `cilium-agent`, with the same meaning.
    Agent,
    /// The same key (and flag) of `cilium-operator`, with the same meaning.
    Operator,
    /// weft's own; the text says what Cilium does instead.
    Weft(&'static str),
}

/// How a key is also given on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// Not a flag: only a configuration key.
    None,
    /// `--<key> <value>` (or `--<key>=<value>`).
    Value,
    /// A boolean: `--<key>` alone means true; `--<key>=false` sets it (and, unless
    /// `require_equals`, `--<key> false`).
    Switch {
        /// Only `--<key>=<value>` gives a value.
        require_equals: bool,
    },
    /// A list: the flag may be repeated; `delimiter` also separates values in one.
    List {
        /// The separator inside one value, if any.
        delimiter: Option<char>,
    },
}

/// One key's documentation and flag shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyDoc<M: 'static> {
    /// The configuration key, and the flag `--<key>` where [`Self::flag`] says there is one.
    pub key: &'static str,
    /// Its default.
    pub default: DefaultValue,
    /// The IPAM modes that read it.
    pub modes: Modes<M>,
    /// Cilium's equivalent.
    pub cilium: Cilium,
    /// What it does, in one line (also the flag's help).
    pub meaning: &'static str,
    /// The flag it also is.
    pub flag: Flag,
    /// The environment variable the flag reads, if any.
    pub env: Option<&'static str>,
}

impl<M> KeyDoc<M> {
    /// A row with no flag and no environment variable.
    #[must_use]
    pub const fn new(
        key: &'static str,
        default: DefaultValue,
        modes: Modes<M>,
        cilium: Cilium,
        meaning: &'static str,
    ) -> Self {
        Self {
            key,
            default,
            modes,
            cilium,
            meaning,
            flag: Flag::None,
            env: None,
        }
    }

    /// The same row, also the flag `flag`.
    #[must_use]
    pub const fn flag(self, flag: Flag) -> Self {
        Self { flag, ..self }
    }

    /// The same row, its flag also read from the environment variable `env`.
    #[must_use]
    pub const fn env(self, env: &'static str) -> Self {
        Self {
            env: Some(env),
            ..self
        }
    }
}

/// The row of `key` in `rows`, if it is one (`doc` picks each row's documentation).
#[must_use]
pub fn lookup<'a, R, M: 'static>(
    rows: &'a [R],
    doc: impl Fn(&R) -> &KeyDoc<M>,
    key: &str,
) -> Option<&'a R> {
    rows.iter().find(|row| doc(row).key == key)
}

/// The `clap` argument of a row with a flag (`None` for [`Flag::None`]); its id is the key, its
/// help the meaning and the default (shown, not applied: the caller resolves defaults).
#[must_use]
pub fn clap_arg<M>(doc: &KeyDoc<M>) -> Option<clap::Arg> {
    let arg = clap::Arg::new(doc.key)
        .long(doc.key)
        .value_name(doc.key.to_uppercase().replace('-', "_"))
        .help(match doc.default {
            DefaultValue::Value(value) if !value.is_empty() => {
                format!("{} [default: {value}]", doc.meaning)
            }
            _ => doc.meaning.to_owned(),
        });
    let arg = match doc.flag {
        Flag::None => return None,
        Flag::Value => arg.action(clap::ArgAction::Set),
        Flag::Switch { require_equals } => arg
            .action(clap::ArgAction::Set)
            .num_args(0..=1)
            .default_missing_value("true")
            .require_equals(require_equals),
        Flag::List { delimiter } => {
            let arg = arg.action(clap::ArgAction::Append);
            match delimiter {
                Some(delimiter) => arg.value_delimiter(delimiter),
                None => arg,
            }
        }
    };
    Some(match doc.env {
        Some(env) => arg.env(env),
        None => arg,
    })
}

/// The values the flag of `doc` was given in `matches` (none when it was not given).
#[must_use]
pub fn clap_values<M>(doc: &KeyDoc<M>, matches: &clap::ArgMatches) -> Vec<String> {
    if doc.flag == Flag::None {
        return Vec::new();
    }
    matches
        .get_many::<String>(doc.key)
        .map(|values| values.cloned().collect())
        .unwrap_or_default()
}
