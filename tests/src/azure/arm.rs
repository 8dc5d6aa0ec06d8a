//! The ARM operations: the checks every call passes in ARM's order (bearer token, `api-version`,
//! subscription and resource group, the RBAC action on the request's scope), then each
//! operation's answer: lists paged with `nextLink`, 404s as ARM words them (an empty scale set
//! NIC list included), PUTs written to a draft of the model whose linked-access checks must
//! pass before it replaces the model, then answered synchronously or as async operations.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{
    error::ArmError,
    faults::lock,
    identity::Principal,
    lro,
    model::{Model, same},
    nics::{self, Linked},
    roles::{authorization_failed, linked_authorization_failed},
    route::{Operation, Target},
    scenario::LroMode,
    server::{Call, Outcome, Reply, Shared},
    vmss,
};

/// Serve one ARM call.
///
/// # Errors
/// Every ARM error answer.
pub fn serve(
    shared: &Shared,
    op: Operation,
    t: &Target,
    call: &Call,
    outcome: &mut Outcome,
) -> Result<Reply, ArmError> {
    let principal = lock(&shared.ids).check(call.authorization.as_deref())?;
    outcome.client_id = Some(principal.client_id.clone());
    if !call.query.contains_key("api-version") {
        return Err(ArmError::missing_api_version());
    }
    {
        let m = lock(&shared.model);
        if !same(&t.subscription, &m.subscription) {
            return Err(ArmError::subscription_not_found(&t.subscription));
        }
        if op != Operation::AsyncOperation && !m.groups.iter().any(|g| same(g, &t.resource_group)) {
            return Err(ArmError::resource_group_not_found(&t.resource_group));
        }
    }
    let scope = call.path.trim_end_matches('/');
    if let Some(action) = op.action() {
        outcome.action = Some(action.to_owned());
        if !lock(&shared.roles).allows(action, scope) {
            return Err(ArmError::new(
                403,
                "AuthorizationFailed",
                authorization_failed(&principal.client_id, &principal.object_id, action, scope),
            ));
        }
    }
    {
        // Every VM, scale set, NIC and prefix lives in the nodes' group: another existing group
        // (one holding only a VNet) lists none of them and finds none by name.
        let m = lock(&shared.model);
        if !same(&t.resource_group, &m.group)
            && !matches!(
                op,
                Operation::SubnetGet | Operation::AsyncOperation | Operation::PublicIpGet
            )
        {
            return match op {
                Operation::VmssList | Operation::NicList | Operation::PrefixList => {
                    Ok(page(&m, &[], call))
                }
                _ => Err(ArmError::resource_not_found(
                    &format!("{}/{}", t.name, t.child),
                    &t.resource_group,
                )),
            };
        }
    }
    if matches!(op, Operation::NicPut | Operation::VmssVmPut) {
        return write(shared, op, t, call, &principal, outcome);
    }
    read(&mut lock(&shared.model), op, t, call)
}

/// The GETs.
fn read(m: &mut Model, op: Operation, t: &Target, call: &Call) -> Result<Reply, ArmError> {
    let expand = call
        .query
        .get("$expand")
        .is_some_and(|e| e.eq_ignore_ascii_case("instanceView"));
    let group = m.group.clone();
    let missing = |what: String| ArmError::resource_not_found(&what, &group);
    match op {
        Operation::VmssList => {
            let items: Vec<Value> = m.scale_sets.iter().map(|s| m.scale_set_json(s)).collect();
            Ok(page(m, &items, call))
        }
        Operation::VmssNicList => scale_set_nics(m, t, call),
        Operation::NicList => {
            let prefix = m.network_id("networkInterfaces", "").to_ascii_lowercase();
            let items: Vec<Value> = m
                .nics
                .iter()
                .filter(|n| {
                    n["id"]
                        .as_str()
                        .is_some_and(|id| id.to_ascii_lowercase().starts_with(&prefix))
                })
                .cloned()
                .collect();
            Ok(page(m, &items, call))
        }
        Operation::VmssVmNicList | Operation::VmssVmNicGet | Operation::VmssVmPublicIpList => {
            instance_children(m, op, t, call)
        }
        Operation::SubnetGet => {
            let id = format!(
                "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{}/subnets/{}",
                m.subscription, t.resource_group, t.name, t.child
            );
            let i = m
                .subnet_by_id(&id)
                .ok_or_else(|| ArmError::not_found(&id))?;
            Ok(Reply::json(200, &m.subnet_json(i)))
        }
        Operation::NicGet => {
            let i = m
                .nic_index(&m.network_id("networkInterfaces", &t.name))
                .ok_or_else(|| {
                    missing(format!("Microsoft.Network/networkInterfaces/{}", t.name))
                })?;
            Ok(Reply::json(200, &m.nics[i]))
        }
        Operation::VmssVmGet => {
            let (si, ii) = m.instance(&t.name, &t.child).ok_or_else(|| {
                missing(format!(
                    "Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines/{}",
                    t.name, t.child
                ))
            })?;
            Ok(Reply::json(200, &vmss::instance_json(m, si, ii, expand)))
        }
        Operation::VmGet => {
            let vm = m
                .vms
                .iter()
                .find(|v| same(&v.name, &t.name))
                .ok_or_else(|| missing(format!("Microsoft.Compute/virtualMachines/{}", t.name)))?;
            Ok(Reply::json(200, &m.vm_json(vm, expand)))
        }
        Operation::PrefixList => {
            let items: Vec<Value> = m.prefixes.iter().map(|p| m.prefix_json(p)).collect();
            Ok(page(m, &items, call))
        }
        Operation::PublicIpGet => {
            let id = format!(
                "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/publicIPAddresses/{}",
                m.subscription, t.resource_group, t.name
            );
            let ip = m
                .public_ips
                .iter()
                .find(|p| same(&p.id, &id))
                .ok_or_else(|| {
                    missing(format!("Microsoft.Network/publicIPAddresses/{}", t.name))
                })?;
            Ok(Reply::json(200, &m.public_ip_json(ip)))
        }
        Operation::AsyncOperation => poll(m, t, call),
        Operation::NicPut
        | Operation::VmssVmPut
        | Operation::ImdsInstance
        | Operation::ImdsToken
        | Operation::AadToken
        | Operation::Unknown => Err(ArmError::no_route(&call.path)),
    }
}

