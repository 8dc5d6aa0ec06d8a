//! The emulator's object store: one table per resource type (objects by namespace and name, as
//! `serde_json::Value`), one global resourceVersion counter (a u64 bumped by every write, as
//! etcd's revision is), and per type a bounded event log (the watch cache) whose evicted
//! prefix is "compacted": a watch from a version older than that is answered 410 Expired.
//! Writes follow the API server's strategies: create fills uid, creationTimestamp, generation;
//! update and patch check `resourceVersion` preconditions; main writes keep `status` and status
//! writes keep everything else for types with a status subresource; `generation` follows spec
//! changes of custom resources; finalizers delay deletion. The API's write verbs and their
//! strategies are in `writes.rs`. No HTTP here.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::Arc,
};

use serde_json::Value;
use tokio::sync::mpsc;

mod writes;

pub use self::writes::conflict;
use self::writes::invalid;
use super::{
    meta::{self, meta_str, metadata},
    resources::ResourceDef,
    selectors::Selector,
    status::ApiError,
};

/// A stored object.
pub type Obj = Arc<Value>;

/// The type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The object appeared.
    Added,
    /// The object changed.
    Modified,
    /// The object is gone.
    Deleted,
}

/// One committed change, as the watch cache holds it.
#[derive(Debug)]
pub struct Event {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for a delete: its last state, at `rv`).
    pub object: Obj,
    /// The object before the change (`None` for a create).
    pub previous: Option<Obj>,
}

/// The part of an object a write addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The resource itself.
    Main,
    /// The `/status` subresource.
    Status,
}

/// A patch body by content type.
#[derive(Debug)]
pub enum Patch {
    /// `application/merge-patch+json`.
    Merge(Value),
    /// `application/json-patch+json`.
    Json(Value),
}

type Key = (String, String);

#[derive(Debug, Default)]
struct Table {
    objects: BTreeMap<Key, Obj>,
    log: VecDeque<Arc<Event>>,
    compacted: u64,
    watchers: Vec<mpsc::UnboundedSender<Arc<Event>>>,
}

/// Where a new watch starts.
#[derive(Debug)]
pub struct Subscription {
    /// Events to send first: the retained events after the requested version, or synthetic
    /// ADDED events for the current objects when the watch asked for the current state.
    pub initial: Vec<Arc<Event>>,
    /// Every later event of this type.
    pub events: mpsc::UnboundedReceiver<Arc<Event>>,
    /// The store's resourceVersion when the watch started.
    pub rv: u64,
}

/// All objects and the history of their changes.
#[derive(Debug)]
pub struct Store {
    tables: HashMap<String, Table>,
    rv: u64,
    seq: u64,
    salt: u64,
    history: usize,
}

impl Store {
    /// An empty store for `defs`, keeping at most `history` events per type.
    #[must_use]
    pub fn new(defs: &[ResourceDef], history: usize, salt: u64) -> Self {
        Self {
            tables: defs
                .iter()
                .map(|d| (d.plural.clone(), Table::default()))
                .collect(),
            rv: 0,
            seq: 0,
            salt,
            history: history.max(1),
        }
    }

    /// The newest resourceVersion.
    #[must_use]
    pub fn rv(&self) -> u64 {
        self.rv
    }

    fn table(&self, def: &ResourceDef) -> &Table {
        &self.tables[&def.plural]
    }

    fn key(def: &ResourceDef, namespace: Option<&str>, name: &str) -> Key {
        let ns = if def.namespaced {
            namespace.unwrap_or("")
        } else {
            ""
        };
        (ns.to_owned(), name.to_owned())
    }

