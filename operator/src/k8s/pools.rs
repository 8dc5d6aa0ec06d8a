//! The pools of `--auto-create-cilium-pod-ip-pools`, created at start when missing. (A pool
//! object is read into the allocator's spec by `weft_cluster_ipam::pool`.)

use std::collections::BTreeMap;

use kube::{
    Client,
    api::{DynamicObject, PostParams},
};
use serde_json::json;
use tracing::info;
use weft_cluster_ipam::multipool::{FamilySpec, PoolSpec};
use weft_k8s::Resource;

use super::OperatorK8sError;

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
