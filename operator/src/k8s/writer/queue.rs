//! When each CiliumNode's queued parts go out, in time independent of how many nodes are
//! queued: a FIFO of nodes ready to write, and a time-ordered set of timers (a node written
//! less than [`NODE_WRITE_INTERVAL`] ago, or whose write failed less than [`RETRY_AFTER`] ago,
//! waits for its timer). Each node has one slot: what is queued for it (coalesced, see
//! [`Pending`]), whether a write of it is in flight, its timer. Every operation costs O(log n)
//! for the node it touches; nothing scans the queue. Sans-IO: the caller passes the clock, so
//! tests drive it with made-up instants. It does not write, and it does not know the API.

use std::collections::{BTreeMap, HashMap, VecDeque};

use tokio::time::Instant;

use super::{NODE_WRITE_INTERVAL, RETRY_AFTER, pending::Pending};

/// One node's state in the queue. A slot exists while something is queued, in flight, or
/// timed for the node.
#[derive(Debug, Default)]
struct Slot {
    /// Parts queued and not in flight.
    pending: Option<Pending>,
    /// A write of the node is in flight.
    busy: bool,
    /// The node's entry in the timers: it may not be written before this.
    timer: Option<(Instant, u64)>,
    /// The node is in the ready FIFO.
    ready: bool,
}

/// The writer's queue of CiliumNodes (see the module documentation).
#[derive(Debug, Default)]
pub struct Queue {
    slots: HashMap<String, Slot>,
    /// Nodes with parts queued, no write in flight and no timer, oldest first.
    ready: VecDeque<String>,
    /// Timers in the order they expire; the sequence number keeps equal instants apart.
    timers: BTreeMap<(Instant, u64), String>,
    seq: u64,
    /// Slots with parts queued.
    queued: usize,
}

impl Queue {
    /// Queue parts for `node`: composed onto what is queued for it, ready at once unless the
    /// node is in flight or timed.
    pub fn push(&mut self, node: &str, merge: impl FnOnce(&mut Pending)) {
        let slot = match self.slots.get_mut(node) {
            Some(slot) => slot,
            None => self.slots.entry(node.to_owned()).or_default(),
        };
        if slot.pending.is_none() {
            self.queued += 1;
        }
        merge(slot.pending.get_or_insert_default());
        if !slot.busy && slot.timer.is_none() && !slot.ready {
            slot.ready = true;
            self.ready.push_back(node.to_owned());
        }
    }

