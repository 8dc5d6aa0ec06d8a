//! The static-IP readiness criterion (Cilium PR 46636, `staticIPStatus` in `pkg/ipam/crd.go`
//! and `pkg/ipam/multipool_manager.go`): a node whose CiliumNode asks for a static IP
//! (`spec.ipam.static-ip-tags` non-empty: an AWS Elastic IP or Azure public IP the operator
//! picks by tags) does not serve pods until the operator has written
//! `status.ipam.assigned-static-ip`. Pure: it reads two fields, it never writes them.
//!
//! As in Cilium's agent, any non-empty value ends the wait. A value that is not an IP (the
//! public IP's resource ID a 1.19 Azure operator wrote) still means the IP is attached; today's
//! operator treats it as "needs resolving" and replaces it with the address, and the agent does
//! not wait for that.

use std::collections::BTreeMap;

/// What the own CiliumNode says about its static IP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StaticIp {
    /// `spec.ipam.static-ip-tags`.
    tags: BTreeMap<String, String>,
    /// `status.ipam.assigned-static-ip`.
    assigned: String,
}

impl StaticIp {
    /// The request (`tags`) and the operator's answer (`assigned`, empty: none yet).
    #[must_use]
    pub fn new(tags: BTreeMap<String, String>, assigned: String) -> Self {
        Self { tags, assigned }
    }

    /// Whether the node asks for a static IP.
    #[must_use]
    pub fn requested(&self) -> bool {
        !self.tags.is_empty()
    }

    /// The assigned value, when there is one.
    #[must_use]
    pub fn assigned(&self) -> Option<&str> {
        (!self.assigned.is_empty()).then_some(self.assigned.as_str())
    }

    /// The requested tags (`key=value` joined by commas) while the node waits for the
    /// operator to assign the static IP; `None` when it does not (nothing requested, or the
    /// operator assigned a value). The manager words the wait
    /// ([`crate::ipam::manager::Waiting::StaticIp`]).
    #[must_use]
    pub fn pending_tags(&self) -> Option<String> {
        if !self.requested() || self.assigned().is_some() {
            return None;
        }
        let tags: Vec<String> = self.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Some(tags.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn waits_only_while_requested_and_unassigned() {
        let cases = [
            (tags(&[]), "", None),
            (tags(&[]), "20.1.2.3", None),
            (
                tags(&[("b", "2"), ("a", "1")]),
                "",
                Some(
                    "Waiting for the operator to assign a static IP (static-ip-tags a=1,b=2): \
                     status.ipam.assigned-static-ip is empty",
                ),
            ),
            (tags(&[("a", "1")]), "20.1.2.3", None),
            (tags(&[("a", "1")]), "2001:db8::1", None),
            (
                tags(&[("a", "1")]),
                "/subscriptions/S/publicIPAddresses/p",
                None,
            ),
        ];
        for (tags, assigned, want) in cases {
            let s = StaticIp::new(tags.clone(), assigned.to_owned());
            let waiting = s
                .pending_tags()
                .map(|tags| crate::ipam::manager::Waiting::StaticIp { tags }.to_string());
            assert_eq!(waiting.as_deref(), want, "{tags:?} {assigned:?}");
            assert_eq!(s.requested(), !tags.is_empty());
        }
    }

    #[test]
    fn a_legacy_resource_id_counts_as_assigned() {
        let legacy = StaticIp::new(
            tags(&[("a", "1")]),
            "/subscriptions/S/publicIPAddresses/p".into(),
        );
        assert_eq!(
            legacy.assigned(),
            Some("/subscriptions/S/publicIPAddresses/p")
        );
        assert_eq!(StaticIp::default().assigned(), None);
    }
}
