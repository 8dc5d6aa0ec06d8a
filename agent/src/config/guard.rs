//! The feature guard: at start, every key of the cilium-config layers (the config file and
//! this node's CiliumNodeConfig defaults) is honoured (weft reads it), ignored (harmless; one
//! `info` line each, saying why), refused (its value asks for something weft does not do: the
//! agent stops, naming the key, the value, what would break and the way out, unless
//! `--allow-unsupported-features` turns refusals into warnings) or unknown (one warning listing
//! them, a misspelt one with the key it is closest to). The verdicts come from
//! [`super::features::all`] and [`super::keys`]; pure but for [`Review::enforce`], which logs.

use std::{collections::BTreeMap, fmt, fmt::Write as _};

use tracing::{info, warn};
use weft_k8s::config_values::parse_bool;

use super::{
    features::{self, Feature, Rule},
    keys,
};

/// The flag that turns refusals into warnings.
pub const ALLOW_FLAG: &str = "--allow-unsupported-features";

/// A key weft refuses at its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The key.
    pub key: String,
    /// Its value.
    pub value: String,
    /// Where it was given (`config file`, `CiliumNodeConfig`).
    pub source: &'static str,
    /// What would break.
    pub breaks: &'static str,
    /// What to do instead.
    pub way_out: &'static str,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {:?} ({}): {}; {}",
            self.key, self.value, self.source, self.breaks, self.way_out
        )
    }
}

/// A key weft ignores, and why that is harmless.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    /// The key.
    pub key: String,
    /// Where it was given.
    pub source: &'static str,
    /// Why ignoring it is harmless.
    pub why: &'static str,
}

/// A key no part of weft knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    /// The key as given.
    pub key: String,
    /// Where it was given.
    pub source: &'static str,
    /// The known key it is probably a misspelling of.
    pub closest: Option<&'static str>,
}

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.closest {
            Some(known) => write!(f, "{} ({}; did you mean {known}?)", self.key, self.source),
            None => write!(f, "{} ({})", self.key, self.source),
        }
    }
}

/// The verdicts on every key of some layers that weft does not read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Review {
    /// Keys refused at their value.
    pub refused: Vec<Refusal>,
    /// Keys ignored as harmless.
    pub ignored: Vec<Ignored>,
    /// Keys nobody knows.
    pub unknown: Vec<Unknown>,
}

/// The configuration asks for features weft does not have.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", refused_text(.refused))]
pub struct UnsupportedFeatures {
    /// Each refused key.
    pub refused: Vec<Refusal>,
}

fn refused_text(refused: &[Refusal]) -> String {
    let mut text = format!(
        "the configuration asks for {} feature(s) weft does not have, and running without them \
         would break traffic or security:",
        refused.len()
    );
    for refusal in refused {
        text.push_str("\n  ");
        text.push_str(&refusal.to_string());
    }
    let _ = write!(
        text,
        "\nchange these keys as each line says, or start with {ALLOW_FLAG} to run without them \
         (docs/cilium-features.md lists what weft has)"
    );
    text
}

/// The row of [`features::all`] for `key`: an exact row before a family.
#[must_use]
pub fn feature(key: &str) -> Option<&'static Feature> {
    features::all()
        .filter(|f| f.keys.covers(key))
        .max_by_key(|f| matches!(f.keys, features::Keys::Exact(_)))
}

/// Is `value` one of `accepted`? Booleans compare as booleans (`"False"`, `"0"`), the rest
/// without case. An empty value passes only where `accepted` lists `""`: elsewhere it means
/// Cilium's default, which is what weft refuses (`enable-policy` enforces).
#[must_use]
pub fn accepted(value: &str, accepted: &[&str]) -> bool {
    let value = value.trim();
    accepted.iter().any(|a| {
        a.eq_ignore_ascii_case(value)
            || (!value.is_empty() && parse_bool(a).is_some_and(|a| parse_bool(value) == Some(a)))
    })
}

/// The verdicts on the keys of `(source, layer)`s, later layers winning as when the
/// configuration is resolved (a CiliumNodeConfig's `enable-wireguard: "false"` overrides the
/// file's `"true"`); each verdict names the layer its value came from.
#[must_use]
pub fn review<'a>(
    layers: impl IntoIterator<Item = (&'static str, &'a BTreeMap<String, String>)>,
) -> Review {
    let mut merged: BTreeMap<&str, (&'static str, &str)> = BTreeMap::new();
    for (source, layer) in layers {
        for (key, value) in layer {
            merged.insert(key, (source, value));
        }
    }
    let moot = |when: Option<(&str, &str)>| {
        when.is_some_and(|(other, value)| {
            merged
                .get(other)
                .is_some_and(|(_, v)| v.trim().eq_ignore_ascii_case(value))
        })
    };
    let mut out = Review::default();
    for (&key, &(source, value)) in &merged {
        if keys::known(key) {
            continue;
        }
        match feature(key).map(|f| f.rule) {
            Some(Rule::Ignored(why)) => out.ignored.push(Ignored {
                key: key.to_owned(),
                source,
                why,
            }),
            Some(Rule::RefusedUnless {
                accepted: ok,
                moot_when,
                breaks,
                way_out,
            }) => {
                if !moot(moot_when) && !accepted(value, ok) {
                    out.refused.push(Refusal {
                        key: key.to_owned(),
                        value: value.to_owned(),
                        source,
                        breaks,
                        way_out,
                    });
                }
            }
            None => out.unknown.push(Unknown {
                key: key.to_owned(),
                source,
                closest: keys::closest(key),
            }),
        }
    }
    out
}

impl Review {
    /// Log the verdicts (ignored keys at `info`, one line each; unknown keys in one warning;
    /// refusals as warnings when `allow`), then fail on refusals unless `allow`.
    ///
    /// # Errors
    /// A key is refused and `allow` is false.
    pub fn enforce(self, allow: bool) -> Result<(), UnsupportedFeatures> {
        for ignored in &self.ignored {
            info!(key = %ignored.key, source = ignored.source, "ignoring {}: {}", ignored.key, ignored.why);
        }
        if !self.unknown.is_empty() {
            let keys = self
                .unknown
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            warn!(
                %keys,
                "ignoring {} configuration key(s) weft does not know; a misspelt one has the key \
                 it is closest to",
                self.unknown.len()
            );
        }
        if self.refused.is_empty() {
            return Ok(());
        }
        if !allow {
            return Err(UnsupportedFeatures {
                refused: self.refused,
            });
        }
        for refusal in &self.refused {
            warn!(
                key = %refusal.key,
                value = %refusal.value,
                source = refusal.source,
                "running without {} ({ALLOW_FLAG}): {}",
                refusal.key,
                refusal.breaks
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
