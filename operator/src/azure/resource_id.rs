//! ARM resource IDs: parsing (`/subscriptions/{s}/resourceGroups/{rg}/providers/{ns}/{type}/{name}…`,
//! Go SDK `arm.ParseResourceID`), the VMSS and VM parts of a NIC ID (Cilium `azureid.Parse`),
//! the VMSS/VM of a lowercased instance ID, the strict subnet-ID rule, and the instance ID
//! of a Node's `azure://` provider ID. Pure: no IO, no Azure calls.

use weft_k8s::crd::azure::PROVIDER_PREFIX;

const SUBSCRIPTIONS: &str = "subscriptions";
const RESOURCE_GROUPS: &str = "resourceGroups";
const PROVIDERS: &str = "providers";
const RESOURCES_NS: &str = "Microsoft.Resources";

/// A resource ID that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ResourceIdError {
    /// The ID does not have the shape of an ARM resource ID.
    #[error("invalid resource ID {id:?}: {reason}")]
    Invalid {
        /// The ID as given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A Node's `spec.providerID` is not an Azure one.
    #[error(
        "provider ID {provider_id:?} is not an Azure provider ID (it must start with \"azure://\")"
    )]
    NotAzureProviderId {
        /// The provider ID as given.
        provider_id: String,
    },
}

/// One parsed ARM resource ID; the levels above it are in [`ResourceId::parent`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceId {
    /// Subscription (from the `subscriptions/{id}` level), empty if none.
    pub subscription: String,
    /// Resource group (from the `resourceGroups/{rg}` level), empty if none.
    pub resource_group: String,
    /// Provider namespace, e.g. `Microsoft.Network` (`Microsoft.Resources` above providers).
    pub namespace: String,
    /// Resource type below the namespace, child types joined by `/`
    /// (`virtualNetworks/subnets`).
    pub resource_type: String,
    /// The resource's name (case kept; empty for a trailing type without a name).
    pub name: String,
    /// The enclosing resource (a VNet for a subnet, the RG for a top-level resource, …).
    pub parent: Option<Box<ResourceId>>,
}

fn invalid(id: &str, reason: &'static str) -> ResourceIdError {
    ResourceIdError::Invalid {
        id: id.to_owned(),
        reason,
    }
}

impl ResourceId {
    fn root() -> Self {
        Self {
            subscription: String::new(),
            resource_group: String::new(),
            namespace: RESOURCES_NS.to_owned(),
            resource_type: "tenants".to_owned(),
            name: String::new(),
            parent: None,
        }
    }

    fn is(&self, resource_type: &str) -> bool {
        self.namespace == RESOURCES_NS && self.resource_type == resource_type
    }

    /// The last type of the chain (`subnets` for `virtualNetworks/subnets`).
    #[must_use]
    pub fn last_type(&self) -> &str {
        self.resource_type
            .rsplit('/')
            .next()
            .unwrap_or(&self.resource_type)
    }

    /// A level below `parent` named by a `{type}/{name}` pair (child or RG/subscription).
    fn child(parent: Self, type_name: &str, name: &str) -> Self {
        let (namespace, resource_type) =
            if type_name.eq_ignore_ascii_case(RESOURCE_GROUPS) && parent.is(SUBSCRIPTIONS) {
                (RESOURCES_NS.to_owned(), RESOURCE_GROUPS.to_owned())
            } else if type_name.eq_ignore_ascii_case(SUBSCRIPTIONS) && parent.is("tenants") {
                (RESOURCES_NS.to_owned(), SUBSCRIPTIONS.to_owned())
            } else {
                (
                    parent.namespace.clone(),
                    format!("{}/{type_name}", parent.resource_type),
                )
            };
        Self::below(parent, namespace, resource_type, name)
    }

