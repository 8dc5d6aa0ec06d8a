//! Documents of the embedded store: where each kind lives (laid out like the API:
//! `<plural>/<name>.yaml` for cluster-scoped kinds, `<plural>/<namespace>/<name>.yaml` for
//! namespaced ones), how a document is parsed (YAML or JSON, with the offending field named on
//! error) and how one is replaced atomically (temp file, fsync, rename, fsync of the directory).

use std::{
    fs,
    path::{Path, PathBuf},
};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::store::{ParseError, StoreError};

/// The kinds the embedded store holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `cilium.io/v2` CiliumNode (cluster-scoped).
    CiliumNode,
    /// `cilium.io/v2alpha1` CiliumPodIPPool (cluster-scoped).
    CiliumPodIpPool,
    /// `cilium.io/v2` CiliumNodeConfig (namespaced).
    CiliumNodeConfig,
    /// `v1` Pod (namespaced).
    Pod,
    /// `v1` Namespace (cluster-scoped).
    Namespace,
}

impl Kind {
    /// Every kind, in load order.
    pub const ALL: [Self; 5] = [
        Self::Namespace,
        Self::Pod,
        Self::CiliumPodIpPool,
        Self::CiliumNodeConfig,
        Self::CiliumNode,
    ];

    /// The API's plural resource name, which is also the directory name.
    #[must_use]
    pub const fn plural(self) -> &'static str {
        match self {
            Self::CiliumNode => "ciliumnodes",
            Self::CiliumPodIpPool => "ciliumpodippools",
            Self::CiliumNodeConfig => "ciliumnodeconfigs",
            Self::Pod => "pods",
            Self::Namespace => "namespaces",
        }
    }

    /// Whether objects of this kind live in a namespace.
    #[must_use]
    pub const fn namespaced(self) -> bool {
        matches!(self, Self::CiliumNodeConfig | Self::Pod)
    }

    /// The kind whose directory is `plural`.
    #[must_use]
    pub fn from_plural(plural: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.plural() == plural)
    }
}

/// Where a document sits: its kind, namespace (namespaced kinds) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DocKey {
    /// Kind.
    pub kind: Kind,
    /// Namespace ("" for cluster-scoped kinds).
    pub namespace: String,
    /// Object name (file name without extension).
    pub name: String,
}

