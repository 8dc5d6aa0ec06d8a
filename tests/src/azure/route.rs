//! URL routing: maps a request (method and path, segments compared case-insensitively as ARM
//! does) to one of the ARM operations Cilium's Azure IPAM calls, an async-operation poll, an
//! IMDS path or the AAD token endpoint; names each operation as Cilium's API metrics do and
//! gives the RBAC action ARM authorizes it as. Also decodes query strings and form bodies.
//! Nothing here reads the model.

use std::{collections::HashMap, fmt};

/// What a request is, named like Cilium's `cilium_operator_azure_api_duration_seconds`
/// `operation` label where Cilium calls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// `GET .../Microsoft.Compute/virtualMachineScaleSets`.
    VmssList,
    /// `GET .../virtualMachineScaleSets/{vmss}/networkInterfaces`.
    VmssNicList,
    /// `GET .../Microsoft.Network/networkInterfaces`.
    NicList,
    /// `GET .../virtualMachineScaleSets/{vmss}/virtualMachines/{i}/networkInterfaces`.
    VmssVmNicList,
    /// `GET .../virtualMachineScaleSets/{vmss}/virtualMachines/{i}/networkInterfaces/{nic}`.
    VmssVmNicGet,
    /// `GET .../virtualNetworks/{vnet}/subnets/{subnet}`.
    SubnetGet,
    /// `GET .../Microsoft.Network/networkInterfaces/{nic}`.
    NicGet,
    /// `PUT .../Microsoft.Network/networkInterfaces/{nic}`.
    NicPut,
    /// `GET .../virtualMachineScaleSets/{vmss}/virtualMachines/{i}`.
    VmssVmGet,
    /// `PUT .../virtualMachineScaleSets/{vmss}/virtualMachines/{i}`.
    VmssVmPut,
    /// `GET .../Microsoft.Compute/virtualMachines/{vm}`.
    VmGet,
    /// `GET .../Microsoft.Network/publicIPPrefixes`.
    PrefixList,
    /// `GET .../Microsoft.Network/publicIPAddresses/{name}`.
    PublicIpGet,
    /// `GET .../virtualMachines/{i}/networkInterfaces/{nic}/ipconfigurations/{c}/publicipaddresses`.
    VmssVmPublicIpList,
    /// `GET /subscriptions/{s}/providers/{ns}/locations/{loc}/operations/{id}` (either URL).
    AsyncOperation,
    /// `GET /metadata/instance...`.
    ImdsInstance,
    /// `GET /metadata/identity/oauth2/token`.
    ImdsToken,
    /// `POST /{tenant}/oauth2/v2.0/token`.
    AadToken,
    /// Anything else.
    Unknown,
}

