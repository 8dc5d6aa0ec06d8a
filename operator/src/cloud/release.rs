//! The CIDR-based release for 1.20+ agents (Cilium's `excessIPReleaseDelay` marks): such an
//! agent reports what it keeps in `spec.ipam.pools.allocated`, so a CIDR that leaves that list
//! while still attached to the node is the agent's to give back. It is marked with the time it
//! left, and released once the mark is older than the delay, unless the agent took it back or
//! it left the node meanwhile. Pure: the manager feeds it the node's lists and the clock
//! (tokio's, which the maintainers sleep on); the provider does the release.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use ipnet::Ipv4Net;
use tokio::time::Instant;

/// One node's release marks.
#[derive(Debug, Clone, Default)]
pub struct CidrMarks {
    /// `allocated` as last observed (`None`: not observed since the operator started).
    previous: Option<BTreeSet<Ipv4Net>>,
    /// Each marked CIDR with when it was marked.
    marks: BTreeMap<Ipv4Net, Instant>,
    /// The marks changed since [`Self::take_changed`] was last called.
    changed: bool,
}

impl CidrMarks {
    /// Take a new observation: `allocated`, the IPv4 CIDRs the agent keeps, and `attached`,
    /// the IPv4 CIDRs the cloud shows on the node's usable interfaces. A CIDR that left
    /// `allocated` since the last observation is marked; at the first observation after start
    /// every attached CIDR missing from `allocated` is. A CIDR back in `allocated` or no longer
    /// attached loses its mark. Returns whether the marks changed.
    pub fn observe(
        &mut self,
        allocated: &BTreeSet<Ipv4Net>,
        attached: &BTreeSet<Ipv4Net>,
        now: Instant,
    ) -> bool {
        let before = self.marks.len();
        let dropped: Vec<Ipv4Net> = match &self.previous {
            Some(previous) => previous.difference(allocated).copied().collect(),
            None => attached.difference(allocated).copied().collect(),
        };
        let mut added = false;
        for cidr in dropped {
            if attached.contains(&cidr) && !self.marks.contains_key(&cidr) {
                self.marks.insert(cidr, now);
                added = true;
            }
        }
        self.marks
            .retain(|cidr, _| attached.contains(cidr) && !allocated.contains(cidr));
        self.previous = Some(allocated.clone());
        let changed = added || self.marks.len() != before;
        self.changed |= changed;
        changed
    }

    /// Whether the marks changed since the last call.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// The CIDRs marked longer than `delay` ago, in address order.
    #[must_use]
    pub fn due(&self, now: Instant, delay: Duration) -> Vec<Ipv4Net> {
        (self.marks.iter())
            .filter(|(_, marked)| now.saturating_duration_since(**marked) >= delay)
            .map(|(cidr, _)| *cidr)
            .collect()
    }

    /// When the oldest mark comes due (`None`: nothing is marked).
    #[must_use]
    pub fn next_due(&self, delay: Duration) -> Option<Instant> {
        self.marks.values().min().map(|marked| *marked + delay)
    }

    /// Forget the marks of `cidrs` (released, or found on no interface).
    pub fn unmark(&mut self, cidrs: &[Ipv4Net]) {
        for cidr in cidrs {
            self.marks.remove(cidr);
        }
    }

    /// The marked CIDRs.
    #[must_use]
    pub fn marked(&self) -> Vec<Ipv4Net> {
        self.marks.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cidrs: &[&str]) -> BTreeSet<Ipv4Net> {
        cidrs.iter().map(|c| c.parse().unwrap()).collect()
    }

    const DELAY: Duration = Duration::from_mins(3);

    #[test]
    fn a_cidr_the_agent_dropped_is_due_after_the_delay() {
        let mut marks = CidrMarks::default();
        let t0 = Instant::now();
        let attached = set(&["10.0.0.16/28", "10.0.0.5/32"]);
        assert!(
            !marks.observe(&attached, &attached, t0),
            "all kept: no mark"
        );
        let t1 = t0 + Duration::from_secs(10);
        assert!(marks.observe(&set(&["10.0.0.5/32"]), &attached, t1));
        assert_eq!(
            marks.marked(),
            set(&["10.0.0.16/28"]).into_iter().collect::<Vec<_>>()
        );
        assert!(
            marks
                .due(t1 + DELAY - Duration::from_secs(1), DELAY)
                .is_empty()
        );
        assert_eq!(marks.next_due(DELAY), Some(t1 + DELAY));
        assert_eq!(marks.due(t1 + DELAY, DELAY), marks.marked());
        marks.unmark(&marks.marked());
        assert!(marks.marked().is_empty());
    }

    #[test]
    fn the_first_observation_marks_every_attached_cidr_the_agent_does_not_keep() {
        let mut marks = CidrMarks::default();
        let t0 = Instant::now();
        let attached = set(&["10.0.0.16/28", "10.0.0.5/32", "10.0.0.6/32"]);
        assert!(marks.observe(&set(&["10.0.0.5/32"]), &attached, t0));
        assert_eq!(marks.marked().len(), 2);
        // Later, a CIDR attached after the last observation and not yet in `allocated` is the
        // agent's to take, not a drop: no mark.
        let attached = set(&["10.0.0.16/28", "10.0.0.5/32", "10.0.0.6/32", "10.0.0.7/32"]);
        assert!(!marks.observe(&set(&["10.0.0.5/32"]), &attached, t0));
        assert_eq!(marks.marked().len(), 2);
    }

    #[test]
    fn a_cidr_taken_back_or_gone_from_the_node_loses_its_mark() {
        let mut marks = CidrMarks::default();
        let t0 = Instant::now();
        let attached = set(&["10.0.0.16/28", "10.0.0.5/32"]);
        marks.observe(&attached, &attached, t0);
        marks.observe(&BTreeSet::new(), &attached, t0);
        assert_eq!(marks.marked().len(), 2);
        assert!(
            marks.observe(&set(&["10.0.0.5/32"]), &attached, t0),
            "taken back"
        );
        assert_eq!(marks.marked(), vec!["10.0.0.16/28".parse().unwrap()]);
        assert!(
            marks.observe(&set(&["10.0.0.5/32"]), &set(&["10.0.0.5/32"]), t0),
            "detached"
        );
        assert!(marks.marked().is_empty());
        assert_eq!(marks.next_due(DELAY), None);
    }

    #[test]
    fn a_cidr_that_was_never_attached_is_not_marked() {
        let mut marks = CidrMarks::default();
        let t0 = Instant::now();
        marks.observe(&set(&["10.9.0.0/28"]), &set(&["10.0.0.5/32"]), t0);
        assert_eq!(marks.marked(), vec!["10.0.0.5/32".parse().unwrap()]);
        assert!(!marks.observe(&BTreeSet::new(), &set(&["10.0.0.5/32"]), t0));
        assert_eq!(marks.marked(), vec!["10.0.0.5/32".parse().unwrap()]);
    }
}
