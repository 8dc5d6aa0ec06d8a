//! The ENI device configurator (spec §6.1, Cilium's `eni-device-configurator`): on every sync
//! in `eni` mode, each ENI of `status.eni.enis` not seen before (and not excluded) is looked
//! for by MAC (15 tries, backoff 100 ms doubling up to 30 s), gets the device MTU and is
//! brought up; unless `use-primary-address`, its primary address is added, the kernel's subnet
//! route for it deleted and `rp_filter` turned off. What was added is kept in
//! `<state-dir>/cloud-devices.json` so `weft-agent cleanup` can take it off again. An ENI
//! whose link never appears is reported (status, log), never fatal; an inconsistent status is
//! logged in Cilium's words and waited out.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::{
    datapath::{
        netlink::{
            default_route_device,
            device::{self, FoundLink},
        },
        rp_filter,
    },
    error::chain,
    ipam::cloud::{CloudInput, EniDevice, parse_mac},
    status::ManagedInterface,
};

/// The file (under the state directory) of what the configurator added.
pub const DEVICES_FILE: &str = "cloud-devices.json";

/// Tries to find a link by MAC before giving up (Cilium's backoff steps).
const TRIES: u32 = 15;
/// The first wait between tries.
const FIRST_WAIT: Duration = Duration::from_millis(100);
/// The longest wait between tries.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// What the configurator added to one link.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Added {
    /// The ENI.
    pub eni: String,
    /// The link's name.
    pub ifname: String,
    /// The link's index.
    pub ifindex: u32,
    /// The ENI's table (`10 + number`).
    pub table: u32,
    /// The primary address it added, if any.
    pub address: Option<IpNet>,
    /// `rp_filter` before it was turned off, if it was.
    pub rp_filter_was: Option<String>,
}

/// Where one ENI stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    Looking { tries: u32 },
    Configured { ifname: String, mtu: Option<u32> },
    NotFound,
    Failed(String),
}

#[derive(Debug, Default)]
struct Table {
    enis: BTreeMap<String, (EniDevice, Phase)>,
    /// The last inconsistency logged (logged once).
    invalid: Option<String>,
}

/// The configurator's state, shared with the tasks it starts.
#[derive(Clone, Debug)]
pub(crate) struct Devices {
    table: Arc<Mutex<Table>>,
    file: PathBuf,
}

