//! How many addresses a node lacks or holds beyond its watermarks (Cilium's
//! `calculateNeededIPs` / `calculateExcessIPs`, exactly), and the per-node settings they read
//! from `spec.ipam` with Cilium's defaults. Pure.

/// Cilium's `defaults.IPAMPreAllocation`: free addresses kept when `pre-allocate` is 0.
pub const DEFAULT_PRE_ALLOCATE: i64 = 8;

/// The watermark settings of one node (`spec.ipam.*`), with the provider's limit applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    /// Free addresses to keep (`pre-allocate`, 8 when unset; negative values are kept).
    pub pre: i64,
    /// Addresses to hold at least (`min-allocate`, 0 = none).
    pub min: i64,
    /// Addresses to hold at most (`max-allocate`, else the provider's maximum).
    pub max: i64,
    /// Extra addresses allowed above the watermark per round (`max-above-watermark`).
    pub max_above_watermark: i64,
}

impl Watermarks {
    /// The settings from the node's `spec.ipam` values, Cilium's getters applied: a zero
    /// `pre-allocate` means the default, a non-positive `max-allocate` the provider's maximum.
    #[must_use]
    pub fn from_spec(pre: i64, min: i64, max: i64, max_above_watermark: i64, limit: i64) -> Self {
        Self {
            pre: if pre == 0 { DEFAULT_PRE_ALLOCATE } else { pre },
            min,
            max: if max > 0 { max } else { limit },
            max_above_watermark,
        }
    }
}

/// Addresses to allocate so that `pre` stay free and `min` are held, without passing `max`.
#[must_use]
pub fn needed(available: i64, used: i64, w: &Watermarks) -> i64 {
    let mut needed = (w.pre + used - available).max(w.min - available);
    if w.max > 0 && available + needed > w.max {
        needed = w.max - available;
    }
    needed.max(0)
}

/// Addresses that could be released while keeping `pre` free (and `min` +
/// `max-above-watermark` held while usage is low).
#[must_use]
pub fn excess(available: i64, used: i64, w: &Watermarks) -> i64 {
    let floor = w.min + w.max_above_watermark;
    if used <= floor {
        if available <= floor {
            return 0;
        }
        if used + w.pre <= floor {
            return available - floor;
        }
    }
    (available - used - w.pre - w.max_above_watermark).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(pre: i64, min: i64, max: i64, maw: i64) -> Watermarks {
        Watermarks {
            pre,
            min,
            max,
            max_above_watermark: maw,
        }
    }

    #[test]
    fn needed_follows_cilium_vectors() {
        // (available, used, pre, min, max, expected) — Cilium's calculateNeededIPs table plus
        // the corners of each clamp.
        let cases: &[(i64, i64, i64, i64, i64, i64)] = &[
            (10, 10, 1, 0, 0, 1),
            (1, 0, 16, 0, 0, 15),
            (8, 0, 16, 0, 0, 8),
            (16, 8, 16, 0, 0, 8),
            (16, 0, 16, 0, 0, 0),
            (20, 0, 16, 0, 0, 0),
            (16, 16, 8, 0, 0, 8),
            (16, 15, 8, 0, 0, 7),
            (16, 17, 8, 0, 0, 9),
            (8, 4, 8, 16, 0, 8),
            (8, 2, 8, 0, 0, 2),
            (8, 4, 8, 8, 0, 4),
            (8, 4, 8, 8, 8, 0),
            (8, 2, 8, 8, 4, 0),
            (0, 0, 8, 0, 4, 4),
            (0, 0, 0, 8, 2, 2),
            (16, 16, 8, 0, 20, 4),
            (20, 20, 8, 0, 20, 0),
            (30, 30, 8, 0, 20, 0),
            (0, 0, -1, 0, 0, 0),
            (0, 5, -1, 0, 0, 4),
        ];
        for &(avail, used, pre, min, max, want) in cases {
            assert_eq!(
                needed(avail, used, &w(pre, min, max, 0)),
                want,
                "needed(avail={avail}, used={used}, pre={pre}, min={min}, max={max})"
            );
        }
    }

    #[test]
    fn excess_follows_cilium_vectors() {
        // (available, used, pre, min, maw, expected) — Cilium's calculateExcessIPs table.
        let cases: &[(i64, i64, i64, i64, i64, i64)] = &[
            (10, 1, 1, 0, 0, 8),
            (10, 1, 1, 0, 1, 7),
            (8, 0, 8, 0, 0, 0),
            (16, 0, 8, 0, 0, 8),
            (16, 8, 8, 0, 0, 0),
            (16, 4, 8, 0, 0, 4),
            (16, 4, 8, 0, 4, 0),
            (17, 4, 8, 0, 4, 1),
            (8, 0, 8, 8, 0, 0),
            (16, 0, 8, 8, 0, 8),
            (16, 0, 8, 8, 4, 4),
            (20, 4, 8, 8, 4, 8),
            (16, 4, 8, 4, 0, 4),
            (18, 10, 8, 4, 0, 0),
            (22, 10, 8, 4, 2, 2),
        ];
        for &(avail, used, pre, min, maw, want) in cases {
            assert_eq!(
                excess(avail, used, &w(pre, min, 0, maw)),
                want,
                "excess(avail={avail}, used={used}, pre={pre}, min={min}, maw={maw})"
            );
        }
    }

    #[test]
    fn settings_take_cilium_defaults() {
        assert_eq!(Watermarks::from_spec(0, 0, 0, 0, 256), w(8, 0, 256, 0));
        assert_eq!(Watermarks::from_spec(-1, 2, 300, 1, 256), w(-1, 2, 300, 1));
        assert_eq!(Watermarks::from_spec(16, 0, -3, 0, 256), w(16, 0, 256, 0));
    }
}