/// Every NIC of a scale set's instances (404 when there are none, as Azure answers).
fn scale_set_nics(m: &Model, t: &Target, call: &Call) -> Result<Reply, ArmError> {
    let missing = |what: String| ArmError::resource_not_found(&what, &m.group);
    let si = m.scale_set(&t.name).ok_or_else(|| {
        missing(format!(
            "Microsoft.Compute/virtualMachineScaleSets/{}",
            t.name
        ))
    })?;
    let items: Vec<Value> = (0..m.scale_sets[si].instances.len())
        .flat_map(|ii| vmss::instance_nics(m, si, ii))
        .collect();
    if items.is_empty() {
        return Err(missing(format!(
            "Microsoft.Compute/virtualMachineScaleSets/{}/networkInterfaces",
            t.name
        )));
    }
    Ok(page(m, &items, call))
}

/// A scale set VM's NIC list, one of its NICs, or an ipConfiguration's public IPs.
fn instance_children(m: &Model, op: Operation, t: &Target, call: &Call) -> Result<Reply, ArmError> {
    let scope = call.path.trim_end_matches('/');
    let missing = |what: String| ArmError::resource_not_found(&what, &m.group);
    let (si, ii) = m.instance(&t.name, &t.child).ok_or_else(|| {
        missing(format!(
            "Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines/{}",
            t.name, t.child
        ))
    })?;
    let nics = vmss::instance_nics(m, si, ii);
    if op == Operation::VmssVmNicList {
        return Ok(page(m, &nics, call));
    }
    let nic = nics
        .into_iter()
        .find(|n| n["name"].as_str().is_some_and(|n| same(n, &t.nic)))
        .ok_or_else(|| ArmError::not_found(scope))?;
    if op == Operation::VmssVmNicGet {
        return Ok(Reply::json(200, &nic));
    }
    let cfg_id = format!(
        "{}/ipConfigurations/{}",
        nic["id"].as_str().unwrap_or(""),
        t.ip_config
    );
    let items: Vec<Value> = m
        .public_ips
        .iter()
        .filter(|p| p.ip_config.as_deref().is_some_and(|c| same(c, &cfg_id)))
        .map(|p| m.public_ip_json(p))
        .collect();
    Ok(page(m, &items, call))
}

/// The PUTs: written to a draft, linked actions checked, then committed and answered.
fn write(
    shared: &Shared,
    op: Operation,
    t: &Target,
    call: &Call,
    principal: &Principal,
    outcome: &mut Outcome,
) -> Result<Reply, ArmError> {
    let scope = call.path.trim_end_matches('/');
    let mut m = lock(&shared.model);
    let body: Value =
        serde_json::from_slice(&call.body).map_err(|e| ArmError::invalid_body(&e.to_string()))?;
    let asynchronous = m.lro.mode == LroMode::Async;
    let state = if asynchronous {
        "Updating"
    } else {
        "Succeeded"
    };
    let mut draft = m.clone();
    let mut linked = Linked::new();
    let written = if op == Operation::NicPut {
        nics::put_nic(&mut draft, &t.name, body, state, &mut linked)?
    } else {
        put_instance(&mut draft, t, body, state, &mut linked)?
    };
    linked.sort();
    linked.dedup();
    outcome.linked.clone_from(&linked);
    let action = op.action().expect("PUTs are authorized");
    {
        let roles = lock(&shared.roles);
        if let Some((linked_action, linked_scope)) =
            linked.iter().find(|(a, s)| !roles.allows(a, s))
        {
            return Err(ArmError::new(
                403,
                "LinkedAuthorizationFailed",
                linked_authorization_failed(
                    &principal.client_id,
                    &principal.object_id,
                    action,
                    scope,
                    linked_action,
                    linked_scope,
                ),
            ));
        }
    }
    *m = draft;
    Ok(answer_put(&mut m, op, t, call, written, asynchronous))
}

