//! Which keys weft reads, and which known key a misspelt one is closest to. Known: the agent's
//! [`super::KEYS`] and the operator's keys (`weft_cluster_ipam::operator_keys`; one ConfigMap
//! configures both); the feature guard ([`super::guard`]) tells Cilium's other keys from
//! misspelt ones. Pure.

/// Is `key` read by the agent or the operator?
#[must_use]
pub fn known(key: &str) -> bool {
    known_keys().any(|k| k == key)
}

fn known_keys() -> impl Iterator<Item = &'static str> {
    super::KEYS.into_iter().chain(
        weft_cluster_ipam::operator_keys::KEYS
            .iter()
            .map(|doc| doc.key),
    )
}

/// The key closest to `key` among those weft reads and Cilium's keys of the feature table,
/// if it is close enough to be a misspelling: the same up to case and `_` for `-`, or a few
/// edits apart (one for short keys, up to three for long ones).
#[must_use]
pub fn closest(key: &str) -> Option<&'static str> {
    let wanted = normalise(key);
    let allowed = (wanted.chars().count() / 5).clamp(1, 3);
    let cilium = super::features::all().filter_map(|f| match f.keys {
        super::features::Keys::Exact(k) => Some(k),
        super::features::Keys::Prefix(_) => None,
    });
    known_keys()
        .chain(cilium)
        .map(|known| (distance(&wanted, known), known))
        .filter(|(d, _)| *d <= allowed)
        .min()
        .map(|(_, known)| known)
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
    fn cilium_s_own_keys_are_not_weft_s() {
        for key in [
            "tunnel",
            "cluster-id",
            "enable-policy",
            "kube-proxy-replacement",
        ] {
            assert!(!known(key), "{key}");
        }
    }

    #[test]
    fn a_misspelt_cilium_key_gets_cilium_s_spelling() {
        assert_eq!(closest("routing_mode"), Some("routing-mode"));
        assert_eq!(closest("enable-polcy"), Some("enable-policy"));
    }

    #[test]
    fn the_operator_s_keys_are_known() {
        assert!(known("azure-subscription-id") && known("leader-election"));
        assert!(known("ipam-multi-pool-pre-allocation"));
    }

    #[test]
    fn distances() {
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(distance("abc", "acb"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
