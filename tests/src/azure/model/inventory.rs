//! Changes to the emulated estate outside ARM's PUTs: VMs and scale set instances added and
//! deleted (tests and scenarios), their NICs created and dropped with their addresses.

use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use super::{Instance, Model, Vm, same};
use crate::azure::{error::ArmError, scenario::NicSpec};

impl Model {
    /// A standalone VM with its NICs, added now.
    ///
    /// # Errors
    /// A duplicate name, an unknown subnet, a full subnet.
    pub fn add_vm(&mut self, name: &str, nics: &[NicSpec]) -> Result<(), ArmError> {
        if self.vms.iter().any(|v| same(&v.name, name)) {
            return Err(ArmError::new(409, "Conflict", format!("VM {name} exists")));
        }
        let vm = Vm {
            name: name.to_owned(),
            id: self.compute_id("virtualMachines", name),
            unique_id: self.uuid(),
            nic_ids: Vec::new(),
        };
        let vm_id = vm.id.clone();
        self.vms.push(vm);
        for (i, spec) in nics.iter().enumerate() {
            let nic_id = self.network_id("networkInterfaces", &spec.name);
            let primary = spec.primary.unwrap_or(i == 0);
            let nic = self.new_nic(&nic_id, &spec.name, &vm_id, primary, spec)?;
            self.nics.push(nic);
            let v = self.vms.last_mut().expect("just pushed");
            if primary {
                v.nic_ids.insert(0, nic_id);
            } else {
                v.nic_ids.push(nic_id);
            }
        }
        Ok(())
    }

    /// Remove a standalone VM and its NICs (their addresses and public IPs go back).
    pub fn delete_vm(&mut self, name: &str) -> bool {
        let Some(i) = self.vms.iter().position(|v| same(&v.name, name)) else {
            return false;
        };
        let vm = self.vms.remove(i);
        for nic in vm.nic_ids {
            self.drop_nic(&nic);
        }
        true
    }

