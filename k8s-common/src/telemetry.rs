//! Logging of both programs, as Cilium's agent and operator configure theirs: the flags
//! `--debug`, `--log-level` and `--log-format` ([`LogArgs`]), the cilium-config keys of the same
//! names, and `RUST_LOG` for those who want per-target filters. A flag beats the key; `RUST_LOG`,
//! when set, beats both for the level, and one that does not parse is refused (never silently
//! replaced, never silencing the program). [`resolve`] is pure; [`init`] installs the
//! subscriber once the configuration is known. It knows no program's other settings.

use std::collections::BTreeMap;

use tracing_subscriber::EnvFilter;

/// The logging flags, flattened into each program's command line (Cilium's names).
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct LogArgs {
    /// Log debug messages (the `debug` key; `--log-level` wins when both are given).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true, global = true)]
    pub debug: Option<String>,
    /// Log level: trace, debug, info, warn or error (the `log-level` key; default info).
    #[arg(long, global = true)]
    pub log_level: Option<String>,
    /// Log format: text, text-ts, json or json-ts (the `log-format` key; default text-ts).
    #[arg(long, global = true)]
    pub log_format: Option<String>,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `text`: human-readable lines without a timestamp (the container runtime adds one).
    Text,
    /// `text-ts`: human-readable lines with a timestamp (the default).
    TextTs,
    /// `json`: one JSON object per line without a timestamp.
    Json,
    /// `json-ts`: one JSON object per line with a `timestamp` field.
    JsonTs,
}

impl Format {
    /// The accepted values, as the error names them.
    pub const VALUES: &str = "text, text-ts, json or json-ts";

    fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "text" => Some(Self::Text),
            "text-ts" => Some(Self::TextTs),
            "json" => Some(Self::Json),
            "json-ts" => Some(Self::JsonTs),
            _ => None,
        }
    }
}

/// Left out unless `RUST_LOG` asks: kube's client logs every failed request at error level
/// with only the outermost message, once per retry; weft logs each failure with its cause.
const QUIET: &str = "kube_client::client::builder=off";

/// The levels `--log-level` accepts.
const LEVELS: [&str; 5] = ["trace", "debug", "info", "warn", "error"];

/// What logging was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The filter directives (the level, or `RUST_LOG`'s text).
    pub filter: String,
    /// The line format.
    pub format: Format,
}

/// A logging setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A flag or key value is not one of the accepted ones.
    #[error("{name}: {value:?} is not {expected}")]
    Invalid {
        /// `--log-level`, the `log-format` key, …
        name: String,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// `RUST_LOG` does not parse as filter directives.
    #[error("RUST_LOG={value:?} does not parse; unset it or fix it (e.g. info,kube=debug)")]
    RustLog {
        /// The value.
        value: String,
        /// Why.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// `RUST_LOG` names a bare target, which would log that target only (a typo of a level
    /// otherwise silences the program).
    #[error(
        "RUST_LOG={value:?}: {directive:?} is not a level (trace, debug, info, warn, error, off); \
         a target needs one, e.g. {directive}=debug"
    )]
    RustLogTarget {
        /// The value.
        value: String,
        /// The directive without a level.
        directive: String,
    },
    /// A subscriber was already installed.
    #[error("installing the log subscriber")]
    Init(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Which setting a value came from: the flag or the key.
fn named(flag: bool, key: &str) -> String {
    if flag {
        format!("--{key}")
    } else {
        format!("{key} (config key)")
    }
}

fn level_of(name: &str, value: &str) -> Result<&'static str, TelemetryError> {
    let lower = value.trim().to_ascii_lowercase();
    let lower = if lower == "warning" {
        "warn".into()
    } else {
        lower
    };
    LEVELS
        .into_iter()
        .find(|l| *l == lower)
        .ok_or_else(|| TelemetryError::Invalid {
            name: name.to_owned(),
            value: value.to_owned(),
            expected: "trace, debug, info, warn or error",
        })
}

fn debug_of(name: &str, value: &str) -> Result<&'static str, TelemetryError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Ok("debug"),
        "false" | "0" | "" => Ok("info"),
        _ => Err(TelemetryError::Invalid {
            name: name.to_owned(),
            value: value.to_owned(),
            expected: "true or false",
        }),
    }
}

