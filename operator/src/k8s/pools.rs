//! CiliumPodIPPools for the operator: a pool object read into the allocator's [`PoolSpec`]
//! (every CIDR parsed, v2 `reservedRanges` taken in, each refusal naming the field), and the
//! pools of `--auto-create-cilium-pod-ip-pools` created at start when missing.

use std::collections::BTreeMap;

use ipnet::IpNet;
use kube::{
    Client,
    api::{DynamicObject, PostParams},
};
use serde_json::{Value, json};
use tracing::info;
use weft_cluster_ipam::{
    cidrset::ReservedRange,
    multipool::{FamilySpec, PoolSpec},
};
use weft_k8s::{
    Resource,
    crd::pool::{CiliumPodIPPool, PoolFamilySpec},
    resource::decode,
};

use super::OperatorK8sError;
use crate::{chain, manager::PoolView};

fn family(
    spec: Option<&PoolFamilySpec>,
    field: &str,
    reserved: &mut Vec<ReservedRange>,
) -> Result<Option<FamilySpec>, String> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let cidrs = spec
        .cidrs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            c.parse::<IpNet>()
                .map_err(|e| format!("{field}.cidrs[{i}]: {c:?} is not a CIDR ({e})"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (i, entry) in spec.pool.iter().enumerate() {
        let at = format!("{field}.pool[{i}]");
        let cidr: IpNet = entry
            .cidr
            .parse()
            .map_err(|e| format!("{at}.cidr: {:?} is not a CIDR ({e})", entry.cidr))?;
        if !cidrs.contains(&cidr) {
            return Err(format!(
                "{at}.cidr: {cidr} is not one of {field}.cidrs; each pool entry must reference a CIDR from cidrs"
            ));
        }
        for (j, range) in entry.reserved_ranges.iter().enumerate() {
            let at = format!("{at}.reservedRanges[{j}]");
            let parse = |v: &str, key: &str| {
                v.parse()
                    .map_err(|e| format!("{at}.{key}: {v:?} is not an address ({e})"))
            };
            let (start, end) = (parse(&range.start, "start")?, parse(&range.end, "end")?);
            if !cidr.contains(&start) || !cidr.contains(&end) || start > end {
                return Err(format!(
                    "{at}: {start}-{end} must be an ascending range inside {cidr}"
                ));
            }
            reserved.push(ReservedRange { start, end });
        }
    }
    Ok(Some(FamilySpec {
        cidrs,
        mask_size: spec.mask_size,
    }))
}

/// A pool object as the node manager takes it.
#[must_use]
pub fn pool_view(doc: &Value) -> PoolView {
    let name = doc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let decoded = decode::<CiliumPodIPPool>(doc).map_err(|e| chain(&e));
    let spec = decoded.and_then(|pool| {
        let mut reserved = Vec::new();
        let ipv4 = family(pool.spec.ipv4.as_ref(), "spec.ipv4", &mut reserved)?;
        let ipv6 = family(pool.spec.ipv6.as_ref(), "spec.ipv6", &mut reserved)?;
        Ok(PoolSpec {
            ipv4,
            ipv6,
            allow_first_ip: pool.spec.allow_first_ip.unwrap_or(false),
            allow_last_ip: pool.spec.allow_last_ip.unwrap_or(false),
            reserved,
        })
    });
    PoolView { name, spec }
}

/// Creates each pool of `pools` that does not exist yet (Cilium creates, never updates).
///
/// # Errors
/// A create failed for another reason than the pool existing already.
pub async fn auto_create(
    client: &Client,
    resource: Resource,
    pools: &BTreeMap<String, PoolSpec>,
) -> Result<(), OperatorK8sError> {
    let api = resource.all(client);
    for (name, spec) in pools {
        let family = |f: &Option<FamilySpec>| {
            f.as_ref().map(|f| {
                json!({"cidrs": f.cidrs.iter().map(ToString::to_string).collect::<Vec<_>>(), "maskSize": f.mask_size})
            })
        };
        let mut body = json!({
            "apiVersion": resource.api_resource().api_version,
            "kind": "CiliumPodIPPool",
            "metadata": {"name": name},
            "spec": {},
        });
        if let Some(v4) = family(&spec.ipv4) {
            body["spec"]["ipv4"] = v4;
        }
        if let Some(v6) = family(&spec.ipv6) {
            body["spec"]["ipv6"] = v6;
        }
        if spec.allow_first_ip {
            body["spec"]["allowFirstIP"] = json!(true);
        }
        if spec.allow_last_ip {
            body["spec"]["allowLastIP"] = json!(true);
        }
        let object: DynamicObject = resource.object(body)?;
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => {
                info!(pool = %name, "created CiliumPodIPPool (auto-create-cilium-pod-ip-pools)");
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                info!(pool = %name, "CiliumPodIPPool exists already; not changed");
            }
            Err(source) => {
                return Err(OperatorK8sError::from_api(
                    "create",
                    "ciliumpodippools",
                    source,
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_pool_with_reserved_ranges() {
        let view = pool_view(&json!({
            "metadata": {"name": "default"},
            "spec": {"ipv4": {"cidrs": ["10.10.0.0/16", "10.20.0.0/16"], "maskSize": 24,
                "pool": [{"cidr": "10.10.0.0/16", "reservedRanges": [{"start": "10.10.0.0", "end": "10.10.255.255"}]}]},
                "allowLastIP": true}
        }));
        let spec = view.spec.expect("usable");
        assert_eq!(spec.reserved.len(), 1);
        assert!(spec.allow_last_ip && !spec.allow_first_ip);
        assert_eq!(spec.ipv4.map(|f| f.mask_size), Some(24));
    }

    #[test]
    fn refusals_name_the_field() {
        for (ipv4, want) in [
            (
                json!({"cidrs": ["10.0.0.0/8", "banana"], "maskSize": 24}),
                "spec.ipv4.cidrs[1]",
            ),
            (
                json!({"cidrs": ["10.0.0.0/8"], "maskSize": 24, "pool": [{"cidr": "11.0.0.0/8"}]}),
                "spec.ipv4.pool[0].cidr",
            ),
            (
                json!({"cidrs": ["10.0.0.0/8"], "maskSize": 24, "pool": [{"cidr": "10.0.0.0/8", "reservedRanges": [{"start": "10.0.0.9", "end": "10.0.0.1"}]}]}),
                "spec.ipv4.pool[0].reservedRanges[0]",
            ),
            (
                json!({"cidrs": ["10.0.0.0/8"], "maskSize": "big"}),
                "field spec.ipv4.maskSize",
            ),
        ] {
            let view = pool_view(&json!({"metadata": {"name": "p"}, "spec": {"ipv4": ipv4}}));
            let err = view.spec.expect_err("refused");
            assert!(err.starts_with(want), "{err}");
        }
    }
}