/// `VirtualMachineScaleSetVMs.Update`; always `false` (an instance is never created).
fn put_instance(
    m: &mut Model,
    t: &Target,
    body: Value,
    state: &str,
    linked: &mut Linked,
) -> Result<bool, ArmError> {
    let (si, ii) = m.instance(&t.name, &t.child).ok_or_else(|| {
        ArmError::resource_not_found(
            &format!(
                "Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines/{}",
                t.name, t.child
            ),
            &m.group,
        )
    })?;
    let Value::Object(mut body) = body else {
        return Err(ArmError::invalid_body("the body is not a JSON object"));
    };
    let Some(Value::Object(props)) = body.remove("properties") else {
        return Err(ArmError::invalid_body("the body has no properties"));
    };
    vmss::apply_model(m, si, ii, props, state, linked)?;
    Ok(false)
}

fn answer_put(
    m: &mut Model,
    op: Operation,
    t: &Target,
    call: &Call,
    created: bool,
    asynchronous: bool,
) -> Reply {
    let retry = m.lro.retry_after_seconds.to_string();
    if op == Operation::NicPut {
        let i = m
            .nic_index(&m.network_id("networkInterfaces", &t.name))
            .expect("just written");
        let nic = m.nics[i].clone();
        let status = if created { 201 } else { 200 };
        if !asynchronous {
            return Reply::json(status, &nic);
        }
        let id = nic["id"].as_str().unwrap_or("").to_owned();
        let op_id = lro::start(m, "Microsoft.Network", vec![id], None);
        let url = lro::url(m, &call.base, "Microsoft.Network", &op_id, false);
        return Reply::json(status, &nic)
            .header("Azure-AsyncOperation", url)
            .header("Retry-After", retry);
    }
    let (si, ii) = m.instance(&t.name, &t.child).expect("just written");
    if !asynchronous {
        return Reply::json(200, &vmss::instance_json(m, si, ii, false));
    }
    let nics = vmss::instance_nics(m, si, ii)
        .iter()
        .filter_map(|n| n["id"].as_str().map(str::to_owned))
        .collect();
    let (set, index) = (
        m.scale_sets[si].name.clone(),
        m.scale_sets[si].instances[ii].index.clone(),
    );
    let op_id = lro::start(m, "Microsoft.Compute", nics, Some((set, index)));
    Reply::empty(202)
        .header(
            "Azure-AsyncOperation",
            lro::url(m, &call.base, "Microsoft.Compute", &op_id, false),
        )
        .header(
            "Location",
            lro::url(m, &call.base, "Microsoft.Compute", &op_id, true),
        )
        .header("Retry-After", retry)
}

fn poll(m: &mut Model, t: &Target, call: &Call) -> Result<Reply, ArmError> {
    let retry = m.lro.retry_after_seconds.to_string();
    let (done, status) =
        lro::poll(m, &t.name, &t.nic).ok_or_else(|| ArmError::not_found(&call.path))?;
    let monitor = call.query.get("monitor").is_some_and(|v| v == "true");
    if !monitor {
        let reply = Reply::json(200, &status);
        return Ok(if done {
            reply
        } else {
            reply.header("Retry-After", retry)
        });
    }
    if !done {
        let location = format!("{}{}?{}", call.base, call.path, call.query_text);
        return Ok(Reply::empty(202)
            .header("Location", location)
            .header("Retry-After", retry));
    }
    let op = lro::find(m, &t.nic).expect("polled").clone();
    if let Some((set, index)) = &op.instance
        && let Some((si, ii)) = m.instance(set, index)
    {
        return Ok(Reply::json(200, &vmss::instance_json(m, si, ii, false)));
    }
    match op.nics.first().and_then(|n| m.nic_index(n)) {
        Some(i) => Ok(Reply::json(200, &m.nics[i])),
        None => Ok(Reply::empty(204)),
    }
}

/// One page of `items` per `$skiptoken`, with a `nextLink` if more follow.
fn page(m: &Model, items: &[Value], call: &Call) -> Reply {
    let skip: usize = call
        .query
        .get("$skiptoken")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let end = (skip + m.page_size).min(items.len());
    let value: Vec<Value> = items
        .get(skip..end)
        .map(<[Value]>::to_vec)
        .unwrap_or_default();
    let mut doc = json!({"value": value});
    if end < items.len() {
        let mut next = format!("{}{}?", call.base, call.path);
        if let Some(v) = call.query.get("api-version") {
            let _ = write!(next, "api-version={v}&");
        }
        let _ = write!(next, "$skiptoken={end}");
        doc["nextLink"] = json!(next);
    }
    Reply::json(200, &doc)
}