impl Operation {
    /// Cilium's metric name for it (or the emulator's, for the ones Cilium does not name).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VmssList => "VirtualMachineScaleSets.List",
            Self::VmssNicList => "Interfaces.ListVirtualMachineScaleSetNetworkInterfaces",
            Self::NicList => "Interfaces.List",
            Self::VmssVmNicList => "Interfaces.ListVirtualMachineScaleSetVMNetworkInterfaces",
            Self::VmssVmNicGet => "Interfaces.GetVirtualMachineScaleSetNetworkInterface",
            Self::SubnetGet => "Subnets.Get",
            Self::NicGet => "Interfaces.Get",
            Self::NicPut => "Interfaces.CreateOrUpdate",
            Self::VmssVmGet => "VirtualMachineScaleSetVMs.Get",
            Self::VmssVmPut => "VirtualMachineScaleSetVMs.Update",
            Self::VmGet => "VirtualMachines.Get",
            Self::PrefixList => "PublicIPPrefixes.List",
            Self::PublicIpGet => "PublicIPAddresses.Get",
            Self::VmssVmPublicIpList => {
                "PublicIPAddresses.ListVirtualMachineScaleSetVMPublicIPAddresses"
            }
            Self::AsyncOperation => "AsyncOperation.Get",
            Self::ImdsInstance => "IMDS.Instance",
            Self::ImdsToken => "IMDS.Token",
            Self::AadToken => "AAD.Token",
            Self::Unknown => "Unknown",
        }
    }

    /// The RBAC action ARM checks on the request's scope (none: not an RBAC-checked call).
    #[must_use]
    pub fn action(self) -> Option<&'static str> {
        Some(match self {
            Self::VmssList => "Microsoft.Compute/virtualMachineScaleSets/read",
            Self::VmssNicList => "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read",
            Self::NicList | Self::NicGet => "Microsoft.Network/networkInterfaces/read",
            Self::VmssVmNicList | Self::VmssVmNicGet => {
                "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces/read"
            }
            Self::SubnetGet => "Microsoft.Network/virtualNetworks/subnets/read",
            Self::NicPut => "Microsoft.Network/networkInterfaces/write",
            Self::VmssVmGet => "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read",
            Self::VmssVmPut => "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/write",
            Self::VmGet => "Microsoft.Compute/virtualMachines/read",
            Self::PrefixList => "Microsoft.Network/publicIPPrefixes/read",
            Self::PublicIpGet => "Microsoft.Network/publicIPAddresses/read",
            Self::VmssVmPublicIpList => {
                "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces/ipConfigurations/publicIPAddresses/read"
            }
            Self::AsyncOperation
            | Self::ImdsInstance
            | Self::ImdsToken
            | Self::AadToken
            | Self::Unknown => return None,
        })
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A routed ARM request: the operation and the names in its path (case as sent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    /// Subscription in the path.
    pub subscription: String,
    /// Resource group in the path (empty for async operations).
    pub resource_group: String,
    /// Scale set, VM, NIC, VNet, public IP or operation-namespace name.
    pub name: String,
    /// Scale set instance id, subnet name, or location.
    pub child: String,
    /// NIC name (under a scale set VM) or operation id.
    pub nic: String,
    /// ipConfiguration name (public IP list).
    pub ip_config: String,
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// An ARM call.
    Arm(Operation, Target),
    /// `/metadata/instance/...`: the path below `/metadata/instance`.
    ImdsInstance(String),
    /// `/metadata/identity/oauth2/token`.
    ImdsToken,
    /// `/{tenant}/oauth2/v2.0/token`.
    AadToken(String),
    /// Nothing served there.
    Unknown,
}

impl Route {
    /// The operation for logs and faults.
    #[must_use]
    pub fn operation(&self) -> Operation {
        match self {
            Self::Arm(op, _) => *op,
            Self::ImdsInstance(_) => Operation::ImdsInstance,
            Self::ImdsToken => Operation::ImdsToken,
            Self::AadToken(_) => Operation::AadToken,
            Self::Unknown => Operation::Unknown,
        }
    }
}

fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Route `method path`.
#[expect(
    clippy::too_many_lines,
    reason = "the routing table: one arm per ARM path, side by side"
)]
#[must_use]
pub fn route(method: &str, path: &str) -> Route {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    if segs.len() >= 2 && eq(segs[0], "metadata") {
        if eq(segs[1], "instance") {
            return Route::ImdsInstance(segs[2..].join("/"));
        }
        if segs.len() == 4
            && eq(segs[1], "identity")
            && eq(segs[2], "oauth2")
            && eq(segs[3], "token")
        {
            return Route::ImdsToken;
        }
        return Route::Unknown;
    }
    if segs.len() == 4 && eq(segs[1], "oauth2") && eq(segs[2], "v2.0") && eq(segs[3], "token") {
        return Route::AadToken(segs[0].to_owned());
    }
    if segs.len() < 2 || !eq(segs[0], "subscriptions") {
        return Route::Unknown;
    }
    let mut t = Target {
        subscription: segs[1].to_owned(),
        ..Target::default()
    };
    let get = method == "GET";
    let put = method == "PUT";
    // /subscriptions/{s}/providers/{ns}/locations/{loc}/operations/{id}
    if let [_, _, p, ns, l, loc, o, id] = segs.as_slice()
        && eq(p, "providers")
        && eq(l, "locations")
        && eq(o, "operations")
        && get
    {
        (*ns).clone_into(&mut t.name);
        (*loc).clone_into(&mut t.child);
        (*id).clone_into(&mut t.nic);
        return Route::Arm(Operation::AsyncOperation, t);
    }
    if segs.len() < 6 || !eq(segs[2], "resourceGroups") || !eq(segs[4], "providers") {
        return Route::Unknown;
    }
    segs[3].clone_into(&mut t.resource_group);
    let rest = &segs[5..];
    let lower: Vec<String> = rest.iter().map(|s| s.to_ascii_lowercase()).collect();
    let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
    let name = |i: usize| rest[i].to_owned();
    let op = match (lower.as_slice(), get, put) {
        (["microsoft.compute", "virtualmachinescalesets"], true, _) => Operation::VmssList,
        (
            [
                "microsoft.compute",
                "virtualmachinescalesets",
                _,
                "networkinterfaces",
            ],
            true,
            _,
        ) => {
            t.name = name(2);
            Operation::VmssNicList
        }
        (
            [
                "microsoft.compute",
                "virtualmachinescalesets",
                _,
                "virtualmachines",
                _,
            ],
            g,
            p,
        ) if g || p => {
            t.name = name(2);
            t.child = name(4);
            if g {
                Operation::VmssVmGet
            } else {
                Operation::VmssVmPut
            }
        }
        (
            [
                "microsoft.compute",
                "virtualmachinescalesets",
                _,
                "virtualmachines",
                _,
                "networkinterfaces",
            ],
            true,
            _,
        ) => {
            t.name = name(2);
            t.child = name(4);
            Operation::VmssVmNicList
        }
        (
            [
                "microsoft.compute",
                "virtualmachinescalesets",
                _,
                "virtualmachines",
                _,
                "networkinterfaces",
                _,
            ],
            true,
            _,
        ) => {
            t.name = name(2);
            t.child = name(4);
            t.nic = name(6);
            Operation::VmssVmNicGet
        }
        (
            [
                "microsoft.compute",
                "virtualmachinescalesets",
                _,
                "virtualmachines",
                _,
                "networkinterfaces",
                _,
                "ipconfigurations",
                _,
                "publicipaddresses",
            ],
            true,
            _,
        ) => {
            t.name = name(2);
            t.child = name(4);
            t.nic = name(6);
            t.ip_config = name(8);
            Operation::VmssVmPublicIpList
        }
        (["microsoft.compute", "virtualmachines", _], true, _) => {
            t.name = name(2);
            Operation::VmGet
        }
        (["microsoft.network", "networkinterfaces"], true, _) => Operation::NicList,
        (["microsoft.network", "networkinterfaces", _], g, p) if g || p => {
            t.name = name(2);
            if g {
                Operation::NicGet
            } else {
                Operation::NicPut
            }
        }
        (["microsoft.network", "virtualnetworks", _, "subnets", _], true, _) => {
            t.name = name(2);
            t.child = name(4);
            Operation::SubnetGet
        }
        (["microsoft.network", "publicipprefixes"], true, _) => Operation::PrefixList,
        (["microsoft.network", "publicipaddresses", _], true, _) => {
            t.name = name(2);
            Operation::PublicIpGet
        }
        _ => return Route::Unknown,
    };
    Route::Arm(op, t)
}

/// Decode `k=v&k=v` (`application/x-www-form-urlencoded`: `+` is a space, `%XX` a byte).
#[must_use]
pub fn form(text: &str) -> HashMap<String, String> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_ignore_case() {
        let p = "/subscriptions/S/resourcegroups/rg/providers/microsoft.compute/\
                 virtualmachinescalesets/vmss/virtualmachines/3/networkinterfaces";
        let Route::Arm(op, t) = route("GET", p) else {
            panic!("not routed")
        };
        assert_eq!(op, Operation::VmssVmNicList);
        assert_eq!((t.name.as_str(), t.child.as_str()), ("vmss", "3"));
        assert_eq!(route("DELETE", p), Route::Unknown);
        assert_eq!(
            route("POST", "/tenant-1/oauth2/v2.0/token"),
            Route::AadToken("tenant-1".into())
        );
    }

    #[test]
    fn form_decoding() {
        let f = form("scope=https%3A%2F%2Fmanagement.azure.com%2F.default&a=b+c&x=%");
        assert_eq!(f["scope"], "https://management.azure.com/.default");
        assert_eq!(f["a"], "b c");
        assert_eq!(f["x"], "%");
    }
}
