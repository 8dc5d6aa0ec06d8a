//! URL routing and query strings: maps a request path to a discovery document or to a resource
//! request (type, version, namespace, name, `/status`), the way the API server lays out its
//! paths (`/api/v1/...`, `/apis/<group>/<version>/...`, `namespaces/<ns>/` for namespaced
//! types), and decodes `application/x-www-form-urlencoded` query strings as kube-rs writes them.

use std::collections::HashMap;

use super::{resources::ResourceDef, status::ApiError};

/// Where a path leads.
#[derive(Debug)]
pub enum Route<'a> {
    /// `/version`.
    Version,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`.
    GroupVersion {
        /// Group (`""` for core).
        group: String,
        /// Version.
        version: String,
    },
    /// A collection, an object, or an object's status.
    Resource(Target<'a>),
}

/// A resource request's object(s).
#[derive(Debug)]
pub struct Target<'a> {
    /// The type.
    pub def: &'a ResourceDef,
    /// The version in the URL.
    pub version: String,
    /// `namespaces/<ns>/` in the URL.
    pub namespace: Option<String>,
    /// The object's name (none for the collection).
    pub name: Option<String>,
    /// `/status`.
    pub status: bool,
}

impl Target<'_> {
    /// The counters' resource label: `plural` or `plural/status`.
    #[must_use]
    pub fn label(&self) -> String {
        if self.status {
            format!("{}/status", self.def.plural)
        } else {
            self.def.plural.clone()
        }
    }
}

fn not_found() -> ApiError {
    ApiError::NotFound {
        resource: String::new(),
        name: String::new(),
    }
}

/// Route `path`.
///
/// # Errors
/// NotFound for a path the emulator does not serve.
pub fn route<'a>(defs: &'a [ResourceDef], path: &str) -> Result<Route<'a>, ApiError> {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    let served = |group: &str, version: &str| {
        defs.iter()
            .any(|d| d.group == group && d.versions.iter().any(|v| v == version))
    };
    match segs[..] {
        ["version"] => Ok(Route::Version),
        ["api"] => Ok(Route::CoreVersions),
        ["apis"] => Ok(Route::Groups),
        ["apis", group] if defs.iter().any(|d| d.group == group) => {
            Ok(Route::Group(group.to_owned()))
        }
        ["api", version] if served("", version) => Ok(Route::GroupVersion {
            group: String::new(),
            version: version.to_owned(),
        }),
        ["apis", group, version] if served(group, version) => Ok(Route::GroupVersion {
            group: group.to_owned(),
            version: version.to_owned(),
        }),
        ["api", version, ref rest @ ..] => resource(defs, "", version, rest),
        ["apis", group, version, ref rest @ ..] => resource(defs, group, version, rest),
        _ => Err(not_found()),
    }
}

fn resource<'a>(
    defs: &'a [ResourceDef],
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Route<'a>, ApiError> {
    let find = |plural: &str, namespaced: bool| {
        defs.iter().find(|d| {
            d.group == group
                && d.plural == plural
                && d.namespaced == namespaced
                && d.versions.iter().any(|v| v == version)
        })
    };
    let (def, namespace, tail) = match rest {
        ["namespaces", ns, plural, tail @ ..] if find(plural, true).is_some() => {
            (find(plural, true), Some((*ns).to_owned()), tail)
        }
        [plural, tail @ ..] => {
            let def =
                find(plural, false).or_else(|| find(plural, true).filter(|_| tail.is_empty()));
            (def, None, tail)
        }
        [] => (None, None, rest),
    };
    let def = def.ok_or_else(not_found)?;
    let (name, status) = match tail {
        [] => (None, false),
        [name] => (Some((*name).to_owned()), false),
        [name, "status"] if def.status_subresource => (Some((*name).to_owned()), true),
        _ => return Err(not_found()),
    };
    Ok(Route::Resource(Target {
        def,
        version: version.to_owned(),
        namespace,
        name,
        status,
    }))
}

/// Percent-decode one URL component (`+` is a space, as in form encoding).
#[must_use]
pub fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// Decode a query string (`a=1&b=x%3Dy`; empty pairs, as kube-rs's leading `&`, are skipped).
#[must_use]
pub fn query(text: Option<&str>) -> HashMap<String, String> {
    text.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::builtin;

    #[test]
    fn paths_and_queries() {
        let defs = builtin();
        let target = |p: &str| match route(&defs, p).unwrap() {
            Route::Resource(t) => (t.def.plural.clone(), t.namespace, t.name, t.status),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            target("/api/v1/namespaces/a/pods/b"),
            ("pods".into(), Some("a".into()), Some("b".into()), false)
        );
        assert_eq!(target("/api/v1/pods"), ("pods".into(), None, None, false));
        assert_eq!(
            target("/api/v1/namespaces/a/status"),
            ("namespaces".into(), None, Some("a".into()), true)
        );
        assert_eq!(
            target("/api/v1/namespaces"),
            ("namespaces".into(), None, None, false)
        );
        assert_eq!(
            target("/apis/cilium.io/v2/ciliumnodes/n1/status"),
            ("ciliumnodes".into(), None, Some("n1".into()), true)
        );
        assert!(route(&defs, "/apis/cilium.io/v2/ciliumnodeconfigs/x").is_err());
        assert_eq!(
            target("/apis/cilium.io/v2/ciliumpodippools"),
            ("ciliumpodippools".into(), None, None, false)
        );
        assert!(route(&defs, "/apis/cilium.io/v2alpha1/ciliumidentities").is_err());
        assert_eq!(
            target("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/weft"),
            (
                "leases".into(),
                Some("kube-system".into()),
                Some("weft".into()),
                false
            )
        );
        assert!(
            route(
                &defs,
                "/apis/coordination.k8s.io/v1/namespaces/a/leases/b/status"
            )
            .is_err()
        );
        assert!(matches!(
            route(&defs, "/apis/cilium.io/v2alpha1").unwrap(),
            Route::GroupVersion { .. }
        ));
        let q = query(Some(
            "&fieldSelector=metadata.name%3Dn1&labelSelector=a+in+(b)&watch=true",
        ));
        assert_eq!(q["fieldSelector"], "metadata.name=n1");
        assert_eq!(q["labelSelector"], "a in (b)");
        assert_eq!(decode("100%"), "100%");
    }
}
