//! Renders `docs/cilium-features.md` from the feature guard's table
//! (`weft_agent::config::features`): per area of Cilium, what weft does, then each of Cilium's
//! keys weft does not read with its verdict (ignored, and why; refused, at which values, what
//! would break and the way out); last, the keys of Cilium's weft reads (their reference, with
//! weft's own keys, is `docs/configuration.md`). Written by `cargo xtask gen-config-ref`; `tests/tests/docs/` fails
//! while the checked-in file differs. Pure: returns the text, writes nothing.

use std::fmt::Write as _;

use weft_agent::config::{
    features::{self, Area, Rule},
    reference::{Cilium, REFERENCE},
};

/// The whole page.
#[must_use]
pub fn render() -> String {
    let mut out = String::from(HEADER);
    for area in Area::ALL {
        let _ = write!(out, "## {}\n\n{}\n\n", area.title(), area.summary());
        out.push_str("| key | weft | why, or what breaks and the way out |\n|---|---|---|\n");
        for feature in features::all().filter(|f| f.area == area) {
            let key = format!("`{}`", feature.keys.label());
            let row = match feature.rule {
                Rule::Ignored(why) => format!("| {key} | ignored | {} |", cell(why)),
                Rule::RefusedUnless {
                    accepted,
                    moot_when,
                    breaks,
                    way_out,
                } => {
                    let mut values = accepted
                        .iter()
                        .map(|v| format!("`{v}`"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    if let Some((other, when)) = moot_when {
                        let _ = write!(values, " or {other}: `{when}`");
                    }
                    format!(
                        "| {key} | refused unless {values} | {}; {} |",
                        cell(breaks),
                        cell(way_out)
                    )
                }
            };
            out.push_str(&row);
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str(
        "## Keys weft reads\n\nThese keys mean in weft what they mean in Cilium; \
         [configuration.md](configuration.md) has each one's default and the modes that read it. \
         The operator's keys are there too, and the few keys of weft's own.\n\n",
    );
    let keys: Vec<String> = REFERENCE
        .iter()
        .filter(|row| !matches!(row.doc.cilium, Cilium::Weft(_)))
        .map(|row| format!("`{}`", row.name()))
        .collect();
    out.push_str(&keys.join(", "));
    out.push('\n');
    out
}

const HEADER: &str = "<!-- Generated from the code by `cargo xtask gen-config-ref`; do not edit. -->
# weft and Cilium: what is there and what is not

A `cilium-config` written for Cilium holds many keys weft does not read. At start, `weft-agent`
judges each one, from the config file and from this node's CiliumNodeConfig defaults:

- **read**: weft does what Cilium does with it (the last section; [configuration.md](configuration.md)).
- **ignored**: leaving it unread changes neither connectivity nor security; the agent logs one
  `info` line per key, saying why.
- **refused** at values that ask for something weft does not have, because running without it
  would break traffic or weaken security. The agent stops before it serves, naming each key, its
  value, what would break and the way out. `--allow-unsupported-features` (or
  `WEFT_ALLOW_UNSUPPORTED_FEATURES=true`) turns refusals into one warning per key, for those who
  know what they give up.
- **unknown**: neither weft's nor in this table; one warning lists them, a misspelt one with the
  key it is closest to.

Values are judged as resolved: a node's CiliumNodeConfig `defaults` override the file, so
weft's nodes can get `enable-policy: never` while Cilium's keep enforcing. An empty value
means Cilium's default, and passes only where that default is what weft does. Booleans compare
as booleans (`\"False\"`, `\"0\"`). The policy keys are moot under `enable-policy: never`.
Cilium's chart with its default values (1.18, 1.19 and 1.20 are tested) is refused for two
keys: `enable-policy: default` and `enable-k8s-networkpolicy: \"true\"`; its
`routing-mode: tunnel` weft runs (VXLAN).

";

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}