    fn below(parent: Self, namespace: String, resource_type: String, name: &str) -> Self {
        let mut subscription = parent.subscription.clone();
        let mut resource_group = parent.resource_group.clone();
        if namespace == RESOURCES_NS && resource_type == SUBSCRIPTIONS {
            name.clone_into(&mut subscription);
        } else if namespace == RESOURCES_NS && resource_type == RESOURCE_GROUPS {
            name.clone_into(&mut resource_group);
        }
        Self {
            subscription,
            resource_group,
            namespace,
            resource_type,
            name: name.to_owned(),
            parent: Some(Box::new(parent)),
        }
    }

    /// This level and those above it, innermost first.
    pub fn chain(&self) -> impl Iterator<Item = &ResourceId> {
        std::iter::successors(Some(self), |r| r.parent.as_deref())
    }
}

/// Parse an ARM resource ID (the Go SDK's `arm.ParseResourceID` rules, §3.7).
///
/// # Errors
/// [`ResourceIdError::Invalid`] for anything not shaped like a resource ID.
pub fn parse(id: &str) -> Result<ResourceId, ResourceIdError> {
    if !id.starts_with('/') {
        return Err(invalid(id, "it must start with '/'"));
    }
    let parts: Vec<&str> = id.split('/').filter(|p| !p.is_empty()).collect();
    if parts.len() < 2 {
        return Err(invalid(id, "it has fewer than two segments"));
    }
    if !parts[0].eq_ignore_ascii_case(SUBSCRIPTIONS) && !parts[0].eq_ignore_ascii_case(PROVIDERS) {
        return Err(invalid(
            id,
            "the first segment must be 'subscriptions' or 'providers'",
        ));
    }
    append_next(ResourceId::root(), &parts, id)
}

fn append_next(
    parent: ResourceId,
    parts: &[&str],
    id: &str,
) -> Result<ResourceId, ResourceIdError> {
    match parts {
        [] => Ok(parent),
        [only] => {
            if only.eq_ignore_ascii_case(SUBSCRIPTIONS)
                || only.eq_ignore_ascii_case(RESOURCE_GROUPS)
            {
                return Err(invalid(id, "a subscription or resource group needs a name"));
            }
            if parent.is(RESOURCE_GROUPS) {
                return Err(invalid(
                    id,
                    "a resource group must be followed by 'providers/{namespace}/{type}/{name}'",
                ));
            }
            Ok(ResourceId::child(parent, only, ""))
        }
        [first, ns, rest @ ..]
            if first.eq_ignore_ascii_case(PROVIDERS)
                && rest
                    .first()
                    .is_none_or(|p| p.eq_ignore_ascii_case(PROVIDERS)) =>
        {
            if !parent.is(SUBSCRIPTIONS) && !parent.is("tenants") {
                return Err(invalid(
                    id,
                    "a provider may only follow a tenant or a subscription",
                ));
            }
            let provider =
                ResourceId::below(parent, RESOURCES_NS.to_owned(), PROVIDERS.to_owned(), ns);
            append_next(provider, rest, id)
        }
        [first, ns, type_name, name, rest @ ..] if first.eq_ignore_ascii_case(PROVIDERS) => {
            let resource =
                ResourceId::below(parent, (*ns).to_owned(), (*type_name).to_owned(), name);
            append_next(resource, rest, id)
        }
        [first, name, rest @ ..] if !first.eq_ignore_ascii_case(PROVIDERS) => {
            append_next(ResourceId::child(parent, first, name), rest, id)
        }
        _ => Err(invalid(
            id,
            "'providers' must be followed by a namespace, a type and a name",
        )),
    }
}

/// The resource group, VMSS name and VMSS instance (or VM) of a NIC ID (Cilium `azureid.Parse`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicParts {
    /// Resource group of the NIC (empty if the ID is unparseable).
    pub resource_group: String,
    /// Scale set the NIC belongs to (`virtualMachineScaleSets/{vmss}` level).
    pub vmss: Option<String>,
    /// The `virtualMachines/{x}` level: the VMSS instance index (case kept).
    pub vm_id: Option<String>,
}

