//! The file layer of the configuration: `--config-dir` (a mounted ConfigMap: one file per key)
//! and `--config` (a YAML or JSON map of keys, or a whole ConfigMap manifest as `kubectl get cm
//! cilium-config -o yaml` prints it, whose `data` is then used). The one part of
//! [`crate::config`] that reads files; what a key means is [`super::AgentConfig::resolve`]'s.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde_json::{Map, Value};
use tracing::info;

/// Why `--config` or `--config-dir` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// `--config-dir` cannot be listed.
    #[error("reading --config-dir {}", dir.display())]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// A configuration file cannot be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// `--config` is not one YAML or JSON document.
    #[error(
        "{} is not one YAML or JSON document: give --config a map of cilium-config keys or the \
         cilium-config ConfigMap (`kubectl -n kube-system get cm cilium-config -o yaml`)",
        path.display()
    )]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_norway::Error,
    },
    /// `--config` is a document but not a map.
    #[error(
        "{} is a YAML {found}, not a map of cilium-config keys nor a ConfigMap manifest: write \
         one `key: value` per line, or give the cilium-config ConfigMap \
         (`kubectl -n kube-system get cm cilium-config -o yaml`)",
        path.display()
    )]
    NotAMap {
        /// The file.
        path: PathBuf,
        /// What it is instead (`list`, `string`, …).
        found: &'static str,
    },
    /// `--config` is a Kubernetes manifest of another kind than ConfigMap.
    #[error(
        "{} is a Kubernetes {kind} manifest, not a ConfigMap: give --config the cilium-config \
         ConfigMap (`kubectl -n kube-system get cm cilium-config -o yaml`) or a map of its keys",
        path.display()
    )]
    NotAConfigMap {
        /// The file.
        path: PathBuf,
        /// Its `kind`.
        kind: String,
    },
    /// A ConfigMap manifest's `data` is not a map.
    #[error(
        "the data of ConfigMap {name} in {} is a YAML {found}, not a map of keys",
        path.display()
    )]
    DataNotAMap {
        /// The file.
        path: PathBuf,
        /// The ConfigMap's `namespace/name`.
        name: String,
        /// What `data` is instead.
        found: &'static str,
    },
}

/// What `--config` held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigFile {
    /// The keys and their values.
    pub keys: BTreeMap<String, String>,
    /// `namespace/name` of the ConfigMap whose `data` they are, when the file was a manifest.
    pub config_map: Option<String>,
}

/// Read the file layer: `--config-dir`, then `--config` (its keys win). When `--config` is a
/// ConfigMap manifest, one info line says that its `data` is used.
///
/// # Errors
/// A file or the directory cannot be read, or `--config` is neither a map of keys nor a
/// ConfigMap manifest (the error names the file and what is accepted).
pub fn load(
    dir: Option<&Path>,
    file: Option<&Path>,
) -> Result<BTreeMap<String, String>, FileError> {
    let mut keys = match dir {
        Some(dir) => read_dir(dir)?,
        None => BTreeMap::new(),
    };
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|source| FileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let parsed = parse(path, &text)?;
        if let Some(name) = &parsed.config_map {
            info!(
                file = %path.display(),
                keys = parsed.keys.len(),
                "--config is the manifest of ConfigMap {name}: using its data"
            );
        }
        keys.extend(parsed.keys);
    }
    Ok(keys)
}

/// The keys of a mounted ConfigMap: one regular file per key, hidden entries (the mount's
/// `..data` links) skipped; values trimmed.
///
/// # Errors
/// The directory or a file cannot be read.
pub fn read_dir(dir: &Path) -> Result<BTreeMap<String, String>, FileError> {
    let read_dir = |source| FileError::ReadDir {
        dir: dir.to_path_buf(),
        source,
    };
    let mut keys = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(read_dir)? {
        let path = entry.map_err(read_dir)?.path();
        let Some(key) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if key.starts_with('.') || !path.is_file() {
            continue;
        }
        let value = std::fs::read_to_string(&path).map_err(|source| FileError::Read {
            path: path.clone(),
            source,
        })?;
        keys.insert(key.to_owned(), value.trim().to_owned());
    }
    Ok(keys)
}

