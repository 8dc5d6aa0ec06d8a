//! What the manager writes of a node: the fields it owns ([`Shown`]) compared with what the
//! object shows, or with what was last sent while an event may still be on its way, and
//! turned into the merge patches of only what differs.

use std::{collections::BTreeMap, time::Instant};

use serde_json::{Map, Value, json};

use super::{EXPECT_FOR, Entry, NodePatch, Shared, refusal_text};
use crate::cloud::{CloudProvider, view::ViewOf};

/// What the operator wants a CiliumNode to show of the fields it owns.
pub(super) struct Shown<P: CloudProvider> {
    /// `spec.ipam.pool`: address → resource.
    pool: BTreeMap<String, String>,
    /// `spec.ipam.pre-allocate`.
    pre_allocate: i64,
    /// The provider's status part (`status.<FIELD>`).
    provider: P::NodeStatus,
    /// `status.ipam.assigned-static-ip`.
    static_ip: String,
    /// `status.ipam.operator-status.error`.
    error: String,
}

impl<P: CloudProvider> Clone for Shown<P> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            pre_allocate: self.pre_allocate,
            provider: self.provider.clone(),
            static_ip: self.static_ip.clone(),
            error: self.error.clone(),
        }
    }
}

impl<P: CloudProvider> PartialEq for Shown<P> {
    fn eq(&self, other: &Self) -> bool {
        self.pool == other.pool
            && self.pre_allocate == other.pre_allocate
            && self.provider == other.provider
            && self.static_ip == other.static_ip
            && self.error == other.error
    }
}

impl<P: CloudProvider> Shown<P> {
    pub(super) fn of_view(view: &ViewOf<P>) -> Self {
        Self {
            pool: view.pool.clone(),
            pre_allocate: view.pre_allocate,
            provider: view.provider_status.clone(),
            static_ip: view.assigned_static_ip.clone(),
            error: view.operator_error.clone(),
        }
    }

    /// The patches that turn `self` into `want` (`None`: that part is already right).
    fn patches(&self, want: &Self) -> (Option<Value>, Option<Value>) {
        let mut pool = Map::new();
        for (ip, resource) in &want.pool {
            if self.pool.get(ip) != Some(resource) {
                pool.insert(ip.clone(), json!({ "resource": resource }));
            }
        }
        for ip in self.pool.keys().filter(|ip| !want.pool.contains_key(*ip)) {
            pool.insert(ip.clone(), Value::Null);
        }
        let mut ipam = Map::new();
        if !pool.is_empty() {
            ipam.insert("pool".into(), Value::Object(pool));
        }
        if self.pre_allocate != want.pre_allocate {
            ipam.insert("pre-allocate".into(), json!(want.pre_allocate));
        }
        let spec = (!ipam.is_empty()).then(|| json!({"spec": {"ipam": ipam}}));
        let mut status = Map::new();
        if self.provider != want.provider {
            // The provider's own type: serialising it cannot fail.
            let part = serde_json::to_value(&want.provider).unwrap_or(Value::Null);
            status.insert(P::FIELD.to_owned(), part);
        }
        let mut ipam = Map::new();
        if self.static_ip != want.static_ip {
            ipam.insert("assigned-static-ip".into(), json!(want.static_ip));
        }
        if self.error != want.error {
            let error = if want.error.is_empty() {
                Value::Null
            } else {
                json!(want.error)
            };
            ipam.insert("operator-status".into(), json!({ "error": error }));
        }
        if !ipam.is_empty() {
            status.insert("ipam".into(), Value::Object(ipam));
        }
        let status = (!status.is_empty()).then(|| json!({ "status": status }));
        (spec, status)
    }
}

impl<P: CloudProvider> Shared<P> {
    /// Publish the node's addresses, interfaces, static IP and error where they differ from
    /// what the object shows (or, while an event may still be on its way, from what was last
    /// sent).
    pub(super) fn publish(&self, entry: &mut Entry<P>) {
        let state = &entry.state;
        let view = &state.view;
        let believed = match &entry.published {
            Some((shown, at)) if at.elapsed() < EXPECT_FOR => shown.clone(),
            _ => Shown::of_view(view),
        };
        // While the cache lacks the instance, what the node shows of it stays as it is: a
        // misconfigured resource group or a bad answer must not empty a node's pool.
        let known = !state.instance_missing;
        let want = Shown {
            pool: if known {
                state.available.clone()
            } else {
                believed.pool.clone()
            },
            pre_allocate: if view.pre_allocate == 0 {
                i64::try_from(self.provider.min_allocatable(Self::node_ref(view)))
                    .unwrap_or(i64::MAX)
            } else {
                view.pre_allocate
            },
            provider: if known {
                self.provider.status(Self::node_ref(view))
            } else {
                believed.provider.clone()
            },
            static_ip: state.assigned_static_ip.clone(),
            // A field with the wrong shape or a value the provider cannot act on is the error
            // while it lasts, then a refused full resync (a missing permission), then the
            // round's; otherwise the instance's limit, when it stops the node.
            error: view
                .invalid_text()
                .or_else(|| (!state.spec_error.is_empty()).then(|| state.spec_error.clone()))
                .or_else(|| self.refusal().map(|e| refusal_text(&*e)))
                .or_else(|| (!state.error.is_empty()).then(|| state.error.clone()))
                .unwrap_or_else(|| state.limit_error.clone()),
        };
        let (spec, status) = believed.patches(&want);
        if spec.is_none() && status.is_none() {
            return;
        }
        entry.published = Some((want, Instant::now()));
        let _ = self.writes.send(NodePatch {
            node: view.name.clone(),
            spec,
            status,
            events: Vec::new(),
        });
    }
}
