//! One node's state between pool-maintainer rounds (Cilium's `nodemanager.Node` fields and
//! its `recalculate`, `allocationNeeded`, `releaseNeeded`): what the cloud shows the node
//! holds, what it lacks, and what blocks the next round. Pure: the manager feeds it the
//! provider's answers and clock readings.

use std::{net::IpAddr, time::Instant};

use super::{
    Available, InterfaceStats,
    needed::{DEFAULT_PRE_ALLOCATE, Watermarks, excess, needed},
    release::CidrMarks,
    view::CloudNodeView,
};

/// One node's state (`S`, `T`: the provider's parts of the node, see [`CloudNodeView`]).
#[derive(Debug, Clone)]
pub struct NodeState<S, T> {
    /// The latest CiliumNode.
    pub view: CloudNodeView<S, T>,
    /// Addresses the cloud shows on the node's interfaces.
    pub available: Available,
    /// What the interfaces can still take.
    pub stats: InterfaceStats,
    /// Addresses the node lacks.
    pub needed: i64,
    /// Addresses beyond the watermarks.
    pub excess: i64,
    /// A pool-maintainer round is queued.
    pub waiting_for_maintenance: bool,
    /// A round changed the cloud at this time: no further round until a sync newer than it.
    pub resync_needed: Option<Instant>,
    /// The static IP the provider assigned (else the one in the node's status).
    pub assigned_static_ip: String,
    /// Why the last round or recalculation failed (`operator-status.error`; empty: none).
    pub error: String,
    /// Why the node gets no more addresses though it wants more: it holds the provider's
    /// limit (empty: it does not).
    pub limit_error: String,
    /// What the provider cannot act on in the node's spec (empty: nothing).
    pub spec_error: String,
    /// The instance was missing from the cache at the last recalculation.
    pub instance_missing: bool,
    /// A recovery sync was fired for the current missing episode.
    pub instance_sync_retriggered: bool,
    /// CIDRs a 1.20+ agent gave back, waiting for the release delay.
    pub cidr_marks: CidrMarks,
    /// IPv6 prefixes the node lacks (Cilium's needed prefixes: 1 when the agent asks for IPv6
    /// addresses and the node has no prefix, else 0).
    pub ipv6_prefixes_needed: u64,
}

impl<S, T> NodeState<S, T> {
    /// A node first seen as `view`.
    #[must_use]
    pub fn new(view: CloudNodeView<S, T>) -> Self {
        Self {
            assigned_static_ip: view.assigned_static_ip.clone(),
            view,
            available: Available::new(),
            stats: InterfaceStats::default(),
            needed: 0,
            excess: 0,
            waiting_for_maintenance: false,
            resync_needed: None,
            error: String::new(),
            limit_error: String::new(),
            spec_error: String::new(),
            instance_missing: false,
            instance_sync_retriggered: false,
            cidr_marks: CidrMarks::default(),
            ipv6_prefixes_needed: 0,
        }
    }

    /// The node's watermark settings; `limit` is the provider's maximum.
    #[must_use]
    pub fn watermarks(&self, limit: u64) -> Watermarks {
        let v = &self.view;
        Watermarks::from_spec(
            v.pre_allocate,
            v.min_allocate,
            v.max_allocate,
            v.max_above_watermark,
            i64::try_from(limit).unwrap_or(i64::MAX),
        )
    }

    /// Addresses in use: `status.ipam.used`; for a 1.20+ agent, which reports its demand in
    /// `spec.ipam.pools.requested` (pool `default`) and leaves `used` empty, the demand less
    /// the pre-allocation, as Cilium counts it.
    #[must_use]
    pub fn used(&self) -> i64 {
        let v = &self.view;
        if let Some(requested) = v.requested_default
            && v.used.is_empty()
        {
            let pre = if v.pre_allocate == 0 {
                DEFAULT_PRE_ALLOCATE
            } else {
                v.pre_allocate
            };
            return (i64::try_from(requested).unwrap_or(i64::MAX) - pre).max(0);
        }
        i64::try_from(v.used.len()).unwrap_or(i64::MAX)
    }

