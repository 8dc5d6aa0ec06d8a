//! The emulated estate as ARM answers it: subnets (with Cilium's free-count inputs), public
//! IPs and prefixes, VMs (with an instance view on `$expand`) and scale sets as JSON.

use serde_json::{Value, json};

use super::{Model, Prefix, PublicIp, ScaleSet, Vm, same};

impl Model {
    /// Subnet JSON as `Subnets.Get` answers.
    #[must_use]
    pub fn subnet_json(&self, i: usize) -> Value {
        let s = &self.subnets[i];
        let configs: Vec<Value> = s
            .holders
            .values()
            .map(|(id, _)| json!({"id": id}))
            .collect();
        json!({"name": s.name, "id": s.id, "etag": "W/\"00000000-0000-0000-0000-000000000000\"",
            "type": "Microsoft.Network/virtualNetworks/subnets",
            "properties": {"provisioningState": "Succeeded", "addressPrefix": s.cidr.to_string(),
                "ipConfigurations": configs, "privateEndpointNetworkPolicies": "Disabled",
                "privateLinkServiceNetworkPolicies": "Enabled"}})
    }

    /// Public IP JSON.
    #[must_use]
    pub fn public_ip_json(&self, ip: &PublicIp) -> Value {
        let mut props = json!({"provisioningState": "Succeeded", "ipAddress": ip.address.to_string(),
            "publicIPAddressVersion": "IPv4", "publicIPAllocationMethod": "Static",
            "idleTimeoutInMinutes": 4});
        if let Some(p) = &ip.prefix_id {
            props["publicIPPrefix"] = json!({"id": p});
        }
        if let Some(c) = &ip.ip_config {
            props["ipConfiguration"] = json!({"id": c});
        }
        json!({"name": ip.name, "id": ip.id, "type": "Microsoft.Network/publicIPAddresses",
            "location": self.location, "sku": {"name": "Standard", "tier": "Regional"},
            "properties": props})
    }

    /// Public IP prefix JSON.
    #[must_use]
    pub fn prefix_json(&self, p: &Prefix) -> Value {
        let ips: Vec<Value> = self
            .public_ips
            .iter()
            .filter(|ip| ip.prefix_id.as_deref().is_some_and(|id| same(id, &p.id)))
            .map(|ip| json!({"id": ip.id}))
            .collect();
        json!({"name": p.name, "id": p.id, "type": "Microsoft.Network/publicIPPrefixes",
            "location": self.location, "tags": p.tags, "sku": {"name": "Standard", "tier": "Regional"},
            "properties": {"provisioningState": p.state, "prefixLength": p.cidr.prefix_len(),
                "publicIPAddressVersion": "IPv4", "ipPrefix": p.cidr.to_string(),
                "publicIPAddresses": ips}})
    }

    /// VM JSON as `VirtualMachines.Get` answers.
    #[must_use]
    pub fn vm_json(&self, vm: &Vm, expand: bool) -> Value {
        let nics: Vec<Value> = vm
            .nic_ids
            .iter()
            .enumerate()
            .map(|(i, id)| json!({"id": id, "properties": {"primary": i == 0}}))
            .collect();
        let mut v = json!({"name": vm.name, "id": vm.id, "type": "Microsoft.Compute/virtualMachines",
            "location": self.location,
            "properties": {"vmId": vm.unique_id, "provisioningState": "Succeeded",
                "hardwareProfile": {"vmSize": "Standard_D4s_v3"},
                "networkProfile": {"networkInterfaces": nics}}});
        if expand {
            v["properties"]["instanceView"] = json!({"statuses": [
                {"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded"},
                {"code": "PowerState/running", "level": "Info", "displayStatus": "VM running"}]});
        }
        v
    }

    /// Scale set JSON as `VirtualMachineScaleSets.List` answers.
    #[must_use]
    pub fn scale_set_json(&self, s: &ScaleSet) -> Value {
        json!({"name": s.name, "id": s.id, "type": "Microsoft.Compute/virtualMachineScaleSets",
            "location": self.location,
            "sku": {"name": "Standard_D4s_v3", "tier": "Standard", "capacity": s.instances.len()},
            "properties": {"provisioningState": "Succeeded", "orchestrationMode": "Uniform",
                "uniqueId": format!("{:08x}-0000-4000-8000-000000000000", s.name.len()),
                "upgradePolicy": {"mode": "Manual"}}})
    }
}
