//! The resource types the emulator serves: a small built-in table (core v1 nodes, pods,
//! namespaces, events; `coordination.k8s.io/v1` leases; Cilium's CRDs as the fixtures under
//! `shared/fixtures/cilium-crds` define them, with CiliumPodIPPool also served at weft's `v2`) and
//! [`ResourceDef::from_crd`], which reads the same facts from a CustomResourceDefinition document
//! so tests can check the table against the fixtures or serve another CRD. Only names, scope,
//! versions and the status subresource are read; schemas are not (no validation is modelled).

use serde_json::{Value, json};

/// One resource type (one plural in one group), as discovery describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group, `""` for core.
    pub group: String,
    /// Served versions, most preferred first (Kubernetes version priority).
    pub versions: Vec<String>,
    /// The version objects are stored in (a CRD's `storage: true` version). The others are
    /// served from it with only `apiVersion` changed, as a CRD with `conversion: None` is.
    pub storage_version: String,
    /// Plural (URL) name, e.g. `ciliumnodes`.
    pub plural: String,
    /// Singular name, e.g. `ciliumnode`.
    pub singular: String,
    /// Kind, e.g. `CiliumNode`.
    pub kind: String,
    /// Kind of a list, e.g. `CiliumNodeList`.
    pub list_kind: String,
    /// Short names (`cn`, `ciliumn`).
    pub short_names: Vec<String>,
    /// Categories (`cilium`, `all`).
    pub categories: Vec<String>,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
    /// Has a `/status` subresource: main writes keep the old status, status writes keep the rest.
    pub status_subresource: bool,
    /// A custom resource (CRD): gets `metadata.generation`; status writes ignore metadata too.
    pub custom: bool,
    /// What a create does to a `status` sent in the body.
    pub create_status: CreateStatus,
    /// Field selector paths supported beside `metadata.name` and `metadata.namespace`.
    pub field_selectors: Vec<String>,
}

/// What the API server's create strategy does with `status` in a new object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateStatus {
    /// Kept as sent (nodes; custom resources without a status subresource).
    Keep,
    /// Removed (custom resources with a status subresource).
    Drop,
    /// Replaced by this value (pods: `{"phase":"Pending"}`; namespaces: `{"phase":"Active"}`).
    Reset(Value),
}

impl ResourceDef {
    /// `plural` for core resources, `plural.group` otherwise (as in error messages).
    #[must_use]
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `apiVersion` of objects served at `version`.
    #[must_use]
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_owned()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// `apiVersion` of stored objects.
    #[must_use]
    pub fn storage_api_version(&self) -> String {
        self.api_version(&self.storage_version)
    }

    /// Whether `path` is a field this resource can be selected by.
    #[must_use]
    pub fn selectable(&self, path: &str) -> bool {
        path == "metadata.name"
            || (path == "metadata.namespace" && self.namespaced)
            || self.field_selectors.iter().any(|f| f == path)
    }

    /// The resource types of a CustomResourceDefinition (`apiextensions.k8s.io/v1`) document:
    /// one per CRD (all served versions share storage, as in the real server; the storage
    /// version is the one marked `storage: true`, else the preferred one). `None` if it is not
    /// a CRD or serves no version.
    #[must_use]
    pub fn from_crd(crd: &Value) -> Option<Self> {
        if crd["kind"] != "CustomResourceDefinition" {
            return None;
        }
        let spec = &crd["spec"];
        let names = &spec["names"];
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        };
        let served: Vec<&Value> = spec["versions"]
            .as_array()?
            .iter()
            .filter(|v| v["served"] == true)
            .collect();
        let served_names: Vec<&str> = served.iter().filter_map(|v| v["name"].as_str()).collect();
        let versions = by_priority(&served_names);
        let storage_version = served
            .iter()
            .find(|v| v["storage"] == true)
            .and_then(|v| v["name"].as_str())
            .or_else(|| versions.first().map(String::as_str))?
            .to_owned();
        let status_subresource = served
            .iter()
            .any(|v| v["subresources"].get("status").is_some());
        let plural = names["plural"].as_str()?.to_owned();
        let kind = names["kind"].as_str()?.to_owned();
        Some(Self {
            group: spec["group"].as_str()?.to_owned(),
            versions,
            storage_version,
            singular: names["singular"]
                .as_str()
                .map_or_else(|| kind.to_lowercase(), str::to_owned),
            list_kind: names["listKind"]
                .as_str()
                .map_or_else(|| format!("{kind}List"), str::to_owned),
            plural,
            kind,
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            namespaced: spec["scope"] == "Namespaced",
            status_subresource,
            custom: true,
            create_status: if status_subresource {
                CreateStatus::Drop
            } else {
                CreateStatus::Keep
            },
            field_selectors: Vec::new(),
        })
        .filter(|d| !d.versions.is_empty())
    }
}

