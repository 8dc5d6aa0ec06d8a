//! The instance metadata node discovery seeds an `eni` node's CiliumNode with (§6.4 of the
//! IPAM spec): the instance ID, its type and availability zone, and the VPC and subnet of the
//! primary interface (by `meta-data/mac`), read once through IMDSv2 (`weft_aws_imds`) at
//! `aws-imds-endpoint`. Never fatal: when IMDS is down or refuses the session token (and then
//! every tokenless read), it says which fields it could not read and leaves them empty, so
//! the seed falls back to the Node's provider ID for the instance and the zone, as before.
//! Reads nothing of Kubernetes and writes nothing.

use std::time::Duration;

use tracing::{info, warn};
use weft_aws_imds::{Imds, ImdsError};

use crate::{error::chain, k8s::seed::InstanceMetadata};

/// How long one IMDS request may take (a black-holed address costs this once: the first
/// failure stops the reading).
const TIMEOUT: Duration = Duration::from_secs(5);

/// The seeded fields, as their CiliumNode paths, in the order they are read.
const FIELDS: [&str; 5] = [
    "spec.instance-id",
    "spec.eni.instance-type",
    "spec.eni.availability-zone",
    "spec.eni.vpc-id",
    "spec.eni.node-subnet-id",
];

/// Read the instance metadata at `endpoint`; what could not be read is empty and logged.
pub(super) async fn read(endpoint: &str) -> InstanceMetadata {
    let imds = Imds::new(endpoint).timeout(TIMEOUT);
    let mut out = InstanceMetadata::default();
    match fill(&imds, &mut out).await {
        Ok(()) => info!(
            endpoint,
            instance = %out.instance_id,
            instance_type = %out.instance_type,
            zone = %out.availability_zone,
            vpc = %out.vpc_id,
            subnet = %out.subnet_id,
            "instance metadata read"
        ),
        Err(error) => {
            let missing: Vec<&str> = FIELDS
                .iter()
                .zip([
                    &out.instance_id,
                    &out.instance_type,
                    &out.availability_zone,
                    &out.vpc_id,
                    &out.subnet_id,
                ])
                .filter(|(_, value)| value.is_empty())
                .map(|(field, _)| *field)
                .collect();
            warn!(
                error = %chain(&error),
                endpoint,
                missing = %missing.join(", "),
                "the EC2 instance metadata service did not answer; {} not read from it \
                 (spec.instance-id and spec.eni.availability-zone fall back to the Node's \
                 providerID; is --aws-imds-endpoint right, and does the instance allow IMDS \
                 from this host?)",
                missing.join(", ")
            );
        }
    }
    out
}

/// Read field by field into `out`, stopping at the first failure.
async fn fill(imds: &Imds, out: &mut InstanceMetadata) -> Result<(), ImdsError> {
    out.instance_id = imds.instance_id().await?;
    out.instance_type = imds.instance_type().await?;
    out.availability_zone = imds.availability_zone().await?;
    let mac = imds.mac().await?;
    out.vpc_id = imds.vpc_id(&mac).await?;
    out.subnet_id = imds.subnet_id(&mac).await?;
    Ok(())
}
