//! Scale set VMs: the instance JSON `VirtualMachineScaleSetVMs.Get` answers (with
//! `$expand=instanceView`), and applying an instance model (`VirtualMachineScaleSetVMs.Update`
//! or a new instance): each `networkInterfaceConfigurations[]` entry becomes the NIC
//! `.../virtualMachineScaleSets/V/virtualMachines/I/networkInterfaces/N` with
//! `properties.virtualMachine.id` set, its ipConfigurations reconciled by `nics.rs`, at most 256
//! per NIC and all in one subnet (`VMScaleSetIpConfigurationsOnSameNicCannotUseDifferentSubnets`).

use serde_json::{Map, Value, json};

use super::{
    error::{ArmError, IP_CONFIGS_PER_NIC},
    model::{Model, same},
    nics::{self, Linked, NSG_JOIN},
};

/// Fields of an instance's `properties` only the server sets.
const READ_ONLY: [&str; 6] = [
    "instanceView",
    "provisioningState",
    "latestModelApplied",
    "vmId",
    "networkProfile",
    "timeCreated",
];

fn nic_configs(props: &Map<String, Value>) -> Vec<Value> {
    props
        .get("networkProfileConfiguration")
        .and_then(|n| n["networkInterfaceConfigurations"].as_array())
        .cloned()
        .unwrap_or_default()
}

/// Apply `properties` as instance (`si`, `ii`)'s model; NICs it no longer has are removed.
/// New or changed configs and the instance get `state`.
///
/// # Errors
/// The 256 limit, the same-subnet rule, or any error of [`nics::reconcile`].
#[expect(
    clippy::too_many_lines,
    reason = "one pass over the NIC configurations: validate, reconcile, render, store"
)]
pub fn apply_model(
    m: &mut Model,
    si: usize,
    ii: usize,
    mut properties: Map<String, Value>,
    state: &str,
    linked: &mut Linked,
) -> Result<(), ArmError> {
    for field in READ_ONLY {
        properties.remove(field);
    }
    let old_props = m.scale_sets[si].instances[ii].properties.clone();
    if !properties.contains_key("networkProfileConfiguration")
        && let Some(n) = old_props.get("networkProfileConfiguration")
    {
        properties.insert("networkProfileConfiguration".into(), n.clone());
    }
    // Cilium sends `imageReference: null` (omitted): the image stays what it was.
    let image = &old_props
        .get("storageProfile")
        .map(|s| s["imageReference"].clone());
    if let Some(Value::Object(storage)) = properties.get_mut("storageProfile")
        && storage.get("imageReference").is_none_or(Value::is_null)
        && let Some(image) = image.as_ref().filter(|i| !i.is_null())
    {
        storage.insert("imageReference".into(), image.clone());
    }
    let inst_id = m.scale_sets[si].instances[ii].id.clone();
    let old_nics = nic_configs(&old_props);
    let configs = nic_configs(&properties);
    for nic in &configs {
        let name = nic["name"]
            .as_str()
            .ok_or_else(|| ArmError::invalid_body("a networkInterfaceConfiguration has no name"))?;
        let nic_id = format!("{inst_id}/networkInterfaces/{name}");
        let ip_configs = nic["properties"]["ipConfigurations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if ip_configs.len() > IP_CONFIGS_PER_NIC {
            return Err(ArmError::too_many_ip_configs(&nic_id, ip_configs.len()));
        }
        let wanted = ip_configs
            .iter()
            .map(|c| nics::wanted(c, true))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(first) = wanted.first()
            && let Some(other) = wanted.iter().find(|w| !same(&w.subnet, &first.subnet))
        {
            return Err(ArmError::vmss_different_subnets(
                name,
                &first.subnet,
                &other.subnet,
            ));
        }
        let existing = m.nic_index(&nic_id);
        let old = existing.map(|i| m.nics[i].clone());
        let old_cfgs = old
            .as_ref()
            .and_then(|o| o["properties"]["ipConfigurations"].as_array().cloned())
            .unwrap_or_default();
        let rendered = nics::reconcile(m, &nic_id, &old_cfgs, wanted, state, linked)?;
        let old_model = old_nics
            .iter()
            .find(|o| o["name"].as_str().is_some_and(|n| same(n, name)));
        let nsg = nic["properties"]["networkSecurityGroup"]["id"].as_str();
        if let Some(nsg) = nsg
            && !old_model
                .and_then(|o| o["properties"]["networkSecurityGroup"]["id"].as_str())
                .is_some_and(|o| same(o, nsg))
        {
            linked.push((NSG_JOIN.to_owned(), nsg.to_owned()));
        }
        let keep = |field: &str| {
            old.as_ref()
                .map(|o| o["properties"][field].clone())
                .filter(|v| !v.is_null())
        };
        let mac = keep("macAddress").unwrap_or_else(|| json!(m.mac()));
        let guid = keep("resourceGuid").unwrap_or_else(|| json!(m.uuid()));
        let p = &nic["properties"];
        let mut props = json!({"provisioningState": state, "resourceGuid": guid, "macAddress": mac,
            "primary": p["primary"].as_bool().unwrap_or(false),
            "enableAcceleratedNetworking": p["enableAcceleratedNetworking"].as_bool().unwrap_or(false),
            "enableIPForwarding": p["enableIPForwarding"].as_bool().unwrap_or(false),
            "virtualMachine": {"id": inst_id}, "ipConfigurations": rendered, "nicType": "Standard"});
        if let Some(nsg) = nsg {
            props["networkSecurityGroup"] = json!({"id": nsg});
        }
        let stored = json!({"name": name, "id": nic_id, "etag": m.etag(),
            "type": "Microsoft.Network/networkInterfaces", "location": m.location, "properties": props});
        match existing {
            Some(i) => m.nics[i] = stored,
            None => m.nics.push(stored),
        }
    }
    for old in &old_nics {
        let Some(name) = old["name"].as_str() else {
            continue;
        };
        if !configs
            .iter()
            .any(|c| c["name"].as_str().is_some_and(|n| same(n, name)))
        {
            m.drop_nic(&format!("{inst_id}/networkInterfaces/{name}"));
        }
    }
    let inst = &mut m.scale_sets[si].instances[ii];
    inst.properties = properties;
    state.clone_into(&mut inst.state);
    Ok(())
}