/// The level of one layer (flags, or keys): `log-level` wins over `debug`.
fn layer_level(
    flag: bool,
    log_level: Option<&str>,
    debug: Option<&str>,
) -> Result<Option<&'static str>, TelemetryError> {
    if let Some(value) = log_level.filter(|v| !v.is_empty()) {
        return level_of(&named(flag, LOG_LEVEL), value).map(Some);
    }
    debug
        .map(|value| debug_of(&named(flag, DEBUG), value))
        .transpose()
}

/// Check `RUST_LOG`'s text: it must parse, and a directive without `=` must be a level.
fn check_rust_log(value: &str) -> Result<(), TelemetryError> {
    EnvFilter::builder()
        .parse(value)
        .map_err(|source| TelemetryError::RustLog {
            value: value.to_owned(),
            source,
        })?;
    for directive in value.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let bare = !directive.contains('=') && !directive.contains('[');
        let lower = directive.to_ascii_lowercase();
        if bare && lower != "off" && lower != "warning" && !LEVELS.contains(&lower.as_str()) {
            return Err(TelemetryError::RustLogTarget {
                value: value.to_owned(),
                directive: directive.to_owned(),
            });
        }
    }
    Ok(())
}

/// Resolve the flags `args` over the cilium-config `keys` (`debug`, `log-level`,
/// `log-format`), with `rust_log` (the `RUST_LOG` variable) beating both for the level.
///
/// # Errors
/// A value that is not accepted, or a `RUST_LOG` that does not parse.
pub fn resolve(
    args: &LogArgs,
    keys: &BTreeMap<String, String>,
    rust_log: Option<&str>,
) -> Result<Settings, TelemetryError> {
    let key = |k: &str| keys.get(k).map(String::as_str);
    let flags = layer_level(true, args.log_level.as_deref(), args.debug.as_deref())?;
    let from_keys = layer_level(false, key(LOG_LEVEL), key(DEBUG))?;
    let filter = match rust_log.filter(|v| !v.trim().is_empty()) {
        Some(value) => {
            check_rust_log(value)?;
            value.to_owned()
        }
        None => format!("{},{QUIET}", flags.or(from_keys).unwrap_or("info")),
    };
    let format = match (args.log_format.as_deref(), key(LOG_FORMAT)) {
        (Some(value), _) => Some((named(true, LOG_FORMAT), value)),
        (None, Some(value)) if !value.is_empty() => Some((named(false, LOG_FORMAT), value)),
        (None, _) => None,
    }
    .map(|(name, value)| {
        Format::parse(value).ok_or_else(|| TelemetryError::Invalid {
            name,
            value: value.to_owned(),
            expected: Format::VALUES,
        })
    })
    .transpose()?
    .unwrap_or(Format::TextTs);
    Ok(Settings { filter, format })
}

/// Install the subscriber `settings` describe, writing to stderr (colour only at a terminal).
///
/// # Errors
/// The filter does not parse (checked by [`resolve`] already) or a subscriber is installed.
pub fn init(settings: &Settings) -> Result<(), TelemetryError> {
    let filter = EnvFilter::builder()
        .parse(&settings.filter)
        .map_err(|source| TelemetryError::RustLog {
            value: settings.filter.clone(),
            source,
        })?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match settings.format {
        Format::Text => builder.with_ansi(ansi).without_time().try_init(),
        Format::TextTs => builder.with_ansi(ansi).try_init(),
        Format::Json => builder.json().flatten_event(true).without_time().try_init(),
        Format::JsonTs => builder.json().flatten_event(true).try_init(),
    }
    .map_err(TelemetryError::Init)
}

/// The key (and flag) `debug`.
const DEBUG: &str = "debug";
/// The key (and flag) `log-level`.
const LOG_LEVEL: &str = "log-level";
/// The key (and flag) `log-format`.
const LOG_FORMAT: &str = "log-format";

