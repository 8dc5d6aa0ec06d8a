//! A new ENI for a node (Cilium's `CreateInterface`): chosen, created, attached, marked
//! delete-on-termination, and deleted again when the attachment or the mark fails.

use std::sync::PoisonError;

use tracing::{info, warn};
use weft_k8s::crd::eni::EniSpec;

use super::{Call, EniError, EniProvider};
use crate::{
    cloud::{NodeRef, Notice},
    eni::{
        interfaces::InterfacesError,
        limits::PD_BLOCK,
        ops::{Classify as _, Ec2Ops, NewEni, Size},
        vpc::free_device_index,
    },
};

/// How often an attachment is tried at the next index after a conflict.
const ATTACH_TRIES: u32 = 5;

impl<C: Ec2Ops> EniProvider<C> {
    /// Create, attach and mark a new ENI for `node` (Cilium's `CreateInterface`), with an
    /// IPv6 /80 prefix when asked; returns how many IPv4 addresses it holds.
    pub(super) async fn create_eni(
        &self,
        node: NodeRef<'_, EniSpec>,
        to_allocate: u64,
        ipv6_prefix: bool,
    ) -> Result<u64, EniError<C::Error>> {
        let instance = node.instance_id;
        let (new, index, size, network) = self.with_node(node, |view, cache| {
            let limits = view.limits.ok_or_else(|| InterfacesError::UnknownLimits {
                instance_type: node.spec.instance_type.clone(),
            })?;
            let pd = view.prefix_delegation();
            let network = cache.network.view();
            network.check_subnet_ids(node.spec)?;
            let choice = network.choose_subnet(node.spec, limits.ipv4)?;
            if !choice.shares_route_table {
                warn!(%instance, subnet = %choice.subnet.id, rule = ?choice.rule,
                    "the subnet chosen for a new ENI shares no route table with the node's subnet");
            }
            let groups = network.choose_security_groups(node.spec, view.enis, |tags| {
                warn!(%instance, ?tags, "no security group matches the security-group-tags; using the primary ENI's");
            })?;
            let index = free_device_index(view.enis, view.first_index());
            let size = limits.new_eni_size(pd, to_allocate.max(1));
            let new = NewEni {
                subnet: choice.subnet.id.clone(),
                description: format!("Cilium-CNI ({instance})"),
                security_groups: groups,
                tags: self.settings.eni_tags.clone(),
                size: if pd {
                    Size::Prefixes(size.div_ceil(PD_BLOCK))
                } else {
                    Size::Addresses(size)
                },
                ipv6_prefix,
                client_token: format!(
                    "{instance}-{index}-{}-{}",
                    view.enis.len(),
                    self.deleted_on(instance)
                ),
            };
            Ok::<_, EniError<C::Error>>((new, index, size, cache.network.clone()))
        })??;
        let ops = &self.instances.inventory;
        let created = match ops.create(&new, &network).await {
            Err(e) if e.is_prefix_capacity() && matches!(new.size, Size::Prefixes(_)) => {
                warn!(%instance, subnet = %new.subnet, error = %e,
                    "the subnet has no free /28 for a new ENI; creating it with addresses");
                self.notice(
                    instance,
                    &format!("a new ENI in subnet {}: {e}", new.subnet),
                );
                let fallback = NewEni {
                    size: Size::Addresses(size.min(new_eni_addresses(self, node))),
                    client_token: format!("{}-addresses", new.client_token),
                    ..new.clone()
                };
                ops.create(&fallback, &network).await
            }
            other => other,
        }
        .map_err(EniError::ec2(Call::Create(new.subnet.clone())))?;
        let id = created.id.clone();
        match self.attach(&id, instance, index).await {
            Ok((number, attachment)) => {
                let marked = if node.spec.delete_on_termination == Some(false) {
                    Ok(())
                } else {
                    ops.delete_on_termination(&id, &attachment)
                        .await
                        .map_err(EniError::ec2(Call::Mark(id.clone())))
                };
                if let Err(error) = marked {
                    self.delete_leftover(instance, &id).await;
                    return Err(error);
                }
                let mut attached = created;
                attached.number = i64::try_from(number).unwrap_or(i64::MAX);
                let held = u64::try_from(attached.addresses.len().saturating_sub(1)).unwrap_or(0);
                info!(%instance, eni = %id, index = number, subnet = %new.subnet, addresses = held, "created and attached a new ENI");
                self.instances.insert_eni(instance, attached);
                Ok(held)
            }
            Err(error) => {
                self.delete_leftover(instance, &id).await;
                Err(error)
            }
        }
    }

    /// Attach `eni` at `index`, or at the next free index after a conflict; the index and
    /// the attachment ID.
    async fn attach(
        &self,
        eni: &str,
        instance: &str,
        mut index: u64,
    ) -> Result<(u64, String), EniError<C::Error>> {
        let ops = &self.instances.inventory;
        for _ in 0..ATTACH_TRIES {
            match ops.attach(eni, instance, index).await {
                Ok(attachment) => return Ok((index, attachment)),
                Err(e) if e.is_index_conflict() => {
                    info!(%instance, %eni, index, "device index taken; trying the next one");
                    index += 1;
                }
                Err(e) => {
                    return Err(EniError::ec2(Call::Attach {
                        eni: eni.to_owned(),
                        instance: instance.to_owned(),
                        index,
                    })(e));
                }
            }
        }
        Err(EniError::NoIndex {
            instance: instance.to_owned(),
            tries: ATTACH_TRIES,
        })
    }

    /// An Event for `instance`'s node: prefix delegation refused for `what`, single addresses
    /// taken instead.
    pub(super) fn notice(&self, instance: &str, what: &str) {
        let message = format!(
            "prefix delegation refused, no free /28 ({what}); single addresses assigned \
             instead, and from now on for this node"
        );
        let mut notices = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        (notices.entry(instance.to_owned()).or_default()).push(Notice {
            reason: "PrefixDelegationFallback",
            message,
        });
    }

    /// ENIs of `instance` this process deleted again.
    fn deleted_on(&self, instance: &str) -> u32 {
        let deleted = self.deleted.lock().unwrap_or_else(PoisonError::into_inner);
        deleted.get(instance).copied().unwrap_or(0)
    }

    /// Delete an ENI whose attachment failed (best effort: GC finds it otherwise).
    async fn delete_leftover(&self, instance: &str, eni: &str) {
        match self.instances.inventory.delete(eni).await {
            Ok(()) => {
                let mut deleted = self.deleted.lock().unwrap_or_else(PoisonError::into_inner);
                *deleted.entry(instance.to_owned()).or_default() += 1;
            }
            Err(error) => {
                warn!(%eni, %error, "could not delete the ENI whose attachment failed; the ENI GC deletes it if it carries the GC tags");
            }
        }
    }
}

/// The secondary addresses one ENI of the node's type holds (1 when the type is unknown).
fn new_eni_addresses<C: Ec2Ops>(provider: &EniProvider<C>, node: NodeRef<'_, EniSpec>) -> u64 {
    provider
        .limits_of(node.spec)
        .map_or(1, |l| l.new_eni_size(false, u64::MAX))
}