impl Devices {
    /// A configurator keeping its record under `state_dir`.
    pub(crate) fn new(state_dir: &Path) -> Self {
        Self {
            table: Arc::default(),
            file: state_dir.join(DEVICES_FILE),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Start configuring the ENIs of `cloud` not seen before (one task each).
    pub(crate) fn observe(&self, cloud: &CloudInput) {
        let mut table = self.lock();
        if let Err(error) = cloud.validate_enis() {
            let text = error.to_string();
            if table.invalid.as_ref() != Some(&text) {
                warn!(%error, "ENI state is not consistent yet; the device configurator waits");
                table.invalid = Some(text);
            }
            return;
        }
        table.invalid = None;
        let use_primary = cloud.use_primary_address();
        for eni in cloud.eni_devices() {
            if table.enis.contains_key(&eni.id) {
                continue;
            }
            table
                .enis
                .insert(eni.id.clone(), (eni.clone(), Phase::Looking { tries: 0 }));
            tokio::spawn(self.clone().configure(eni, use_primary));
        }
    }

    fn set(&self, id: &str, phase: Phase) {
        if let Some(entry) = self.lock().enis.get_mut(id) {
            entry.1 = phase;
        }
    }

    async fn configure(self, eni: EniDevice, use_primary: bool) {
        let Some(mac) = parse_mac(&eni.mac) else {
            self.set(&eni.id, Phase::Failed(format!("invalid mac {:?}", eni.mac)));
            return;
        };
        let Some(link) = self.find(&eni, mac).await else {
            warn!(eni = %eni.id, mac = %eni.mac, tries = TRIES, "no link with the ENI's MAC appeared; the ENI is not used by this node's routing");
            self.set(&eni.id, Phase::NotFound);
            return;
        };
        match self.bring_up(&eni, &link, use_primary).await {
            Ok(mtu) => {
                info!(eni = %eni.id, link = %link.name, ?mtu, "ENI configured");
                self.set(
                    &eni.id,
                    Phase::Configured {
                        mtu: Some(mtu.unwrap_or(link.mtu)),
                        ifname: link.name,
                    },
                );
            }
            Err(error) => {
                warn!(eni = %eni.id, link = %link.name, %error, "configuring the ENI's link failed");
                self.set(&eni.id, Phase::Failed(error));
            }
        }
    }

    /// Look for the link, bounded; every miss is visible in the status.
    async fn find(&self, eni: &EniDevice, mac: [u8; 6]) -> Option<FoundLink> {
        let mut wait = FIRST_WAIT;
        for attempt in 1..=TRIES {
            match device::find_by_mac(mac).await {
                Ok(Some(link)) => return Some(link),
                Ok(None) => {}
                Err(error) => warn!(eni = %eni.id, error = %chain(&error), "listing links"),
            }
            self.set(&eni.id, Phase::Looking { tries: attempt });
            if attempt < TRIES {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_WAIT);
            }
        }
        None
    }

    /// MTU and up; unless `use_primary`, the primary address, the subnet route and
    /// `rp_filter`. The MTU set, if any.
    async fn bring_up(
        &self,
        eni: &EniDevice,
        link: &FoundLink,
        use_primary: bool,
    ) -> Result<Option<u32>, String> {
        let mtu = device_mtu(link).await;
        device::set_up(link, mtu).await.map_err(|e| chain(&e))?;
        let mut added = self.recorded(&eni.id).unwrap_or_default();
        added.eni.clone_from(&eni.id);
        added.ifname.clone_from(&link.name);
        added.ifindex = link.index;
        added.table = 10 + u32::try_from(eni.number).unwrap_or_default();
        if !use_primary && let Some(primary) = eni.primary {
            device::add_address(link, primary)
                .await
                .map_err(|e| chain(&e))?;
            added.address = Some(primary);
            device::delete_subnet_route(link, primary.trunc(), primary.addr())
                .await
                .map_err(|e| chain(&e))?;
            if added.rp_filter_was.is_none() {
                added.rp_filter_was = Some(rp_filter::get(&link.name).map_err(|e| chain(&e))?);
            }
            rp_filter::set(&link.name, "0").map_err(|e| chain(&e))?;
        }
        self.record(added).map_err(|e| chain(&e))?;
        Ok(mtu)
    }

    fn recorded(&self, eni: &str) -> Option<Added> {
        load(&self.file).into_iter().find(|a| a.eni == eni)
    }

    fn record(&self, added: Added) -> std::io::Result<()> {
        let _table = self.lock();
        let mut all = load(&self.file);
        all.retain(|a| a.eni != added.eni);
        all.push(added);
        let text = serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?;
        crate::fsutil::write_atomic(&self.file, &text, true)
    }

    /// The managed interfaces, for `weft-agent status`.
    pub(crate) fn status(&self) -> Vec<ManagedInterface> {
        self.lock()
            .enis
            .values()
            .map(|(eni, phase)| {
                let (ifname, state, mtu) = match phase {
                    Phase::Looking { tries } => (
                        String::new(),
                        format!(
                            "looking for a link with MAC {} (try {tries}/{TRIES})",
                            eni.mac
                        ),
                        None,
                    ),
                    Phase::Configured { ifname, mtu } => {
                        (ifname.clone(), "configured".to_owned(), *mtu)
                    }
                    Phase::NotFound => (
                        String::new(),
                        format!("no link with MAC {} after {TRIES} tries", eni.mac),
                        None,
                    ),
                    Phase::Failed(error) => (String::new(), format!("failed: {error}"), None),
                };
                ManagedInterface {
                    id: eni.id.clone(),
                    mac: eni.mac.clone(),
                    number: eni.number,
                    ifname,
                    mtu,
                    state,
                }
            })
            .collect()
    }
}

/// The device MTU: the MTU of the device holding the default route (weft has no `mtu` key),
/// if there is one and it differs from the link's.
async fn device_mtu(link: &FoundLink) -> Option<u32> {
    let device = default_route_device().await.ok().flatten()?;
    let mtu = device::link_mtu(&device).await.ok().flatten()?;
    (mtu != link.mtu).then_some(mtu)
}

/// The record of what was added (empty when there is none or it does not parse).
#[must_use]
pub fn load(file: &Path) -> Vec<Added> {
    std::fs::read(file)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}
