//! How watch events become the Kubernetes store's snapshot: each object is decoded as far as the
//! snapshot keeps it (a CiliumEndpoint down to its [`EndpointSummary`]), a re-list is buffered
//! until it is complete and then replaces what the watch delivered before, and an object that
//! does not decode keeps its last good version and is reported. The own CiliumNode going away
//! (deleted, or missing from a re-list) is flagged for [`super::recreate`].

use std::{
    collections::{BTreeSet, VecDeque},
    path::PathBuf,
    sync::Arc,
};

use kube::{api::DynamicObject, runtime::watcher::Event};
use serde_json::Value;
use tracing::{debug, warn};

use super::{
    FieldError, Resource,
    resources::{decode, to_json},
    store::Watch,
};
use crate::{
    crd::{
        endpoint::CiliumEndpoint,
        identity::CiliumIdentity,
        meta::{Namespace, Pod},
        node::CiliumNode,
        nodeconfig::CiliumNodeConfig,
        pool::CiliumPodIPPool,
    },
    error::chain,
    store::{EndpointSummary, Snapshot},
};

/// How many recent versions of the own CiliumNode are kept as write bases.
const VERSIONS_KEPT: usize = 32;

/// What the watches have seen so far.
#[derive(Debug, Default)]
pub(super) struct Builder {
    pub(super) snapshot: Snapshot,
    /// The watches that have listed.
    pub(super) synced: BTreeSet<Watch>,
    /// Recent raw versions of the own CiliumNode by resourceVersion, newest last.
    pub(super) versions: VecDeque<(String, Value)>,
    /// The own CiliumNode went away (deleted, or missing from a re-list); taken by the watch
    /// loop, which asks for it to be created again.
    pub(super) own_gone: bool,
    /// Problems already turned into an Event (so each is reported once).
    reported: BTreeSet<String>,
}

/// Remember a version of the own CiliumNode (from a watch event or a write's answer).
pub(super) fn remember(builder: &mut Builder, doc: &Value) {
    let Some(version) = doc["metadata"]["resourceVersion"].as_str() else {
        return;
    };
    if builder.versions.iter().any(|(v, _)| v == version) {
        return;
    }
    builder
        .versions
        .push_back((version.to_owned(), doc.clone()));
    while builder.versions.len() > VERSIONS_KEPT {
        builder.versions.pop_front();
    }
}

/// Fold one watch event into the snapshot being built (a re-list is buffered, decoded, until it
/// is complete, then replaces what the watch delivered before). Whether the snapshot may have
/// changed (a buffered object has not changed it yet).
pub(super) fn fold(
    node_name: &str,
    builder: &mut Builder,
    watch: Watch,
    event: Event<DynamicObject>,
    buffer: &mut Vec<Received>,
    reports: &mut Vec<(Value, String)>,
) -> bool {
    match event {
        Event::Init => buffer.clear(),
        Event::InitApply(object) => {
            buffer.push(receive(watch, &to_json(&object)));
            return false;
        }
        Event::InitDone => {
            if watch == Watch::OwnNode && !buffer.iter().any(|r| r.name == node_name) {
                builder.own_gone = true;
            }
            clear(&mut builder.snapshot, watch, node_name);
            for received in buffer.drain(..) {
                install(builder, node_name, watch, received, reports);
            }
            // A large re-list must not keep its buffer's capacity for the agent's lifetime.
            buffer.shrink_to_fit();
            builder.synced.insert(watch);
        }
        Event::Apply(object) => {
            apply(builder, node_name, watch, &to_json(&object), false, reports);
        }
        Event::Delete(object) => {
            let doc = to_json(&object);
            if watch == Watch::OwnNode && meta(&doc, "name") == node_name {
                builder.own_gone = true;
            }
            apply(builder, node_name, watch, &doc, true, reports);
        }
    }
    true
}

/// Forget what `watch` delivered (it is about to deliver a full list again).
fn clear(snapshot: &mut Snapshot, watch: Watch, node_name: &str) {
    match watch {
        Watch::OwnNode => drop(snapshot.nodes.remove(node_name)),
        Watch::Nodes => {
            snapshot.nodes = snapshot
                .nodes
                .get(node_name)
                .map(|n| imbl::OrdMap::unit(node_name.to_owned(), n.clone()))
                .unwrap_or_default();
        }
        Watch::Pods => snapshot.pods.clear(),
        Watch::Namespaces => snapshot.namespaces.clear(),
        Watch::Pools => snapshot.pools.clear(),
        Watch::NodeConfigs => snapshot.node_configs.clear(),
        Watch::Endpoints => snapshot.endpoints.clear(),
        Watch::Identities => snapshot.identities.clear(),
    }
    let prefix = format!("{}/", watch.resource().plural());
    let own_key = Resource::CiliumNode.key(None, node_name);
    snapshot.problems.retain(|k, _| {
        let k = k.to_string_lossy();
        let is_own = k == own_key;
        !k.starts_with(&prefix)
            || (watch == Watch::OwnNode && !is_own)
            || (watch == Watch::Nodes && is_own)
    });
}