    /// Take the provider's view of the node (`None`: the instance is not in the cache; nothing
    /// is needed or excess until it is).
    pub fn recalculate(&mut self, cloud: Option<(Available, InterfaceStats)>, limit: u64) {
        let Some((available, stats)) = cloud else {
            self.instance_missing = true;
            self.needed = 0;
            self.excess = 0;
            return;
        };
        self.available = available;
        self.stats = stats;
        self.instance_missing = false;
        self.instance_sync_retriggered = false;
        let avail = i64::try_from(self.available.len()).unwrap_or(i64::MAX);
        let w = self.watermarks(limit);
        self.needed = needed(avail, self.used(), &w);
        self.excess = excess(avail, self.used(), &w);
        if self.assigned_static_ip.is_empty() {
            self.assigned_static_ip
                .clone_from(&self.view.assigned_static_ip);
        }
    }

    /// Addresses the node wants beyond the provider's `limit` when it holds that many already
    /// and the limit is what stops it (`max-allocate` unset, or not below it); `None`
    /// otherwise.
    #[must_use]
    pub fn wanted_beyond_limit(&self, limit: u64) -> Option<i64> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let avail = i64::try_from(self.available.len()).unwrap_or(i64::MAX);
        let w = self.watermarks(u64::try_from(limit).unwrap_or(0));
        let uncapped = needed(avail, self.used(), &Watermarks { max: 0, ..w });
        (!self.instance_missing && limit > 0 && w.max >= limit && avail >= limit && uncapped > 0)
            .then_some(uncapped)
    }

    /// Cilium's `GetNeededAddresses`: the deficit, or minus the excess when releasing.
    #[must_use]
    pub fn needed_addresses(&self, release_excess: bool) -> i64 {
        if self.needed > 0 {
            self.needed
        } else if release_excess && self.excess > 0 {
            -self.excess
        } else {
            0
        }
    }

    /// Static-IP tags are set and no address is assigned yet (a legacy resource-ID value is
    /// not an address and is resolved again).
    #[must_use]
    pub fn static_ip_needed(&self) -> bool {
        !self.view.static_ip_tags.is_empty() && self.assigned_static_ip.parse::<IpAddr>().is_err()
    }

    /// Whether a round would allocate something.
    #[must_use]
    pub fn allocation_needed(&self) -> bool {
        !self.waiting_for_maintenance
            && self.resync_needed.is_none()
            && (self.static_ip_needed() || self.needed > 0 || self.ipv6_prefixes_needed > 0)
    }

    /// Whether a round would release something through the 1.19 handshake (or answer the
    /// agent's release answers); a 1.20+ agent's node releases through its marks instead.
    #[must_use]
    pub fn release_needed(&self, release_excess: bool) -> bool {
        if self.view.allocated_v4.is_some() {
            return false;
        }
        let answered = self
            .view
            .release_ips
            .values()
            .any(|s| s == "ready-for-release" || s == "do-not-release");
        (release_excess
            && !self.waiting_for_maintenance
            && self.resync_needed.is_none()
            && self.excess > 0)
            || (release_excess && answered)
    }

    /// A sync that started at `sync_time` finished: a round older than it no longer blocks.
    pub fn update_last_resync(&mut self, sync_time: Instant) {
        if self.resync_needed.is_some_and(|t| sync_time > t) {
            self.resync_needed = None;
        }
    }

    /// Free addresses on the node (`available - used`, at least 0).
    #[must_use]
    pub fn free(&self) -> i64 {
        (i64::try_from(self.available.len()).unwrap_or(i64::MAX) - self.used()).max(0)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn state(pre: i64, used: usize, avail: usize) -> NodeState<(), ()> {
        let mut view = CloudNodeView {
            name: "n".into(),
            pre_allocate: pre,
            ..CloudNodeView::default()
        };
        view.used = (0..used).map(|i| format!("10.0.0.{i}")).collect();
        let mut s = NodeState::new(view);
        let available = (0..avail)
            .map(|i| (format!("10.0.0.{i}"), "/nic".to_owned()))
            .collect();
        s.recalculate(Some((available, InterfaceStats::default())), 256);
        s
    }

    #[test]
    fn recalculate_sets_deficit_with_the_default_pre_allocation() {
        let s = state(0, 0, 0);
        assert_eq!((s.needed, s.excess), (8, 0));
        assert!(s.allocation_needed());
        let s = state(0, 3, 8);
        assert_eq!(s.needed, 3);
        let s = state(4, 0, 10);
        assert_eq!((s.needed, s.excess), (0, 6));
        assert_eq!(s.needed_addresses(false), 0);
        assert_eq!(s.needed_addresses(true), -6);
        assert!(!s.release_needed(false));
        assert!(s.release_needed(true));
    }

    #[test]
    fn a_1_20_agent_s_demand_counts_as_used_less_the_pre_allocation() {
        let mut s = state(8, 0, 8);
        s.view.requested_default = Some(15);
        let available = (0..8)
            .map(|i| (format!("10.0.0.{i}"), "/nic".to_owned()))
            .collect();
        s.recalculate(Some((available, InterfaceStats::default())), 256);
        assert_eq!(s.used(), 7);
        assert_eq!(s.needed, 7, "8 held, 7 used: 15 needed for 8 free");
        s.view.used.insert("10.0.0.1".into());
        assert_eq!(
            s.used(),
            1,
            "a 1.19 agent's used addresses count as they are"
        );
    }

    #[test]
    fn a_round_blocks_further_rounds_until_a_newer_sync() {
        let mut s = state(0, 0, 0);
        let round = Instant::now();
        s.resync_needed = Some(round);
        assert!(!s.allocation_needed());
        s.update_last_resync(round);
        assert!(
            !s.allocation_needed(),
            "a sync started with the round is not newer"
        );
        s.update_last_resync(round + Duration::from_millis(1));
        assert!(s.allocation_needed());
    }

    #[test]
    fn the_limit_is_reached_when_the_node_holds_it_and_wants_more() {
        // 18 held, all in use: 8 more wanted, the limit of 18 stops them.
        let mut s = state(0, 18, 18);
        s.recalculate(Some((s.available.clone(), InterfaceStats::default())), 18);
        assert_eq!(s.needed, 0);
        assert_eq!(s.wanted_beyond_limit(18), Some(8));
        // Below the limit, or wanting nothing, or no limit: not reached.
        assert_eq!(state(0, 16, 16).wanted_beyond_limit(18), None);
        assert_eq!(state(0, 0, 18).wanted_beyond_limit(18), None);
        assert_eq!(s.wanted_beyond_limit(0), None);
        // A max-allocate below the limit is the user's choice, not the limit.
        s.view.max_allocate = 10;
        assert_eq!(s.wanted_beyond_limit(18), None);
    }

    #[test]
    fn a_missing_instance_needs_nothing() {
        let mut s = state(0, 0, 0);
        s.recalculate(None, 256);
        assert!(s.instance_missing);
        assert_eq!(s.needed, 0);
        assert!(!s.allocation_needed());
    }

    #[test]
    fn static_ip_is_needed_until_an_address_is_assigned() {
        let mut s = state(8, 0, 8);
        assert!(!s.allocation_needed());
        s.view.static_ip_tags.insert("env".into(), "prod".into());
        assert!(s.static_ip_needed() && s.allocation_needed());
        s.assigned_static_ip =
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPPrefixes/p"
                .into();
        assert!(
            s.static_ip_needed(),
            "a legacy resource ID is resolved again"
        );
        s.assigned_static_ip = "20.1.2.3".into();
        assert!(!s.static_ip_needed());
    }
}
