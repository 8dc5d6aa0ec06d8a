//! Node discovery: make sure the agent's own CiliumNode exists and carries what the agent
//! seeds (see [`super::seed`]), as Cilium's agent does before IPAM starts. Waits (and says what
//! for) while the v1.Node is missing, while the API server is unreachable, or while someone else
//! has to create the CiliumNode; fails at once when the service account lacks a permission (403)
//! or the API server rejects the credential (401), naming which and the fix.
//! In `eni` mode it first reads the instance metadata ([`imds`]) once. What it leaves is the
//! template [`super::recreate`] creates the CiliumNode again from.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client, api::PostParams};
use serde_json::{Value, json};
use tracing::{info, warn};

use super::{
    K8sError, Resource,
    resources::to_json,
    seed::{self, CustomCniConf, InstanceMetadata, SeedError},
};
use crate::{
    config::NodeSeedConfig,
    crd::{meta::ObjectType, node::CiliumNode},
    ipam::mode::IpamMode,
};

mod imds;

/// Where discovery stands after one attempt.
enum Step {
    /// The CiliumNode exists and is seeded: the object as it now stands.
    Done(Value),
    /// Not possible yet; the text says why.
    Wait(String),
}

/// Ensure the CiliumNode `node_name` exists and is seeded; retries until it is. Returns the
/// object as it then stands.
///
/// # Errors
/// A permission is missing, the custom CNI configuration is unreadable, or the node cannot be
/// seeded for this IPAM mode (Azure without a provider ID).
pub async fn ensure_cilium_node(
    client: &Client,
    node_name: &str,
    mode: IpamMode,
    config: &NodeSeedConfig,
) -> Result<Value, K8sError> {
    let custom = read_custom(config)?;
    let instance = if mode == IpamMode::Eni {
        imds::read(&config.aws_imds_endpoint).await
    } else {
        InstanceMetadata::default()
    };
    let mut delay = Duration::from_millis(200);
    loop {
        match attempt(client, node_name, mode, config, &custom, &instance).await {
            Ok(Step::Done(doc)) => return Ok(doc),
            Ok(Step::Wait(reason)) => info!(node = node_name, "{reason}"),
            Err(error) if error.is_transient() => {
                warn!(error = %crate::error::chain(&error), node = node_name, "node discovery; retrying");
            }
            Err(error) => return Err(error),
        }
        tokio::time::sleep(delay + delay.mul_f64(fastrand::f64() / 4.0)).await;
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

async fn attempt(
    client: &Client,
    node_name: &str,
    mode: IpamMode,
    config: &NodeSeedConfig,
    custom: &CustomCniConf,
    instance: &InstanceMetadata,
) -> Result<Step, K8sError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let Some(node) = nodes
        .get_opt(node_name)
        .await
        .map_err(|e| K8sError::from_api("get", "nodes", e))?
    else {
        return Ok(Step::Wait(format!(
            "waiting for v1.Node {node_name} to exist (is NODE_NAME right?)"
        )));
    };
    let seed = match seed::seed(&node, mode, config, custom, instance) {
        Ok(seed) => seed,
        Err(error @ SeedError::NoPodCidr { .. }) => return Ok(Step::Wait(error.to_string())),
        Err(source @ (SeedError::NoProviderId | SeedError::NotAzureProviderId { .. })) => {
            return Err(K8sError::ProviderId {
                node: node_name.to_owned(),
                source,
            });
        }
    };
    let api = Resource::CiliumNode.all(client);
    let existing = api
        .get_opt(node_name)
        .await
        .map_err(|e| K8sError::from_api("get", "ciliumnodes", e))?;
    match existing {
        None if !config.auto_create => Ok(Step::Wait(format!(
            "waiting for CiliumNode {node_name} to be created (auto-create-cilium-node-resource \
             is false)"
        ))),
        None => {
            let mut doc = json!({
                "apiVersion": CiliumNode::API_VERSION,
                "kind": CiliumNode::KIND,
                "metadata": {"name": node_name},
                "spec": {},
            });
            seed::apply(&mut doc, &seed);
            match api
                .create(&PostParams::default(), &Resource::CiliumNode.object(doc)?)
                .await
            {
                Ok(created) => {
                    info!(node = node_name, "created CiliumNode");
                    Ok(Step::Done(to_json(&created)))
                }
                // Someone created it meanwhile: seed it on the next attempt.
                Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(Step::Wait(
                    "CiliumNode appeared meanwhile; seeding it".into(),
                )),
                Err(e) => Err(K8sError::from_api("create", "ciliumnodes", e)),
            }
        }
        Some(current) => {
            let mut doc = to_json(&current);
            if !seed::apply(&mut doc, &seed) {
                return Ok(Step::Done(doc));
            }
            let seeded = api
                .replace(
                    node_name,
                    &PostParams::default(),
                    &Resource::CiliumNode.object(doc)?,
                )
                .await
                .map_err(|e| K8sError::from_api("update", "ciliumnodes", e))?;
            info!(node = node_name, "seeded CiliumNode");
            Ok(Step::Done(to_json(&seeded)))
        }
    }
}

fn read_custom(config: &NodeSeedConfig) -> Result<CustomCniConf, K8sError> {
    let Some(path) = &config.read_cni_conf else {
        return Ok(CustomCniConf::default());
    };
    let text = std::fs::read_to_string(path).map_err(|source| K8sError::CniConf {
        path: path.clone(),
        source,
    })?;
    let value: Value = serde_json::from_str(&text).map_err(|source| K8sError::CniConfJson {
        path: path.clone(),
        source,
    })?;
    super::resources::decode(&value).map_err(|source| K8sError::CniConfParse {
        path: path.clone(),
        source,
    })
}
