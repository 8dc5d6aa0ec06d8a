//! The names `/metrics` serves under (`--metrics-naming weft|cilium`) and the encoder both
//! programs use. A program registers every metric once, under weft's names; its one table of
//! [`Rule`]s says which of them Cilium has with the same meaning and under which name, type and
//! labels. [`encode`] writes the registry in the Prometheus text format 0.0.4 (what Cilium
//! serves, and what `promtool check metrics` reads) and, with [`Naming::Cilium`], applies the
//! table: a [`Relabel::Same`] rule renames a metric whose labels are Cilium's already; a
//! [`Relabel::Map`] rule derives Cilium's coarser metric (other labels, equal label sets
//! summed) and keeps weft's beside it, since weft's carries more (per pool, per verdict).
//! Metrics no rule names keep their `weft_` name. Pure text in, text out: no IO, no registry
//! of its own.

use std::{fmt, str::FromStr};

use prometheus_client::registry::Registry;

/// The content type of [`encode`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which names `/metrics` serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Naming {
    /// weft's own names (`weft_…`, `weft_operator_…`).
    #[default]
    Weft,
    /// Cilium's names, types and labels where the meaning is the same; weft's elsewhere.
    Cilium,
}

impl Naming {
    /// The flag value.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Weft => "weft",
            Self::Cilium => "cilium",
        }
    }
}

impl fmt::Display for Naming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--metrics-naming` value that is neither `weft` nor `cilium`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown metrics naming {0:?}: expected weft or cilium")]
pub struct NamingError(pub String);

impl FromStr for Naming {
    type Err = NamingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "weft" => Ok(Self::Weft),
            "cilium" => Ok(Self::Cilium),
            other => Err(NamingError(other.to_owned())),
        }
    }
}

/// A sample's labels, in order.
pub type Labels = Vec<(String, String)>;

/// How a weft metric becomes Cilium's.
#[derive(Clone, Copy)]
pub enum Relabel {
    /// The same labels and values: only the name changes (any type).
    Same,
    /// Cilium's labels from weft's (`None`: the sample has no part in this Cilium metric);
    /// samples with equal label sets are summed. Counters and gauges only.
    Map(fn(&[(String, String)]) -> Option<Labels>),
}

impl fmt::Debug for Relabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Same => f.write_str("Same"),
            Self::Map(_) => f.write_str("Map"),
        }
    }
}

/// One line of a program's naming table.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// The weft metric, as registered (prefix included, no `_total`): `weft_ipam_pool_used_ips`.
    pub weft: &'static str,
    /// Cilium's name exactly as Cilium serves it (`_total` included where Cilium's has it):
    /// `cilium_ip_addresses`, `cilium_operator_ipam_ip_allocation_ops`.
    pub cilium: &'static str,
    /// The `# HELP` text under Cilium's name.
    pub help: &'static str,
    /// How the labels change.
    pub relabel: Relabel,
}

impl Rule {
    /// A plain rename: Cilium's metric has weft's type, labels and label values.
    #[must_use]
    pub const fn same(weft: &'static str, cilium: &'static str, help: &'static str) -> Self {
        Self {
            weft,
            cilium,
            help,
            relabel: Relabel::Same,
        }
    }
}

/// The registry in the text format 0.0.4, under `naming`'s names (`rules`: the program's
/// table).
///
/// # Errors
/// A metric failed to encode.
pub fn encode(registry: &Registry, naming: Naming, rules: &[Rule]) -> Result<String, fmt::Error> {
    let mut open = String::new();
    prometheus_client::encoding::text::encode(&mut open, registry)?;
    let families = parse(&open);
    let out = match naming {
        Naming::Weft => families.into_iter().map(Out::weft).collect(),
        Naming::Cilium => apply(families, rules),
    };
    let mut text = String::new();
    for family in &out {
        family.render(&mut text);
    }
    Ok(text)
}

/// A family as prometheus-client's OpenMetrics text has it.
#[derive(Debug)]
struct Family {
    /// The family name (`# TYPE` line; no `_total`).
    name: String,
    kind: String,
    help: String,
    samples: Vec<Sample>,
}

#[derive(Debug, Clone)]
struct Sample {
    /// What follows the family name: `` for counters and gauges, `_bucket`, `_sum`, `_count`.
    suffix: String,
    labels: Labels,
    value: String,
}

fn parse(text: &str) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            families.push(Family {
                name: name.to_owned(),
                kind: "untyped".to_owned(),
                help: help.to_owned(),
                samples: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let (Some(family), Some((_, kind))) = (families.last_mut(), rest.split_once(' ')) {
                kind.clone_into(&mut family.kind);
            }
        } else if line.starts_with('#') || line.is_empty() {
            // `# UNIT`, `# EOF`: nothing in the text format 0.0.4.
        } else if let Some(family) = families.last_mut()
            && let Some(sample) = parse_sample(&family.name, &family.kind, line)
        {
            family.samples.push(sample);
        }
    }
    families
}