/// Kubernetes version ordering: GA > beta > alpha, then by number (`v2` > `v1` > `v2beta1`).
#[must_use]
pub fn version_priority(version: &str) -> (u8, u32, u32) {
    let rest = version.strip_prefix('v').unwrap_or(version);
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let major = rest[..digits].parse().unwrap_or(0);
    let tail = &rest[digits..];
    if tail.is_empty() {
        (3, major, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, major, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, major, n.parse().unwrap_or(0))
    } else {
        (0, major, 0)
    }
}

fn core(plural: &str, kind: &str, namespaced: bool, short: &str) -> ResourceDef {
    ResourceDef {
        group: String::new(),
        versions: vec!["v1".to_owned()],
        storage_version: "v1".to_owned(),
        plural: plural.to_owned(),
        singular: kind.to_lowercase(),
        kind: kind.to_owned(),
        list_kind: format!("{kind}List"),
        short_names: vec![short.to_owned()],
        categories: Vec::new(),
        namespaced,
        status_subresource: true,
        custom: false,
        create_status: CreateStatus::Keep,
        field_selectors: Vec::new(),
    }
}

/// `versions` most preferred first.
fn by_priority(versions: &[&str]) -> Vec<String> {
    let mut versions: Vec<String> = versions.iter().map(|v| (*v).to_owned()).collect();
    versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    versions
}

/// A `cilium.io` CRD served at `version`, the first of which is the storage version.
fn cilium(
    version: &[&str],
    plural: &str,
    kind: &str,
    short: &[&str],
    namespaced: bool,
    status: bool,
) -> ResourceDef {
    ResourceDef {
        group: "cilium.io".to_owned(),
        versions: by_priority(version),
        storage_version: version[0].to_owned(),
        plural: plural.to_owned(),
        singular: kind.to_lowercase(),
        kind: kind.to_owned(),
        list_kind: format!("{kind}List"),
        short_names: short.iter().map(|s| (*s).to_owned()).collect(),
        categories: vec!["cilium".to_owned()],
        namespaced,
        status_subresource: status,
        custom: true,
        create_status: if status {
            CreateStatus::Drop
        } else {
            CreateStatus::Keep
        },
        field_selectors: Vec::new(),
    }
}

/// `coordination.k8s.io/v1` leases, as leader election uses them: namespaced, no status, no
/// short names, not a custom resource (no `generation`).
fn lease() -> ResourceDef {
    ResourceDef {
        group: "coordination.k8s.io".to_owned(),
        versions: vec!["v1".to_owned()],
        storage_version: "v1".to_owned(),
        plural: "leases".to_owned(),
        singular: "lease".to_owned(),
        kind: "Lease".to_owned(),
        list_kind: "LeaseList".to_owned(),
        short_names: Vec::new(),
        categories: Vec::new(),
        namespaced: true,
        status_subresource: false,
        custom: false,
        create_status: CreateStatus::Keep,
        field_selectors: Vec::new(),
    }
}

/// The built-in table: what weft's agent and operator read and write.
#[must_use]
pub fn builtin() -> Vec<ResourceDef> {
    let mut pods = core("pods", "Pod", true, "po");
    pods.categories = vec!["all".to_owned()];
    pods.create_status = CreateStatus::Reset(json!({"phase": "Pending"}));
    pods.field_selectors = [
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut nodes = core("nodes", "Node", false, "no");
    nodes.field_selectors = vec!["spec.unschedulable".to_owned()];
    let mut namespaces = core("namespaces", "Namespace", false, "ns");
    namespaces.create_status = CreateStatus::Reset(json!({"phase": "Active"}));
    namespaces.field_selectors = vec!["status.phase".to_owned()];
    let mut events = core("events", "Event", true, "ev");
    events.status_subresource = false;
    events.field_selectors = [
        "involvedObject.kind",
        "involvedObject.name",
        "reason",
        "type",
    ]
    .map(str::to_owned)
    .to_vec();
    // Served at weft's v2 too, stored at upstream's v2alpha1, as the multi-version CRD (with
    // `conversion: None`) weft ships declares.
    let pod_ip_pools = cilium(
        &["v2alpha1", "v2"],
        "ciliumpodippools",
        "CiliumPodIPPool",
        &["cpip"],
        false,
        false,
    );
    vec![
        nodes,
        pods,
        namespaces,
        events,
        cilium(
            &["v2"],
            "ciliumnodes",
            "CiliumNode",
            &["cn", "ciliumn"],
            false,
            true,
        ),
        cilium(
            &["v2", "v2alpha1"],
            "ciliumnodeconfigs",
            "CiliumNodeConfig",
            &[],
            true,
            false,
        ),
        cilium(
            &["v2"],
            "ciliumendpoints",
            "CiliumEndpoint",
            &["cep", "ciliumep"],
            true,
            false,
        ),
        cilium(
            &["v2"],
            "ciliumidentities",
            "CiliumIdentity",
            &["ciliumid"],
            false,
            true,
        ),
        pod_ip_pools,
        lease(),
    ]
}