    /// A scale set instance with its NICs (the scale set's model unless `nics` is given).
    ///
    /// # Errors
    /// No such scale set, a duplicate index, an unknown subnet, a full subnet.
    pub fn add_instance(
        &mut self,
        set: &str,
        index: u32,
        nics: Option<&[NicSpec]>,
    ) -> Result<(), ArmError> {
        let s = self.scale_set(set).ok_or_else(|| {
            ArmError::resource_not_found(
                &format!("Microsoft.Compute/virtualMachineScaleSets/{set}"),
                &self.group,
            )
        })?;
        let index = index.to_string();
        if self.instance(set, &index).is_some() {
            return Err(ArmError::new(
                409,
                "Conflict",
                format!("instance {index} exists"),
            ));
        }
        let specs = nics.map_or_else(|| self.scale_sets[s].model.clone(), <[NicSpec]>::to_vec);
        let set_name = self.scale_sets[s].name.clone();
        let id = format!("{}/virtualMachines/{index}", self.scale_sets[s].id);
        let mut configs = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let subnet = self.subnet_ref(&spec.subnet)?;
            let subnet_id = self.subnets[subnet].id.clone();
            let primary = spec.primary.unwrap_or(i == 0);
            let asgs: Vec<Value> = spec
                .asgs
                .iter()
                .map(|a| json!({"id": self.network_id("applicationSecurityGroups", a)}))
                .collect();
            let mut ip_configs = vec![json!({"name": "ipconfig1", "properties": {
                "primary": true, "privateIPAddressVersion": "IPv4", "subnet": {"id": subnet_id},
                "applicationSecurityGroups": asgs}})];
            for k in 0..spec.secondary_ips {
                ip_configs.push(json!({"name": format!("ipconfig{}", k + 2), "properties": {
                    "primary": false, "privateIPAddressVersion": "IPv4",
                    "subnet": {"id": subnet_id}}}));
            }
            let mut props = json!({"primary": primary, "enableAcceleratedNetworking": false,
                "ipConfigurations": ip_configs});
            if let Some(nsg) = &spec.nsg {
                props["networkSecurityGroup"] =
                    json!({"id": self.network_id("networkSecurityGroups", nsg)});
            }
            configs.push(json!({"name": spec.name, "properties": props}));
        }
        let properties = json!({
            "osProfile": {"computerName": format!("{set_name}{index:0>6}")},
            "storageProfile": {"imageReference": {"publisher": "microsoft-aks", "offer": "aks",
                "sku": "aks-ubuntu-2204", "version": "2024.01.01"},
                "osDisk": {"osType": "Linux", "createOption": "FromImage"}},
            "networkProfileConfiguration": {"networkInterfaceConfigurations": configs},
        });
        let Value::Object(properties) = properties else {
            unreachable!("an object literal")
        };
        let instance = Instance {
            index: index.clone(),
            id,
            vm_id: self.uuid(),
            properties: Map::new(),
            state: "Succeeded".to_owned(),
        };
        self.scale_sets[s].instances.push(instance);
        let (si, ii) = self.instance(&set_name, &index).expect("just added");
        crate::azure::vmss::apply_model(self, si, ii, properties, "Succeeded", &mut Vec::new())?;
        // Addresses given at start are claimed as the scenario says.
        for spec in &specs {
            if let Some(addr) = spec.address {
                let nic_id = format!(
                    "{}/networkInterfaces/{}",
                    self.scale_sets[si].instances[ii].id, spec.name
                );
                self.move_primary(&nic_id, addr)?;
            }
        }
        Ok(())
    }

    /// Remove a scale set instance and its NICs.
    pub fn delete_instance(&mut self, set: &str, index: &str) -> bool {
        let Some((s, i)) = self.instance(set, index) else {
            return false;
        };
        let inst = self.scale_sets[s].instances.remove(i);
        let prefix = format!("{}/networkinterfaces/", inst.id.to_ascii_lowercase());
        let ids: Vec<String> = self
            .nics
            .iter()
            .filter_map(|n| n["id"].as_str())
            .filter(|id| id.to_ascii_lowercase().starts_with(&prefix))
            .map(str::to_owned)
            .collect();
        for id in ids {
            self.drop_nic(&id);
        }
        true
    }

    /// Remove a NIC, its addresses, and the scale set public IPs of its configs.
    pub fn drop_nic(&mut self, id: &str) {
        let Some(i) = self.nic_index(id) else { return };
        let nic = self.nics.remove(i);
        for cfg in nic["properties"]["ipConfigurations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let cfg_id = cfg["id"].as_str().unwrap_or("");
            self.release(cfg_id);
            self.public_ips.retain(|p| {
                !(p.vmss_managed && p.ip_config.as_deref().is_some_and(|c| same(c, cfg_id)))
            });
            for p in &mut self.public_ips {
                if p.ip_config.as_deref().is_some_and(|c| same(c, cfg_id)) {
                    p.ip_config = None;
                }
            }
        }
    }

    /// A standalone NIC's JSON with `ipconfig1` (and any secondaries) addressed.
    fn new_nic(
        &mut self,
        id: &str,
        name: &str,
        vm_id: &str,
        primary: bool,
        spec: &NicSpec,
    ) -> Result<Value, ArmError> {
        if self.nic_index(id).is_some() {
            return Err(ArmError::new(409, "Conflict", format!("NIC {id} exists")));
        }
        let subnet = self.subnet_ref(&spec.subnet)?;
        let subnet_id = self.subnets[subnet].id.clone();
        let asgs: Vec<Value> = spec
            .asgs
            .iter()
            .map(|a| json!({"id": self.network_id("applicationSecurityGroups", a)}))
            .collect();
        let mut configs = Vec::new();
        for k in 0..=spec.secondary_ips {
            let cfg_name = format!("ipconfig{}", k + 1);
            let cfg_id = format!("{id}/ipConfigurations/{cfg_name}");
            let addr = match (k, spec.address) {
                (0, Some(a)) => {
                    self.claim(subnet, &cfg_id, a)?;
                    a
                }
                _ => self.allocate(subnet, &cfg_id)?,
            };
            let mut props = json!({"provisioningState": "Succeeded", "privateIPAddress": addr.to_string(),
                "privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4",
                "subnet": {"id": subnet_id}, "primary": k == 0});
            if k == 0 && !asgs.is_empty() {
                props["applicationSecurityGroups"] = Value::Array(asgs.clone());
            }
            configs.push(json!({"name": cfg_name, "id": cfg_id, "etag": self.etag(),
                "type": "Microsoft.Network/networkInterfaces/ipConfigurations", "properties": props}));
        }
        let mut props = json!({"provisioningState": "Succeeded", "resourceGuid": self.uuid(),
            "macAddress": self.mac(), "primary": primary, "enableAcceleratedNetworking": false,
            "enableIPForwarding": false, "virtualMachine": {"id": vm_id},
            "ipConfigurations": configs, "nicType": "Standard"});
        if let Some(nsg) = &spec.nsg {
            props["networkSecurityGroup"] =
                json!({"id": self.network_id("networkSecurityGroups", nsg)});
        }
        Ok(
            json!({"name": name, "id": id, "etag": self.etag(), "type": "Microsoft.Network/networkInterfaces",
            "location": self.location, "properties": props}),
        )
    }

    /// A fresh MAC in Azure's `00-0D-3A-..` form.
    pub fn mac(&mut self) -> String {
        let n = self.next();
        format!(
            "00-0D-3A-{:02X}-{:02X}-{:02X}",
            (n >> 16) & 0xff,
            (n >> 8) & 0xff,
            n & 0xff
        )
    }

    /// Give a NIC's primary ipConfiguration the address `addr` instead of its current one.
    fn move_primary(&mut self, nic_id: &str, addr: Ipv4Addr) -> Result<(), ArmError> {
        let i = self
            .nic_index(nic_id)
            .ok_or_else(|| ArmError::not_found(nic_id))?;
        let (cfg_id, subnet_id) = {
            let cfg = &self.nics[i]["properties"]["ipConfigurations"][0];
            (
                cfg["id"].as_str().unwrap_or("").to_owned(),
                cfg["properties"]["subnet"]["id"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        };
        let subnet = self
            .subnet_by_id(&subnet_id)
            .ok_or_else(|| ArmError::not_found(&subnet_id))?;
        self.release(&cfg_id);
        self.claim(subnet, &cfg_id, addr)?;
        self.nics[i]["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"] =
            json!(addr.to_string());
        Ok(())
    }
}