fn parse_sample(family: &str, kind: &str, line: &str) -> Option<Sample> {
    let (name_labels, value) = line.rsplit_once(' ')?;
    let (name, labels) = match name_labels.split_once('{') {
        Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}')?)),
        None => (name_labels, Vec::new()),
    };
    let suffix = name.strip_prefix(family)?;
    let suffix = match (kind, suffix) {
        // Counters are `_total` in OpenMetrics; `_created` has no place in 0.0.4.
        ("counter", "_total") => "",
        ("counter", _) => return None,
        _ => suffix,
    };
    Some(Sample {
        suffix: suffix.to_owned(),
        labels,
        value: value.to_owned(),
    })
}

fn parse_labels(text: &str) -> Labels {
    let mut labels = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        let name: String = chars.by_ref().take_while(|&c| c != '=').collect();
        if name.is_empty() || chars.next() != Some('"') {
            return labels;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => {}
                },
                c => value.push(c),
            }
        }
        labels.push((name.trim_start_matches(',').to_owned(), value));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
}

/// A family as served.
#[derive(Debug)]
struct Out {
    /// The served family name (the `# TYPE` line's; a counter's samples have it too).
    name: String,
    kind: String,
    help: String,
    samples: Vec<Sample>,
    /// Samples are summed by label set (a mapped family).
    summed: bool,
}

impl Out {
    fn weft(family: Family) -> Self {
        let name = if family.kind == "counter" {
            format!("{}_total", family.name)
        } else {
            family.name
        };
        Self {
            name,
            kind: family.kind,
            help: family.help,
            samples: family.samples,
            summed: false,
        }
    }

    fn render(&self, out: &mut String) {
        use fmt::Write as _;
        let help = self.help.replace('\\', r"\\").replace('\n', r"\n");
        let kind = if self.kind == "unknown" {
            "untyped"
        } else {
            &self.kind
        };
        let _ = writeln!(out, "# HELP {} {help}", self.name);
        let _ = writeln!(out, "# TYPE {} {kind}", self.name);
        for sample in &self.samples {
            out.push_str(&self.name);
            out.push_str(&sample.suffix);
            if !sample.labels.is_empty() {
                out.push('{');
                for (i, (name, value)) in sample.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let value = value
                        .replace('\\', r"\\")
                        .replace('"', "\\\"")
                        .replace('\n', r"\n");
                    let _ = write!(out, "{name}=\"{value}\"");
                }
                out.push('}');
            }
            let _ = writeln!(out, " {}", sample.value);
        }
    }

    fn add(&mut self, labels: Labels, value: &str) {
        let value: f64 = value.parse().unwrap_or(0.0);
        if let Some(sample) = self.samples.iter_mut().find(|s| s.labels == labels) {
            let sum = sample.value.parse::<f64>().unwrap_or(0.0) + value;
            sample.value = number(sum);
        } else {
            self.samples.push(Sample {
                suffix: String::new(),
                labels,
                value: number(value),
            });
        }
    }
}

fn number(value: f64) -> String {
    format!("{value}")
}

fn apply(families: Vec<Family>, rules: &[Rule]) -> Vec<Out> {
    let mut out: Vec<Out> = Vec::new();
    for family in families {
        let mine: Vec<&Rule> = rules.iter().filter(|r| r.weft == family.name).collect();
        if mine.is_empty() {
            out.push(Out::weft(family));
            continue;
        }
        let mut keep = false;
        for rule in &mine {
            match rule.relabel {
                Relabel::Same => out.push(Out {
                    name: rule.cilium.to_owned(),
                    kind: family.kind.clone(),
                    help: rule.help.to_owned(),
                    samples: family.samples.clone(),
                    summed: false,
                }),
                Relabel::Map(relabel) => {
                    keep = true;
                    let found = out.iter().position(|o| o.summed && o.name == rule.cilium);
                    let index = found.unwrap_or_else(|| {
                        out.push(Out {
                            name: rule.cilium.to_owned(),
                            kind: family.kind.clone(),
                            help: rule.help.to_owned(),
                            samples: Vec::new(),
                            summed: true,
                        });
                        out.len() - 1
                    });
                    for sample in family.samples.iter().filter(|s| s.suffix.is_empty()) {
                        if let Some(labels) = relabel(&sample.labels) {
                            out[index].add(labels, &sample.value);
                        }
                    }
                }
            }
        }
        if keep {
            out.push(Out::weft(family));
        }
    }
    out
}

/// The value of label `name` in `labels` (empty when absent).
#[must_use]
pub fn label<'a>(labels: &'a [(String, String)], name: &str) -> &'a str {
    labels
        .iter()
        .find(|(n, _)| n == name)
        .map_or("", |(_, v)| v.as_str())
}

#[cfg(test)]
mod tests;