    /// One object.
    ///
    /// # Errors
    /// NotFound.
    pub fn get(&self, def: &ResourceDef, ns: Option<&str>, name: &str) -> Result<Obj, ApiError> {
        self.table(def)
            .objects
            .get(&Self::key(def, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::NotFound {
                resource: def.qualified(),
                name: name.to_owned(),
            })
    }

    /// Every object of `def` (in namespace `ns` if given) that `selector` matches, in key order.
    #[must_use]
    pub fn select(&self, def: &ResourceDef, ns: Option<&str>, selector: &Selector) -> Vec<Obj> {
        self.table(def)
            .objects
            .iter()
            .filter(|((o_ns, _), o)| ns.is_none_or(|ns| ns == o_ns) && selector.matches(o))
            .map(|(_, o)| Arc::clone(o))
            .collect()
    }

    fn insert_new(&mut self, def: &ResourceDef, key: Key, mut body: Value) -> Obj {
        self.seq += 1;
        let uid = meta::uid(self.salt, self.seq);
        let meta = metadata(&mut body);
        if def.namespaced {
            meta.insert("namespace".to_owned(), Value::String(key.0.clone()));
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".to_owned(), Value::String(uid));
        meta.entry("creationTimestamp")
            .or_insert_with(|| Value::String(meta::now()));
        if def.custom {
            meta.insert("generation".to_owned(), Value::from(1));
        }
        self.commit(def, key, EventType::Added, body, None)
    }

    /// Store `body` as it is (status included), creating or replacing: the test's back door.
    /// Keeps the uid and creationTimestamp of an object it replaces.
    ///
    /// # Errors
    /// BadRequest (not this type), Invalid (no name).
    pub fn put(&mut self, def: &ResourceDef, mut body: Value) -> Result<Obj, ApiError> {
        meta::check_type(def, &mut body)?;
        let name = meta_str(&body, "name").to_owned();
        if name.is_empty() {
            return Err(invalid(def, "", "metadata.name: Required value"));
        }
        let ns = def.namespaced.then(|| {
            let ns = meta_str(&body, "namespace");
            if ns.is_empty() {
                "default".to_owned()
            } else {
                ns.to_owned()
            }
        });
        let key = Self::key(def, ns.as_deref(), &name);
        match self.table(def).objects.get(&key).cloned() {
            None => Ok(self.insert_new(def, key, body)),
            Some(old) => {
                let meta = metadata(&mut body);
                for field in ["uid", "creationTimestamp", "generation", "namespace"] {
                    if let Some(v) = old["metadata"].get(field) {
                        meta.insert(field.to_owned(), v.clone());
                    }
                }
                if def.custom && spec_changed(&old, &body, def.status_subresource) {
                    let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
                    metadata(&mut body).insert("generation".to_owned(), Value::from(generation));
                }
                Ok(self.commit(def, key, EventType::Modified, body, Some(old)))
            }
        }
    }

    /// Remove an object at once, finalizers or not: the test's back door.
    pub fn remove(&mut self, def: &ResourceDef, ns: Option<&str>, name: &str) -> Option<Obj> {
        let old = self.get(def, ns, name).ok()?;
        let key = Self::key(def, ns, name);
        Some(self.commit(def, key, EventType::Deleted, (*old).clone(), Some(old)))
    }

    /// Forget every retained event: a watch from any version before now gets 410 Expired.
    pub fn compact(&mut self) {
        let rv = self.rv;
        for table in self.tables.values_mut() {
            table.log.clear();
            table.compacted = rv;
        }
    }

    /// Start a watch of `def` from `from` (`None`: the current state as ADDED events).
    ///
    /// # Errors
    /// Expired when `from` is older than the retained history.
    pub fn subscribe(
        &mut self,
        def: &ResourceDef,
        from: Option<u64>,
    ) -> Result<Subscription, ApiError> {
        let rv = self.rv;
        let table = self.tables.get_mut(&def.plural).expect("a table per def");
        let initial = match from {
            Some(from) if from < table.compacted => {
                return Err(ApiError::Expired {
                    message: format!("too old resource version: {from} ({})", table.compacted),
                });
            }
            Some(from) => table.log.iter().filter(|e| e.rv > from).cloned().collect(),
            None => table
                .objects
                .values()
                .map(|o| {
                    Arc::new(Event {
                        rv: meta_str(o, "resourceVersion").parse().unwrap_or(0),
                        kind: EventType::Added,
                        object: Arc::clone(o),
                        previous: None,
                    })
                })
                .collect(),
        };
        let (tx, events) = mpsc::unbounded_channel();
        table.watchers.push(tx);
        Ok(Subscription {
            initial,
            events,
            rv,
        })
    }

    fn commit(
        &mut self,
        def: &ResourceDef,
        key: Key,
        kind: EventType,
        mut object: Value,
        previous: Option<Obj>,
    ) -> Obj {
        self.rv += 1;
        let rv = self.rv;
        metadata(&mut object).insert("resourceVersion".to_owned(), Value::String(rv.to_string()));
        let object = Arc::new(object);
        let history = self.history;
        let table = self.tables.get_mut(&def.plural).expect("a table per def");
        if kind == EventType::Deleted {
            table.objects.remove(&key);
        } else {
            table.objects.insert(key, Arc::clone(&object));
        }
        let event = Arc::new(Event {
            rv,
            kind,
            object: Arc::clone(&object),
            previous,
        });
        table.log.push_back(Arc::clone(&event));
        while table.log.len() > history {
            if let Some(evicted) = table.log.pop_front() {
                table.compacted = evicted.rv;
            }
        }
        table
            .watchers
            .retain(|w| w.send(Arc::clone(&event)).is_ok());
        object
    }
}

pub(super) fn spec_changed(old: &Value, new: &Value, status_subresource: bool) -> bool {
    let strip = |v: &Value| {
        let mut v = v.as_object().cloned().unwrap_or_default();
        v.remove("metadata");
        if status_subresource {
            v.remove("status");
        }
        v
    };
    strip(old) != strip(new)
}
