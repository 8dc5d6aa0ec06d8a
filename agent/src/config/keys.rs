//! Keys weft does not know. A shared cilium-config holds many of Cilium's own keys, which weft
//! leaves alone; a misspelt weft key would be left alone the same way and silently do nothing.
//! So every unknown key is listed in one warning, a misspelt one with the known key it is
//! closest to. Known: the agent's [`super::KEYS`] and the operator's keys (one ConfigMap
//! configures both). Pure but for [`warn_unknown`], which logs the warning.

use std::{collections::BTreeMap, fmt};

use tracing::warn;

/// A key no part of weft reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKey {
    /// The key as given.
    pub key: String,
    /// Where it was given (`config file`, `CiliumNodeConfig`).
    pub source: &'static str,
    /// The known key it is probably a misspelling of.
    pub closest: Option<&'static str>,
}

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.closest {
            Some(known) => write!(f, "{} ({}; did you mean {known}?)", self.key, self.source),
            None => write!(f, "{} ({})", self.key, self.source),
        }
    }
}

/// Is `key` read by the agent or the operator?
#[must_use]
pub fn known(key: &str) -> bool {
    known_keys().any(|k| k == key)
}

fn known_keys() -> impl Iterator<Item = &'static str> {
    super::KEYS.into_iter().chain(
        weft_operator::config::reference::REFERENCE
            .iter()
            .map(|doc| doc.key),
    )
}

/// The known key closest to `key`, if it is close enough to be a misspelling: the same up to
/// case and `_` for `-`, or a few edits apart (one for short keys, up to three for long ones).
#[must_use]
pub fn closest(key: &str) -> Option<&'static str> {
    let wanted = normalise(key);
    let allowed = (wanted.chars().count() / 5).clamp(1, 3);
    known_keys()
        .map(|known| (distance(&wanted, known), known))
        .filter(|(d, _)| *d <= allowed)
        .min()
        .map(|(_, known)| known)
}

/// The unknown keys of each `(source, layer)`, in order.
#[must_use]
pub fn unknown<'a>(
    layers: impl IntoIterator<Item = (&'static str, &'a BTreeMap<String, String>)>,
) -> Vec<UnknownKey> {
    layers
        .into_iter()
        .flat_map(|(source, layer)| {
            layer
                .keys()
                .filter(|key| !known(key))
                .map(move |key| UnknownKey {
                    key: key.clone(),
                    source,
                    closest: closest(key),
                })
        })
        .collect()
}

/// Log one warning listing the unknown keys of the config file layer and of this node's
/// CiliumNodeConfig defaults (nothing when there are none).
pub fn warn_unknown(file: &BTreeMap<String, String>, node: &BTreeMap<String, String>) {
    let unknown = unknown([("config file", file), ("CiliumNodeConfig", node)]);
    if unknown.is_empty() {
        return;
    }
    let keys = unknown
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    warn!(
        %keys,
        "ignoring {} configuration key(s) weft does not read; a misspelt one has the key it is \
         closest to (Cilium's own keys in a shared cilium-config are fine)",
        unknown.len()
    );
}

fn normalise(key: &str) -> String {
    key.trim().to_ascii_lowercase().replace('_', "-")
}

/// Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for (i, row) in d.chunks_mut(width).enumerate() {
        row[0] = i;
    }
    for (j, cell) in d.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspellings_get_the_closest_key() {
        for (wrong, right) in [
            (
                "ipam-multipool-pre-allocation",
                "ipam-multi-pool-pre-allocation",
            ),
            ("ipam-default-ip-poool", "ipam-default-ip-pool"),
            ("enable_ipv6", "enable-ipv6"),
            ("Enable-IPv6", "enable-ipv6"),
            ("iapm", "ipam"),
            ("device", "devices"),
            ("cluster-pool-ipv4-mask-sise", "cluster-pool-ipv4-mask-size"),
        ] {
            assert_eq!(closest(wrong), Some(right), "{wrong}");
        }
    }

    #[test]
    fn cilium_s_own_keys_are_unknown_without_a_suggestion() {
        for key in [
            "tunnel",
            "cluster-id",
            "routing-mode",
            "kube-proxy-replacement",
            "enable-ipv6-ndp",
            "enable-ipsec",
            "enable-l7-proxy",
            "identity-allocation-mode",
        ] {
            assert!(!known(key), "{key}");
            assert_eq!(closest(key), None, "{key}");
        }
    }

    #[test]
    fn the_operator_s_keys_are_known() {
        assert!(known("azure-subscription-id") && known("leader-election"));
        assert!(known("ipam-multi-pool-pre-allocation"));
    }

    #[test]
    fn unknown_keys_are_listed_per_layer_with_their_closest_key() {
        let file = BTreeMap::from([
            ("ipam".to_owned(), "multi-pool".to_owned()),
            ("tunnel".to_owned(), "vxlan".to_owned()),
        ]);
        let node = BTreeMap::from([("ipam-default-ip-poool".to_owned(), "mars".to_owned())]);
        let listed: Vec<String> = unknown([("config file", &file), ("CiliumNodeConfig", &node)])
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            listed,
            [
                "tunnel (config file)",
                "ipam-default-ip-poool (CiliumNodeConfig; did you mean ipam-default-ip-pool?)"
            ]
        );
    }

    #[test]
    fn distances() {
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(distance("abc", "acb"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