    /// Expire the timers due at `now`: their nodes with parts queued become ready, the others
    /// are forgotten.
    pub fn fire(&mut self, now: Instant) {
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let node = entry.remove();
            let Some(slot) = self.slots.get_mut(&node) else {
                continue;
            };
            slot.timer = None;
            if slot.busy {
                continue;
            }
            if slot.pending.is_some() {
                slot.ready = true;
                self.ready.push_back(node);
            } else {
                self.slots.remove(&node);
            }
        }
    }

    /// The oldest ready node and its parts, now in flight: it is timed for
    /// [`NODE_WRITE_INTERVAL`] from `now`.
    pub fn pop(&mut self, now: Instant) -> Option<(String, Pending)> {
        while let Some(node) = self.ready.pop_front() {
            let Some(slot) = self.slots.get_mut(&node) else {
                continue;
            };
            slot.ready = false;
            let Some(pending) = slot.pending.take() else {
                continue;
            };
            self.queued -= 1;
            slot.busy = true;
            Self::set_timer(
                &mut self.timers,
                &mut self.seq,
                slot,
                &node,
                now + NODE_WRITE_INTERVAL,
            );
            return Some((node, pending));
        }
        None
    }

    /// The write of `node` is over; `failed` holds the parts that did not go through (tried
    /// again [`RETRY_AFTER`] from `now`, under what was queued meanwhile).
    pub fn done(&mut self, node: &str, failed: Option<Pending>, now: Instant) {
        let Some(slot) = self.slots.get_mut(node) else {
            return;
        };
        slot.busy = false;
        if let Some(mut failed) = failed {
            match slot.pending.take() {
                Some(newer) => failed.absorb(newer),
                None => self.queued += 1,
            }
            slot.pending = Some(failed);
            Self::set_timer(
                &mut self.timers,
                &mut self.seq,
                slot,
                node,
                now + RETRY_AFTER,
            );
            return;
        }
        if slot.timer.is_some() {
            return;
        }
        if slot.pending.is_some() {
            slot.ready = true;
            self.ready.push_back(node.to_owned());
        } else {
            self.slots.remove(node);
        }
    }

    /// When the next timer expires.
    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.first_key_value().map(|((at, _), _)| *at)
    }

    /// Whether no parts are queued (writes in flight are the caller's to count).
    pub const fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Time `slot` (of `node`) to `at`, replacing its timer.
    fn set_timer(
        timers: &mut BTreeMap<(Instant, u64), String>,
        seq: &mut u64,
        slot: &mut Slot,
        node: &str,
        at: Instant,
    ) {
        if let Some(old) = slot.timer.take() {
            timers.remove(&old);
        }
        *seq += 1;
        let key = (at, *seq);
        timers.insert(key, node.to_owned());
        slot.timer = Some(key);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use weft_cluster_ipam::manager::SpecPart;

    use super::*;

    fn spec(cidr: &str) -> impl FnOnce(&mut Pending) {
        let part = SpecPart::PodCidrs(vec![cidr.to_owned()]);
        move |p: &mut Pending| p.spec = Some(part)
    }

    fn names(q: &mut Queue, now: Instant) -> Vec<String> {
        std::iter::from_fn(|| q.pop(now)).map(|(n, _)| n).collect()
    }

    #[test]
    fn ready_nodes_go_oldest_first_and_coalesce() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        q.push("b", spec("10.0.1.0/24"));
        q.push("a", spec("10.0.0.0/24"));
        q.push("b", spec("10.0.2.0/24"));
        let (first, parts) = q.pop(t0).expect("b is ready");
        assert_eq!(first, "b");
        assert_eq!(
            parts.spec,
            Some(SpecPart::PodCidrs(vec!["10.0.2.0/24".into()]))
        );
        assert_eq!(names(&mut q, t0), ["a"]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_written_node_waits_for_its_interval_and_takes_one_write() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        q.push("a", spec("10.0.0.0/24"));
        assert_eq!(names(&mut q, t0), ["a"]);
        // Queued while in flight, and after: one write once the interval is over.
        q.push("a", spec("10.0.1.0/24"));
        q.done("a", None, t0 + Duration::from_millis(10));
        q.push("a", spec("10.0.2.0/24"));
        assert!(q.pop(t0 + Duration::from_millis(20)).is_none());
        assert_eq!(q.next_timer(), Some(t0 + NODE_WRITE_INTERVAL));
        q.fire(t0 + NODE_WRITE_INTERVAL - Duration::from_millis(1));
        assert!(q.pop(t0 + NODE_WRITE_INTERVAL).is_none());
        q.fire(t0 + NODE_WRITE_INTERVAL);
        let (node, parts) = q.pop(t0 + NODE_WRITE_INTERVAL).expect("due");
        assert_eq!(node, "a");
        assert_eq!(
            parts.spec,
            Some(SpecPart::PodCidrs(vec!["10.0.2.0/24".into()]))
        );
        assert!(q.pop(t0 + NODE_WRITE_INTERVAL).is_none());
    }

    #[test]
    fn a_write_slower_than_the_interval_lets_the_next_go_at_once() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        q.push("a", spec("10.0.0.0/24"));
        assert_eq!(names(&mut q, t0), ["a"]);
        q.push("a", spec("10.0.1.0/24"));
        q.fire(t0 + NODE_WRITE_INTERVAL);
        assert!(q.pop(t0 + NODE_WRITE_INTERVAL).is_none(), "still in flight");
        q.done("a", None, t0 + 2 * NODE_WRITE_INTERVAL);
        assert_eq!(names(&mut q, t0 + 2 * NODE_WRITE_INTERVAL), ["a"]);
    }

    #[test]
    fn a_failed_write_is_retried_under_what_came_meanwhile() {
        let t0 = Instant::now();
        let mut q = Queue::default();
        q.push("a", |p| {
            p.spec = Some(SpecPart::PodCidrs(vec!["10.0.0.0/24".into()]));
            p.error = Some("e".into());
        });
        let (_, parts) = q.pop(t0).expect("ready");
        q.push("a", spec("10.0.1.0/24"));
        let failed_at = t0 + Duration::from_millis(500);
        q.done("a", Some(parts), failed_at);
        assert_eq!(q.next_timer(), Some(failed_at + RETRY_AFTER));
        q.fire(t0 + NODE_WRITE_INTERVAL);
        assert!(q.pop(t0 + NODE_WRITE_INTERVAL).is_none(), "the retry waits");
        q.fire(failed_at + RETRY_AFTER);
        let (_, parts) = q.pop(failed_at + RETRY_AFTER).expect("retried");
        assert_eq!(
            parts.spec,
            Some(SpecPart::PodCidrs(vec!["10.0.1.0/24".into()]))
        );
        assert_eq!(parts.error.as_deref(), Some("e"));
        q.done("a", None, failed_at + RETRY_AFTER);
        q.fire(failed_at + RETRY_AFTER + NODE_WRITE_INTERVAL);
        assert!(q.is_empty());
        assert!(q.slots.is_empty() && q.timers.is_empty() && q.ready.is_empty());
    }

    #[test]
    fn a_burst_costs_no_scan() {
        // 10,000 nodes, each queued twice: one write each, in the order they came, and every
        // slot forgotten once its interval is over.
        let t0 = Instant::now();
        let mut q = Queue::default();
        for round in 0..2 {
            for i in 0..10_000 {
                q.push(&format!("node-{i}"), spec(&format!("10.{round}.0.0/24")));
            }
        }
        let popped = names(&mut q, t0);
        assert_eq!(popped.len(), 10_000);
        assert!(
            popped
                .iter()
                .enumerate()
                .all(|(i, n)| *n == format!("node-{i}"))
        );
        for n in &popped {
            q.done(n, None, t0);
        }
        q.fire(t0 + NODE_WRITE_INTERVAL);
        assert!(q.slots.is_empty() && q.timers.is_empty());
    }
}