/// The keys [`resolve`] reads, for each program's list of known keys.
pub const KEYS: [&str; 3] = [DEBUG, LOG_LEVEL, LOG_FORMAT];

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// The level directive (before the quieted targets).
    fn level(s: &Settings) -> &str {
        s.filter.split(',').next().unwrap_or_default()
    }

    fn args(debug: Option<&str>, level: Option<&str>, format: Option<&str>) -> LogArgs {
        LogArgs {
            debug: debug.map(str::to_owned),
            log_level: level.map(str::to_owned),
            log_format: format.map(str::to_owned),
        }
    }

    #[test]
    fn defaults_are_info_and_text_with_timestamps() {
        let s = resolve(&LogArgs::default(), &BTreeMap::new(), None).expect("defaults");
        assert_eq!(s.filter, "info,kube_client::client::builder=off");
        assert_eq!(s.format, Format::TextTs);
    }

    #[test]
    fn a_flag_beats_the_key_and_rust_log_beats_both() {
        let file = keys(&[("log-level", "warn"), ("log-format", "json")]);
        let s = resolve(&LogArgs::default(), &file, None).expect("keys");
        assert_eq!((level(&s), s.format), ("warn", Format::Json));
        let s = resolve(&args(None, Some("error"), Some("text")), &file, None).expect("flags");
        assert_eq!((level(&s), s.format), ("error", Format::Text));
        let s = resolve(
            &args(None, Some("error"), None),
            &file,
            Some("debug,kube=trace"),
        )
        .expect("RUST_LOG");
        assert_eq!(
            (s.filter.as_str(), s.format),
            ("debug,kube=trace", Format::Json)
        );
    }

    #[test]
    fn debug_means_debug_unless_a_level_is_given() {
        let s = resolve(&args(Some("true"), None, None), &BTreeMap::new(), None).expect("flag");
        assert_eq!(level(&s), "debug");
        let s = resolve(&LogArgs::default(), &keys(&[("debug", "true")]), None).expect("key");
        assert_eq!(level(&s), "debug");
        let both = keys(&[("debug", "true"), ("log-level", "warn")]);
        let s = resolve(&LogArgs::default(), &both, None).expect("both keys");
        assert_eq!(level(&s), "warn");
        // The flag layer beats the key layer whichever of its two flags is given.
        let s = resolve(&args(Some("false"), None, None), &both, None).expect("flag over keys");
        assert_eq!(level(&s), "info");
    }

    #[test]
    fn every_cilium_format_is_accepted_and_others_refused() {
        for (value, format) in [
            ("text", Format::Text),
            ("text-ts", Format::TextTs),
            ("JSON", Format::Json),
            ("json-ts", Format::JsonTs),
        ] {
            let s = resolve(&args(None, None, Some(value)), &BTreeMap::new(), None).expect(value);
            assert_eq!(s.format, format, "{value}");
        }
        let e =
            resolve(&LogArgs::default(), &keys(&[("log-format", "xml")]), None).expect_err("xml");
        assert_eq!(
            e.to_string(),
            "log-format (config key): \"xml\" is not text, text-ts, json or json-ts"
        );
    }

    #[test]
    fn bad_levels_are_refused_naming_the_setting() {
        let e = resolve(&args(None, Some("verbose"), None), &BTreeMap::new(), None)
            .expect_err("verbose");
        assert_eq!(
            e.to_string(),
            "--log-level: \"verbose\" is not trace, debug, info, warn or error"
        );
        let e = resolve(&LogArgs::default(), &keys(&[("debug", "yes please")]), None)
            .expect_err("debug");
        assert!(e.to_string().starts_with("debug (config key)"), "{e}");
    }

    #[test]
    fn an_unparsable_or_bare_target_rust_log_is_refused() {
        let e = resolve(&LogArgs::default(), &BTreeMap::new(), Some("kube=loud"))
            .expect_err("bad level");
        assert!(matches!(e, TelemetryError::RustLog { .. }), "{e:?}");
        let e = resolve(&LogArgs::default(), &BTreeMap::new(), Some("infoo"))
            .expect_err("a typo of info");
        assert_eq!(
            e.to_string(),
            "RUST_LOG=\"infoo\": \"infoo\" is not a level (trace, debug, info, warn, error, off); \
             a target needs one, e.g. infoo=debug"
        );
        for good in [
            "info",
            "warn,weft_operator=debug",
            "off",
            "kube[list]=trace",
            "  ",
        ] {
            resolve(&LogArgs::default(), &BTreeMap::new(), Some(good)).expect(good);
        }
    }
}