/// The NICs of instance (`si`, `ii`), in model order.
#[must_use]
pub fn instance_nics(m: &Model, si: usize, ii: usize) -> Vec<Value> {
    let inst = &m.scale_sets[si].instances[ii];
    nic_configs(&inst.properties)
        .iter()
        .filter_map(|c| c["name"].as_str())
        .filter_map(|name| m.nic_index(&format!("{}/networkInterfaces/{name}", inst.id)))
        .map(|i| m.nics[i].clone())
        .collect()
}

/// Instance JSON as `VirtualMachineScaleSetVMs.Get` answers.
#[must_use]
pub fn instance_json(m: &Model, si: usize, ii: usize, expand: bool) -> Value {
    let set = &m.scale_sets[si];
    let inst = &set.instances[ii];
    let mut props = inst.properties.clone();
    props.insert("provisioningState".into(), json!(inst.state));
    props.insert("vmId".into(), json!(inst.vm_id));
    props.insert("latestModelApplied".into(), json!(true));
    let nics: Vec<Value> = instance_nics(m, si, ii)
        .iter()
        .map(|n| json!({"id": n["id"], "properties": {"primary": n["properties"]["primary"]}}))
        .collect();
    props.insert("networkProfile".into(), json!({"networkInterfaces": nics}));
    if expand {
        props.insert(
            "instanceView".into(),
            json!({"platformUpdateDomain": 0, "platformFaultDomain": 0, "statuses": [
                {"code": format!("ProvisioningState/{}", inst.state.to_ascii_lowercase()), "level": "Info"},
                {"code": "PowerState/running", "level": "Info", "displayStatus": "VM running"}]}),
        );
    }
    json!({"name": format!("{}_{}", set.name, inst.index), "id": inst.id, "instanceId": inst.index,
        "type": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines", "location": m.location,
        "sku": {"name": "Standard_D4s_v3", "tier": "Standard"}, "etag": format!("\"{}\"", inst.vm_id.len()),
        "properties": props})
}
