//! [`Intervals`]: a set of block indices kept as disjoint, non-adjacent inclusive ranges, so a
//! v4 `/0` carved into `/32`s (2^32 blocks) or a `/8` occupied in one call costs a few map
//! entries instead of a bitmap. It knows nothing of addresses.

use std::collections::BTreeMap;

/// A set of `u64` indices as merged inclusive ranges, with its cardinality.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Intervals {
    /// start → end (inclusive); ranges never overlap nor touch.
    ranges: BTreeMap<u64, u64>,
    len: u64,
}

impl Intervals {
    /// How many indices are in the set.
    pub(super) const fn len(&self) -> u64 {
        self.len
    }

    /// The range holding `index`, if any.
    fn range_of(&self, index: u64) -> Option<(u64, u64)> {
        self.ranges
            .range(..=index)
            .next_back()
            .filter(|&(_, &end)| end >= index)
            .map(|(&start, &end)| (start, end))
    }

    /// Whether every index of `lo..=hi` is in the set.
    pub(super) fn covers(&self, lo: u64, hi: u64) -> bool {
        self.range_of(lo).is_some_and(|(_, end)| end >= hi)
    }

    /// How many indices of `lo..=hi` are in the set.
    pub(super) fn count_in(&self, lo: u64, hi: u64) -> u64 {
        self.overlapping(lo, hi)
            .into_iter()
            .map(|(start, end)| end.min(hi) - start.max(lo) + 1)
            .sum()
    }

    /// The stored ranges that share an index with `lo..=hi`.
    fn overlapping(&self, lo: u64, hi: u64) -> Vec<(u64, u64)> {
        self.ranges
            .range(..=hi)
            .rev()
            .take_while(|&(_, &end)| end >= lo)
            .map(|(&start, &end)| (start, end))
            .collect()
    }

    /// The smallest index `>= index` that is not in the set (may be past any bound).
    pub(super) fn skip(&self, index: u64) -> u64 {
        self.range_of(index)
            .map_or(index, |(_, end)| end.saturating_add(1))
    }

    /// Adds `lo..=hi`; returns how many indices were new.
    pub(super) fn insert(&mut self, lo: u64, hi: u64) -> u64 {
        let added = hi - lo + 1 - self.count_in(lo, hi);
        let touching: Vec<u64> = self
            .ranges
            .range(..=hi.saturating_add(1))
            .rev()
            .take_while(|&(_, &end)| end.saturating_add(1) >= lo)
            .map(|(&start, _)| start)
            .collect();
        let (mut new_lo, mut new_hi) = (lo, hi);
        for start in touching {
            if let Some(end) = self.ranges.remove(&start) {
                new_lo = new_lo.min(start);
                new_hi = new_hi.max(end);
            }
        }
        self.ranges.insert(new_lo, new_hi);
        self.len += added;
        added
    }

    /// Removes `lo..=hi`; returns how many indices were present.
    pub(super) fn remove(&mut self, lo: u64, hi: u64) -> u64 {
        let mut removed = 0;
        for (start, end) in self.overlapping(lo, hi) {
            self.ranges.remove(&start);
            removed += end.min(hi) - start.max(lo) + 1;
            if start < lo {
                self.ranges.insert(start, lo - 1);
            }
            if end > hi {
                self.ranges.insert(hi + 1, end);
            }
        }
        self.len -= removed;
        removed
    }

    /// The stored ranges, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&start, &end)| (start, end))
    }
}