/// The parts of a NIC ID; an unparseable ID gives empty parts, as in Cilium.
#[must_use]
pub fn nic_parts(nic_id: &str) -> NicParts {
    let Ok(id) = parse(nic_id) else {
        return NicParts::default();
    };
    let mut parts = NicParts {
        resource_group: id.resource_group.clone(),
        ..NicParts::default()
    };
    for level in id.chain() {
        let last = level.last_type();
        if last.eq_ignore_ascii_case("virtualMachines") {
            parts.vm_id = Some(level.name.clone());
        } else if last.eq_ignore_ascii_case("virtualMachineScaleSets") {
            parts.vmss = Some(level.name.clone());
        }
    }
    parts
}

/// `(vmss, index)` of a VMSS VM instance ID (`…/microsoft.compute/virtualmachinescalesets/{vmss}/virtualmachines/{i}`,
/// compared case-insensitively), `None` for anything else.
#[must_use]
pub fn vmss_instance(instance_id: &str) -> Option<(String, String)> {
    let id = parse(instance_id).ok()?;
    if !id.namespace.eq_ignore_ascii_case("Microsoft.Compute")
        || !id
            .resource_type
            .eq_ignore_ascii_case("virtualMachineScaleSets/virtualMachines")
    {
        return None;
    }
    let parent = id.parent.as_deref()?;
    Some((parent.name.clone(), id.name))
}

/// The VM name of a standalone VM instance ID (`…/microsoft.compute/virtualmachines/{vm}`).
#[must_use]
pub fn vm_name(instance_id: &str) -> Option<String> {
    let id = parse(instance_id).ok()?;
    (id.namespace.eq_ignore_ascii_case("Microsoft.Compute")
        && id.resource_type.eq_ignore_ascii_case("virtualMachines")
        && !id.name.is_empty())
    .then_some(id.name)
}

/// Whether `id` is a subnet ID Cilium accepts: namespace exactly `Microsoft.Network`, type
/// exactly `virtualNetworks/subnets` (**case-sensitive**, §3.5), with a resource group and a VNet.
#[must_use]
pub fn is_subnet_id(id: &str) -> bool {
    parse(id).is_ok_and(|r| {
        r.namespace == "Microsoft.Network"
            && r.resource_type == "virtualNetworks/subnets"
            && !r.resource_group.is_empty()
            && !r.name.is_empty()
            && r.parent.is_some()
    })
}