/// The keys in the text of `--config` file `path`: a map of keys, or a ConfigMap manifest
/// (`apiVersion`, `kind: ConfigMap`, `metadata`, `data`) whose `data` they are. An empty
/// document has no keys. Values that are no strings are written as JSON (`true`, `8`,
/// `{"default": 8}`); `null` is empty.
///
/// # Errors
/// The text is no YAML/JSON document, not a map, a manifest of another kind, or a ConfigMap
/// whose `data` is not a map.
pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, FileError> {
    let document: Value = serde_norway::from_str(text).map_err(|source| FileError::Syntax {
        path: path.to_path_buf(),
        source,
    })?;
    let map = match document {
        Value::Object(map) => map,
        Value::Null => return Ok(ConfigFile::default()),
        other => {
            return Err(FileError::NotAMap {
                path: path.to_path_buf(),
                found: kind_of(&other),
            });
        }
    };
    if !map.contains_key("apiVersion") && !map.contains_key("kind") {
        return Ok(ConfigFile {
            keys: texts(map),
            config_map: None,
        });
    }
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind != "ConfigMap" {
        return Err(FileError::NotAConfigMap {
            path: path.to_path_buf(),
            kind: if kind.is_empty() {
                "(no kind)".to_owned()
            } else {
                kind.to_owned()
            },
        });
    }
    let name = config_map_name(map.get("metadata"));
    let keys = match map.get("data") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(data)) => texts(data.clone()),
        Some(other) => {
            return Err(FileError::DataNotAMap {
                path: path.to_path_buf(),
                name,
                found: kind_of(other),
            });
        }
    };
    Ok(ConfigFile {
        keys,
        config_map: Some(name),
    })
}

/// `namespace/name` from a manifest's `metadata` (`?` for what is missing).
fn config_map_name(metadata: Option<&Value>) -> String {
    let field = |key: &str| {
        metadata
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    match (field("namespace"), field("name")) {
        (Some(namespace), name) => format!("{namespace}/{}", name.as_deref().unwrap_or("?")),
        (None, name) => name.unwrap_or_else(|| "?".to_owned()),
    }
}

fn texts(map: Map<String, Value>) -> BTreeMap<String, String> {
    map.into_iter()
        .map(|(key, value)| {
            let text = match value {
                Value::String(s) => s,
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (key, text)
        })
        .collect()
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<ConfigFile, FileError> {
        parse(Path::new("/etc/weft/config.yaml"), text)
    }

    #[test]
    fn a_flat_map_is_the_keys() {
        let file = parsed("ipam: multi-pool\nenable-ipv6: true\nipam-max-allocate: 8\ndevices:\n")
            .expect("a map");
        assert_eq!(file.config_map, None);
        assert_eq!(file.keys["ipam"], "multi-pool");
        assert_eq!(file.keys["enable-ipv6"], "true");
        assert_eq!(file.keys["ipam-max-allocate"], "8");
        assert_eq!(file.keys["devices"], "");
        let json = parsed(r#"{"ipam-multi-pool-pre-allocation": {"default": 8}}"#).expect("JSON");
        assert_eq!(
            json.keys["ipam-multi-pool-pre-allocation"],
            r#"{"default":8}"#
        );
        assert_eq!(
            parsed("# nothing yet\n").expect("empty"),
            ConfigFile::default()
        );
    }

    #[test]
    fn a_configmap_manifest_gives_its_data() {
        let file = parsed(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cilium-config\n  \
             namespace: kube-system\n  uid: 5f1c\ndata:\n  ipam: multi-pool\n  \
             enable-ipv6: \"true\"\n",
        )
        .expect("a ConfigMap");
        assert_eq!(
            file.config_map.as_deref(),
            Some("kube-system/cilium-config")
        );
        assert_eq!(file.keys.len(), 2, "{:?}", file.keys);
        assert_eq!(file.keys["ipam"], "multi-pool");
        let empty =
            parsed("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n").expect("no data");
        assert_eq!(
            (empty.config_map.as_deref(), empty.keys.len()),
            (Some("c"), 0)
        );
    }

    #[test]
    fn anything_else_is_refused_naming_the_file() {
        for (text, says) in [
            ("- ipam\n- multi-pool\n", "is a YAML list"),
            ("ipam=multi-pool\n", "is a YAML string"),
            (
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n",
                "is a Kubernetes Deployment manifest, not a ConfigMap",
            ),
            (
                "apiVersion: v1\ndata:\n  ipam: crd\n",
                "is a Kubernetes (no kind) manifest",
            ),
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata: [ipam]\n",
                "the data of ConfigMap c in /etc/weft/config.yaml is a YAML list",
            ),
            ("a: 1\n---\nb: 2\n", "is not one YAML or JSON document"),
            ("ipam: [unclosed\n", "is not one YAML or JSON document"),
        ] {
            let error = parsed(text).expect_err(text).to_string();
            assert!(
                error.contains("/etc/weft/config.yaml") && error.contains(says),
                "{text:?}: {error}"
            );
        }
    }
}