/// The document key of `path` under `root`, or `None` if the path is not a document
/// (wrong depth, unknown directory, not `.yaml`/`.yml`/`.json`, hidden or temporary file).
#[must_use]
pub fn key_of(root: &Path, path: &Path) -> Option<DocKey> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Vec<&str> = rel.iter().map(|p| p.to_str()).collect::<Option<_>>()?;
    let (plural, namespace, file) = match parts.as_slice() {
        [plural, file] => (*plural, "", *file),
        [plural, namespace, file] => (*plural, *namespace, *file),
        _ => return None,
    };
    let kind = Kind::from_plural(plural)?;
    if kind.namespaced() == namespace.is_empty() || file.starts_with('.') {
        return None;
    }
    let name = ["yaml", "yml", "json"]
        .iter()
        .find_map(|ext| file.strip_suffix(ext)?.strip_suffix('.'))?;
    Some(DocKey {
        kind,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// Every document file under `root`, sorted.
///
/// # Errors
/// A directory exists but cannot be read.
pub fn list(root: &Path) -> Result<Vec<(DocKey, PathBuf)>, StoreError> {
    let mut out = Vec::new();
    for kind in Kind::ALL {
        let dir = root.join(kind.plural());
        let mut files = Vec::new();
        if kind.namespaced() {
            for ns in read_dir(&dir)? {
                if ns.is_dir() {
                    files.extend(read_dir(&ns)?);
                }
            }
        } else {
            files = read_dir(&dir)?;
        }
        out.extend(
            files
                .into_iter()
                .filter_map(|p| Some((key_of(root, &p)?, p))),
        );
    }
    out.sort();
    Ok(out)
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    match fs::read_dir(dir) {
        Ok(entries) => Ok(entries.filter_map(|e| Some(e.ok()?.path())).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(StoreError::Io {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Whether `path` holds JSON (by extension); YAML otherwise.
#[must_use]
pub fn is_json(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// Read `path` as a generic document.
///
/// # Errors
/// The file cannot be read or is not valid YAML/JSON.
pub fn read_value(path: &Path) -> Result<Value, StoreError> {
    let text = fs::read_to_string(path).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_text(path, &text)
}

/// Parse the text of the document at `path` (JSON or YAML by its extension) as a generic
/// document; the pure half of [`read_value`].
///
/// # Errors
/// The text is not valid YAML/JSON.
pub fn parse_text(path: &Path, text: &str) -> Result<Value, StoreError> {
    let parsed = if is_json(path) {
        serde_json::from_str(text).map_err(|source| ParseError::Json { source })
    } else {
        serde_norway::from_str(text).map_err(|source| ParseError::Yaml { source })
    };
    parsed.map_err(|source| StoreError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Decode a generic document into `T`, naming the offending field on error.
///
/// # Errors
/// The document does not match `T`'s wire format.
pub fn decode<T: DeserializeOwned>(path: &Path, value: Value) -> Result<T, StoreError> {
    serde_path_to_error::deserialize(value).map_err(|e| StoreError::Parse {
        path: path.to_path_buf(),
        source: ParseError::Field {
            field: e.path().to_string(),
            source: e.into_inner(),
        },
    })
}

/// Strings that YAML 1.1 readers (Kubernetes' `sigs.k8s.io/yaml`, PyYAML) take for booleans or
/// null; the YAML 1.2 emitter writes them plain, so they are quoted here.
const YAML11_AMBIGUOUS: [&str; 26] = [
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false",
    "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~",
];

/// YAML text of `value` in which every string a YAML 1.1 reader would misread is quoted.
fn yaml_text(value: &Value) -> Result<String, serde_norway::Error> {
    // Swap the ambiguous strings (values and keys) for unique plain placeholders, emit, then
    // put them back single-quoted: a quoted scalar is valid wherever a plain one is.
    // The placeholders must not occur in the document itself, or its own text would be
    // replaced too (found by fuzzing: a label value "weft-yaml11-quoted-000000").
    let json = value.to_string();
    let mut prefix = String::from("weft-yaml11-quoted-");
    while json.contains(prefix.as_str()) {
        prefix.insert(0, 'x');
    }
    let mut quoted = Vec::new();
    let masked = mask(value, &prefix, &mut quoted);
    let mut text = serde_norway::to_string(&masked)?;
    for (i, original) in quoted.iter().enumerate().rev() {
        text = text.replace(
            &placeholder(&prefix, i),
            &format!("'{}'", original.replace('\'', "''")),
        );
    }
    Ok(text)
}

fn placeholder(prefix: &str, i: usize) -> String {
    format!("{prefix}{i:06}")
}

fn mask(value: &Value, prefix: &str, quoted: &mut Vec<String>) -> Value {
    let mut swap = |s: &str| {
        if YAML11_AMBIGUOUS.contains(&s) {
            quoted.push(s.to_owned());
            placeholder(prefix, quoted.len() - 1)
        } else {
            s.to_owned()
        }
    };
    match value {
        Value::String(s) => Value::String(swap(s)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| mask(v, prefix, quoted)).collect())
        }
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = if YAML11_AMBIGUOUS.contains(&k.as_str()) {
                    quoted.push(k.clone());
                    placeholder(prefix, quoted.len() - 1)
                } else {
                    k.clone()
                };
                out.insert(key, mask(v, prefix, quoted));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Serialize `value` in the format of `path` and replace the file atomically.
///
/// # Errors
/// Writing, syncing or renaming failed; the old document is then untouched.
pub fn write_atomic(path: &Path, value: &Value) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = render_text(path, value).map_err(io)?;
    crate::fsutil::write_atomic(path, text.as_bytes(), true).map_err(io)
}

/// The text [`write_atomic`] stores for `value` at `path` (pretty JSON, or YAML that YAML 1.1
/// readers read back the same), ending in a newline.
///
/// # Errors
/// The value cannot be serialised.
pub fn render_text(path: &Path, value: &Value) -> Result<String, std::io::Error> {
    let mut text = if is_json(path) {
        serde_json::to_string_pretty(value)?
    } else {
        yaml_text(value).map_err(std::io::Error::other)?
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}