/// One object from a watch, decoded as far as the snapshot keeps it.
pub(super) struct Received {
    name: String,
    namespace: String,
    object: Result<Object, FieldError>,
    /// The document itself, kept only where it is needed: every version of the own CiliumNode
    /// (write bases) and a CiliumNode that does not decode (its Event).
    raw: Option<Value>,
}

/// What the snapshot keeps of an object (boxed: a re-list buffers one per object).
enum Object {
    Node(Box<CiliumNode>),
    Pod(Box<Pod>),
    Namespace(Box<Namespace>),
    Pool(Box<CiliumPodIPPool>),
    NodeConfig(Box<CiliumNodeConfig>),
    Endpoint(Arc<EndpointSummary>),
    Identity(Box<CiliumIdentity>),
    /// A resource no watch delivers (core Nodes, Events): nothing to keep.
    Unwatched,
}

/// `metadata.<field>` of `doc`, empty when missing.
fn meta(doc: &Value, field: &str) -> String {
    doc["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn receive(watch: Watch, doc: &Value) -> Received {
    let object = match watch.resource() {
        Resource::CiliumNode => decode(doc).map(Object::Node),
        Resource::Pod => decode(doc).map(Object::Pod),
        Resource::Namespace => decode(doc).map(Object::Namespace),
        Resource::CiliumPodIpPool | Resource::CiliumPodIpPoolV2 => decode(doc).map(Object::Pool),
        Resource::CiliumNodeConfig => decode(doc).map(Object::NodeConfig),
        Resource::CiliumEndpoint => decode::<CiliumEndpoint>(doc)
            .map(|cep| Object::Endpoint(Arc::new(EndpointSummary::from(&cep)))),
        Resource::CiliumIdentity => decode(doc).map(Object::Identity),
        Resource::Node | Resource::Event => Ok(Object::Unwatched),
    };
    let keep_raw =
        watch == Watch::OwnNode || (watch.resource() == Resource::CiliumNode && object.is_err());
    Received {
        name: meta(doc, "name"),
        namespace: meta(doc, "namespace"),
        object,
        raw: keep_raw.then(|| doc.clone()),
    }
}

/// Fold one object (or its deletion) into the snapshot.
fn apply(
    builder: &mut Builder,
    node_name: &str,
    watch: Watch,
    doc: &Value,
    deleted: bool,
    reports: &mut Vec<(Value, String)>,
) {
    if deleted {
        let (name, namespace) = (meta(doc, "name"), meta(doc, "namespace"));
        remove(builder, node_name, watch, name, namespace);
    } else {
        install(builder, node_name, watch, receive(watch, doc), reports);
    }
}

fn remove(builder: &mut Builder, node_name: &str, watch: Watch, name: String, namespace: String) {
    if watch == Watch::Nodes && name == node_name {
        // The own CiliumNode comes from its own watch only.
        return;
    }
    let resource = watch.resource();
    let snapshot = &mut builder.snapshot;
    snapshot
        .problems
        .remove(&PathBuf::from(resource.key(Some(&namespace), &name)));
    match resource {
        Resource::CiliumNode => drop(snapshot.nodes.remove(&name)),
        Resource::Pod => drop(snapshot.pods.remove(&(namespace, name))),
        Resource::Namespace => drop(snapshot.namespaces.remove(&name)),
        Resource::CiliumPodIpPool | Resource::CiliumPodIpPoolV2 => {
            drop(snapshot.pools.remove(&name));
        }
        Resource::CiliumNodeConfig => drop(snapshot.node_configs.remove(&(namespace, name))),
        Resource::CiliumEndpoint => drop(snapshot.endpoints.remove(&(namespace, name))),
        Resource::CiliumIdentity => drop(snapshot.identities.remove(&name)),
        Resource::Node | Resource::Event => {}
    }
}

/// Put one object into the snapshot. Undecodable objects keep their last good version and are
/// reported; CiliumNodes' problems are also returned for an Event.
fn install(
    builder: &mut Builder,
    node_name: &str,
    watch: Watch,
    received: Received,
    reports: &mut Vec<(Value, String)>,
) {
    let Received {
        name,
        namespace,
        object,
        raw,
    } = received;
    if watch == Watch::Nodes && name == node_name {
        // The own CiliumNode comes from its own watch only.
        return;
    }
    if watch == Watch::OwnNode
        && let Some(doc) = &raw
    {
        remember(builder, doc);
    }
    let key = watch.resource().key(Some(&namespace), &name);
    let snapshot = &mut builder.snapshot;
    match object {
        Ok(object) => {
            match object {
                Object::Node(n) => drop(snapshot.nodes.insert(name, *n)),
                Object::Pod(p) => drop(snapshot.pods.insert((namespace, name), *p)),
                Object::Namespace(n) => drop(snapshot.namespaces.insert(name, *n)),
                Object::Pool(p) => drop(snapshot.pools.insert(name, *p)),
                Object::NodeConfig(c) => {
                    drop(snapshot.node_configs.insert((namespace, name), *c));
                }
                Object::Endpoint(e) => drop(snapshot.endpoints.insert((namespace, name), e)),
                Object::Identity(i) => drop(snapshot.identities.insert(name, *i)),
                Object::Unwatched => {}
            }
            snapshot.problems.remove(&PathBuf::from(&key));
            debug!(object = %key, "updated");
        }
        Err(error) => {
            // The report the snapshot keeps and the Event says: the field's path and what is
            // wrong.
            let reason = chain(&error);
            warn!(object = %key, %reason, "object does not decode; keeping its last good version and never rewriting the field");
            snapshot
                .problems
                .insert(PathBuf::from(&key), reason.clone());
            if let Some(doc) = raw.filter(|_| watch.resource() == Resource::CiliumNode)
                && builder.reported.insert(format!("{key}: {reason}"))
            {
                reports.push((doc, reason));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bad_objects_keep_their_last_good_version() {
        let mut b = Builder::default();
        let mut reports = Vec::new();
        let good = json!({"metadata": {"name": "n1", "resourceVersion": "1"},
            "spec": {"ipam": {"podCIDRs": ["10.0.0.0/24"]}}});
        apply(&mut b, "n1", Watch::OwnNode, &good, false, &mut reports);
        let bad = json!({"metadata": {"name": "n1", "resourceVersion": "2"},
            "spec": {"ipam": {"podCIDRs": ["10.0.0.0/24", "nope"]}}});
        apply(&mut b, "n1", Watch::OwnNode, &bad, false, &mut reports);
        assert_eq!(
            b.snapshot.nodes["n1"].ipam_spec().pod_cidrs.len(),
            1,
            "the last good version stays"
        );
        let problem = &b.snapshot.problems[&PathBuf::from("ciliumnodes/n1")];
        assert!(problem.contains("spec.ipam.podCIDRs[1]"), "{problem}");
        assert_eq!(reports.len(), 1, "one Event for the problem");
        apply(&mut b, "n1", Watch::OwnNode, &bad, false, &mut reports);
        assert_eq!(reports.len(), 1, "reported once");
        assert_eq!(b.versions.len(), 2, "both raw versions are write bases");
        apply(&mut b, "n1", Watch::OwnNode, &good, false, &mut reports);
        assert!(b.snapshot.problems.is_empty());
    }

    fn object(doc: &Value) -> DynamicObject {
        serde_json::from_value(doc.clone()).expect("a DynamicObject")
    }

    #[test]
    fn the_own_node_going_away_is_flagged() {
        let mut b = Builder::default();
        let (mut buffer, mut reports) = (Vec::new(), Vec::new());
        let own = json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": "n1", "resourceVersion": "1"}});
        let mut fold = |b: &mut Builder, watch, event| {
            fold("n1", b, watch, event, &mut buffer, &mut reports);
        };
        fold(&mut b, Watch::OwnNode, Event::Init);
        fold(&mut b, Watch::OwnNode, Event::InitApply(object(&own)));
        fold(&mut b, Watch::OwnNode, Event::InitDone);
        assert!(!b.own_gone, "listed");
        fold(&mut b, Watch::Nodes, Event::Delete(object(&own)));
        assert!(!b.own_gone, "the other nodes' watch does not speak for it");
        fold(&mut b, Watch::OwnNode, Event::Delete(object(&own)));
        assert!(b.own_gone, "deleted");
        assert!(!b.snapshot.nodes.contains_key("n1"));
        b.own_gone = false;
        fold(&mut b, Watch::OwnNode, Event::Init);
        fold(&mut b, Watch::OwnNode, Event::InitDone);
        assert!(b.own_gone, "missing from a re-list");
    }

    #[test]
    fn pods_are_keyed_by_namespace_and_deleted() {
        let mut b = Builder::default();
        let mut reports = Vec::new();
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {"nodeName": "n1"}});
        apply(&mut b, "n1", Watch::Pods, &pod, false, &mut reports);
        assert!(
            b.snapshot
                .pods
                .contains_key(&("ns".to_owned(), "p".to_owned()))
        );
        apply(&mut b, "n1", Watch::Pods, &pod, true, &mut reports);
        assert!(b.snapshot.pods.is_empty());
    }
}
