//! The API's write verbs on the store — create, update, patch, delete — and the strategies the
//! API server applies to them: type and identity checks, `generateName`, name validation, the
//! namespace check, `resourceVersion` and uid preconditions, status or main part kept from the
//! old object, system metadata kept, `generation` bumps, no-op detection, and finalizers.

use std::sync::Arc;

use serde_json::Value;

use super::{EventType, Key, Obj, Part, Patch, Store, spec_changed};
use crate::kube::{
    meta::{self, meta_str, metadata},
    patch::{self, PatchError},
    resources::{CreateStatus, ResourceDef},
    status::ApiError,
};

impl Store {
    /// Create an object through the API (`POST`).
    ///
    /// # Errors
    /// BadRequest, Invalid, NotFound (namespace), AlreadyExists, Internal (resourceVersion set).
    pub fn create(
        &mut self,
        def: &ResourceDef,
        ns: Option<&str>,
        mut body: Value,
    ) -> Result<Obj, ApiError> {
        meta::check_type(def, &mut body)?;
        let name = meta_str(&body, "name").to_owned();
        meta::check_identity(&body, &name, ns)?;
        let name = if name.is_empty() {
            let prefix = meta_str(&body, "generateName").to_owned();
            if prefix.is_empty() {
                return Err(invalid(
                    def,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
            self.seq += 1;
            format!("{prefix}{}", meta::name_suffix(self.salt, self.seq))
        } else {
            name
        };
        if !meta::valid_name(&name) {
            let detail = format!(
                "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"
            );
            return Err(invalid(def, &name, &detail));
        }
        if !meta_str(&body, "resourceVersion").is_empty() {
            return Err(ApiError::Internal {
                detail: "resourceVersion should not be set on objects to be created".to_owned(),
            });
        }
        if def.namespaced {
            let namespace = ns.unwrap_or("");
            let known = self.tables.get("namespaces").is_none_or(|t| {
                t.objects
                    .contains_key(&(String::new(), namespace.to_owned()))
            });
            if !known {
                return Err(ApiError::NotFound {
                    resource: "namespaces".to_owned(),
                    name: namespace.to_owned(),
                });
            }
        }
        let key = Self::key(def, ns, &name);
        if self.table(def).objects.contains_key(&key) {
            return Err(ApiError::AlreadyExists {
                resource: def.qualified(),
                name,
            });
        }
        match &def.create_status {
            CreateStatus::Keep => {}
            CreateStatus::Drop => {
                body.as_object_mut().expect("checked").remove("status");
            }
            CreateStatus::Reset(status) => body["status"] = status.clone(),
        }
        let meta = metadata(&mut body);
        meta.insert("name".to_owned(), Value::String(name));
        for field in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "uid",
            "creationTimestamp",
            "generation",
        ] {
            meta.remove(field);
        }
        Ok(self.insert_new(def, key, body))
    }

    /// Replace an object through the API (`PUT`, on the resource or its status).
    ///
    /// # Errors
    /// BadRequest, NotFound, Conflict (stale resourceVersion or uid).
    pub fn update(
        &mut self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        mut body: Value,
        part: Part,
    ) -> Result<Obj, ApiError> {
        meta::check_type(def, &mut body)?;
        meta::check_identity(&body, name, ns)?;
        let old = self.get(def, ns, name)?;
        check_preconditions(def, &old, &body)?;
        Ok(self.replace(def, Self::key(def, ns, name), &old, body, part))
    }

    /// Patch an object through the API (`PATCH`, on the resource or its status).
    ///
    /// # Errors
    /// NotFound, BadRequest (malformed patch or identity change), Invalid (patch does not
    /// apply), Conflict (a resourceVersion in the patch that is not the current one).
    pub fn patch(
        &mut self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        patch: &Patch,
        part: Part,
    ) -> Result<Obj, ApiError> {
        let old = self.get(def, ns, name)?;
        let mut doc = (*old).clone();
        match patch {
            Patch::Merge(p) => {
                if !p.is_object() {
                    return Err(ApiError::BadRequest {
                        message: "a merge patch must be a JSON object".to_owned(),
                    });
                }
                patch::merge(&mut doc, p);
            }
            Patch::Json(p) => {
                doc = patch::json_patch(&doc, p).map_err(|e| match e {
                    PatchError::Malformed { .. } => ApiError::BadRequest {
                        message: e.to_string(),
                    },
                    _ => invalid(def, name, &e.to_string()),
                })?;
            }
        }
        meta::check_type(def, &mut doc)?;
        meta::check_identity(&doc, name, ns)?;
        check_preconditions(def, &old, &doc)?;
        Ok(self.replace(def, Self::key(def, ns, name), &old, doc, part))
    }

    /// Apply a write's strategy to `new` (the old status or the old rest restored, system
    /// metadata kept, generation bumped) and commit it unless nothing changed.
    fn replace(
        &mut self,
        def: &ResourceDef,
        key: Key,
        old: &Obj,
        mut new: Value,
        part: Part,
    ) -> Obj {
        let fields = new.as_object_mut().expect("checked by check_type");
        match part {
            Part::Main if def.status_subresource => match old.get("status") {
                Some(status) => {
                    fields.insert("status".to_owned(), status.clone());
                }
                None => {
                    fields.remove("status");
                }
            },
            Part::Main => {}
            Part::Status => {
                let status = fields.remove("status");
                let sent_meta = fields.remove("metadata");
                new = (**old).clone();
                let fields = new.as_object_mut().expect("stored objects are objects");
                match status {
                    Some(status) => fields.insert("status".to_owned(), status),
                    None => fields.remove("status"),
                };
                // Core types take metadata changes with a status write; custom resources do not.
                if let (false, Some(meta)) = (def.custom, sent_meta) {
                    fields.insert("metadata".to_owned(), meta);
                }
            }
        }
        let old_meta = old["metadata"].as_object().cloned().unwrap_or_default();
        let meta = metadata(&mut new);
        for field in [
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "name",
            "namespace",
            "resourceVersion",
        ] {
            match old_meta.get(field) {
                Some(v) => meta.insert(field.to_owned(), v.clone()),
                None => meta.remove(field),
            };
        }
        if def.custom && part == Part::Main && spec_changed(old, &new, def.status_subresource) {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            metadata(&mut new).insert("generation".to_owned(), Value::from(generation));
        }
        if new == **old {
            return Arc::clone(old);
        }
        let finalized = new["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty);
        if old["metadata"].get("deletionTimestamp").is_some() && finalized {
            return self.commit(def, key, EventType::Deleted, new, Some(Arc::clone(old)));
        }
        self.commit(def, key, EventType::Modified, new, Some(Arc::clone(old)))
    }

    /// Delete an object through the API (`DELETE`): at once, or only marked
    /// (`deletionTimestamp`) while it has finalizers. `options` is the DeleteOptions body.
    ///
    /// # Errors
    /// NotFound, Conflict (a uid or resourceVersion precondition that does not hold).
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        options: &Value,
    ) -> Result<Obj, ApiError> {
        let old = self.get(def, ns, name)?;
        let pre = &options["preconditions"];
        for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            if let Some(want) = pre[field].as_str()
                && want != meta_str(&old, field)
            {
                return Err(conflict(
                    def,
                    name,
                    &format!(
                        "Precondition failed: {label} in precondition: {want}, {label} in object meta: {}",
                        meta_str(&old, field)
                    ),
                ));
            }
        }
        let key = Self::key(def, ns, name);
        let finalizers = old["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if !finalizers {
            return Ok(self.commit(def, key, EventType::Deleted, (*old).clone(), Some(old)));
        }
        if old["metadata"].get("deletionTimestamp").is_some() {
            return Ok(old);
        }
        let mut marked = (*old).clone();
        let meta = metadata(&mut marked);
        meta.insert("deletionTimestamp".to_owned(), Value::String(meta::now()));
        meta.insert("deletionGracePeriodSeconds".to_owned(), Value::from(0));
        Ok(self.commit(def, key, EventType::Modified, marked, Some(old)))
    }
}

fn check_preconditions(def: &ResourceDef, old: &Value, new: &Value) -> Result<(), ApiError> {
    let name = meta_str(old, "name");
    let rv = meta_str(new, "resourceVersion");
    if !rv.is_empty() && rv != meta_str(old, "resourceVersion") {
        return Err(conflict(
            def,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    let uid = meta_str(new, "uid");
    if !uid.is_empty() && uid != meta_str(old, "uid") {
        let detail = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta_str(old, "uid")
        );
        return Err(conflict(def, name, &detail));
    }
    Ok(())
}

/// A 409 Conflict on `name`.
#[must_use]
pub fn conflict(def: &ResourceDef, name: &str, detail: &str) -> ApiError {
    ApiError::Conflict {
        resource: def.qualified(),
        name: name.to_owned(),
        detail: detail.to_owned(),
    }
}

pub(super) fn invalid(def: &ResourceDef, name: &str, detail: &str) -> ApiError {
    ApiError::Invalid {
        resource: def.qualified(),
        name: name.to_owned(),
        detail: detail.to_owned(),
    }
}