/// The instance ID of a Node's `spec.providerID`: the `azure://` prefix trimmed, lowercased.
///
/// # Errors
/// [`ResourceIdError::NotAzureProviderId`] naming the value when the prefix is missing.
pub fn instance_id_from_provider_id(provider_id: &str) -> Result<String, ResourceIdError> {
    provider_id
        .strip_prefix(PROVIDER_PREFIX)
        .filter(|rest| !rest.is_empty())
        .map(str::to_lowercase)
        .ok_or_else(|| ResourceIdError::NotAzureProviderId {
            provider_id: provider_id.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBNET: &str = "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/virtualNetworks/vnet/subnets/sub";
    const VMSS_NIC: &str = "/subscriptions/S/resourceGroups/MC_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-pool/virtualMachines/3/networkInterfaces/nic0";

    #[test]
    fn parses_levels() {
        let id = parse(SUBNET).unwrap();
        assert_eq!(id.subscription, "S");
        assert_eq!(id.resource_group, "RG");
        assert_eq!(id.namespace, "Microsoft.Network");
        assert_eq!(id.resource_type, "virtualNetworks/subnets");
        assert_eq!(id.name, "sub");
        let vnet = id.parent.as_deref().unwrap();
        assert_eq!(
            (vnet.resource_type.as_str(), vnet.name.as_str()),
            ("virtualNetworks", "vnet")
        );
        let rg = vnet.parent.as_deref().unwrap();
        assert_eq!(
            (rg.resource_type.as_str(), rg.name.as_str()),
            ("resourceGroups", "RG")
        );

        let vmss = parse(VMSS_NIC).unwrap();
        assert_eq!(vmss.namespace, "Microsoft.Compute");
        assert_eq!(
            vmss.resource_type,
            "virtualMachineScaleSets/virtualMachines/networkInterfaces"
        );
        assert_eq!(vmss.chain().count(), 6); // nic, vm, vmss, rg, sub, tenant

        let lower = parse("/SUBSCRIPTIONS/s/RESOURCEGROUPS/rg/providers/ns/t/n").unwrap();
        assert_eq!(
            (lower.subscription.as_str(), lower.resource_group.as_str()),
            ("s", "rg")
        );

        let sub = parse("/subscriptions/s").unwrap();
        assert_eq!(
            (sub.resource_type.as_str(), sub.subscription.as_str()),
            ("subscriptions", "s")
        );
        // A trailing type without a name below a resource.
        let odd = parse("/subscriptions/s/resourceGroups/rg/providers/ns/t/n/child").unwrap();
        assert_eq!(
            (odd.resource_type.as_str(), odd.name.as_str()),
            ("t/child", "")
        );
        // Provider-level resource.
        let prov = parse("/subscriptions/s/providers/Microsoft.Network").unwrap();
        assert_eq!(
            (prov.resource_type.as_str(), prov.name.as_str()),
            ("providers", "Microsoft.Network")
        );
    }

    #[test]
    fn rejects_bad_ids() {
        for bad in [
            "",
            "subscriptions/s",
            "/",
            "/subscriptions",
            "/foo/bar",
            "/subscriptions/s/resourceGroups",
            "/subscriptions/s/resourceGroups/rg/odd",
            "/subscriptions/s/resourceGroups/rg/providers/ns",
            "/subscriptions/s/resourceGroups/rg/providers/ns/t",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(
                err.to_string().contains(&format!("{bad:?}")),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn nic_parts_cases() {
        let cases = [
            (VMSS_NIC, ("MC_rg", Some("aks-pool"), Some("3"))),
            (
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/vm-nic",
                ("rg", None, None),
            ),
            (
                "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/VIRTUALMACHINESCALESETS/Pool/VIRTUALMACHINES/7/networkinterfaces/n",
                ("rg", Some("Pool"), Some("7")),
            ),
            ("not-an-id", ("", None, None)),
        ];
        for (id, (rg, vmss, vm)) in cases {
            let parts = nic_parts(id);
            assert_eq!(parts.resource_group, rg, "{id}");
            assert_eq!(parts.vmss.as_deref(), vmss, "{id}");
            assert_eq!(parts.vm_id.as_deref(), vm, "{id}");
        }
    }

    #[test]
    fn instance_ids() {
        let vmss = "azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/VMSS/virtualMachines/3";
        let id = instance_id_from_provider_id(vmss).unwrap();
        assert_eq!(
            id,
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachinescalesets/vmss/virtualmachines/3"
        );
        assert_eq!(
            vmss_instance(&id),
            Some(("vmss".to_owned(), "3".to_owned()))
        );
        assert_eq!(vm_name(&id), None);

        let vm = instance_id_from_provider_id(
            "azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/VM",
        )
        .unwrap();
        assert_eq!(
            vm,
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm"
        );
        assert_eq!(vm_name(&vm).as_deref(), Some("vm"));
        assert_eq!(vmss_instance(&vm), None);
        assert_eq!(vmss_instance("garbage"), None);

        for bad in ["aws:///us-east-1a/i-1", "azure://", "/subscriptions/s"] {
            let err = instance_id_from_provider_id(bad).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn subnet_ids_are_case_sensitive() {
        assert!(is_subnet_id(SUBNET));
        assert!(is_subnet_id(
            "/subscriptions/s/resourcegroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/x"
        ));
        for bad in [
            "/subscriptions/s/resourceGroups/rg/providers/microsoft.network/virtualNetworks/v/subnets/x",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualnetworks/v/subnets/x",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v",
            "/subscriptions/s/providers/Microsoft.Network/virtualNetworks/v/subnets/x",
            "subnet",
        ] {
            assert!(!is_subnet_id(bad), "{bad}");
        }
    }
}
