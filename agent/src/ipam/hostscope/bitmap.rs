//! The allocation bitmap behind a [`super::CidrRange`]: one bit per offset, stored in
//! 4096-bit chunks that exist only while one of their bits is set, so a huge range (an IPv4
//! /8) costs memory in proportion to what is allocated, and finding a free offset skips full
//! chunks and whole words instead of testing offsets one by one. Knows nothing about
//! addresses.

use std::collections::BTreeMap;

/// log2 of the bits per chunk.
const CHUNK_SHIFT: u32 = 12;
/// Bits per chunk.
const CHUNK_BITS: u64 = 1 << CHUNK_SHIFT;
/// Words per chunk.
const WORDS: usize = (CHUNK_BITS / 64) as usize;

/// One chunk: its words and how many of their bits are set (never 0 while stored).
#[derive(Clone, Debug)]
struct Chunk {
    words: [u64; WORDS],
    count: u64,
}

/// A set of offsets, as a sparse bitmap.
#[derive(Clone, Debug, Default)]
pub(super) struct Bitmap {
    chunks: BTreeMap<u64, Chunk>,
    count: u64,
}

/// The chunk index, word index and bit mask of `bit`.
fn locate(bit: u64) -> (u64, usize, u64) {
    let word = usize::try_from((bit % CHUNK_BITS) / 64).unwrap_or(0);
    (bit >> CHUNK_SHIFT, word, 1 << (bit % 64))
}

impl Bitmap {
    /// Number of set bits.
    pub(super) const fn count(&self) -> u64 {
        self.count
    }

    /// Whether `bit` is set.
    pub(super) fn get(&self, bit: u64) -> bool {
        let (chunk, word, mask) = locate(bit);
        self.chunks
            .get(&chunk)
            .is_some_and(|c| c.words[word] & mask != 0)
    }

    /// Sets `bit`; false if it was already set.
    pub(super) fn set(&mut self, bit: u64) -> bool {
        let (chunk, word, mask) = locate(bit);
        let chunk = self.chunks.entry(chunk).or_insert(Chunk {
            words: [0; WORDS],
            count: 0,
        });
        if chunk.words[word] & mask != 0 {
            return false;
        }
        chunk.words[word] |= mask;
        chunk.count += 1;
        self.count += 1;
        true
    }

    /// Clears `bit`; false if it was not set.
    pub(super) fn clear(&mut self, bit: u64) -> bool {
        let (index, word, mask) = locate(bit);
        let Some(chunk) = self.chunks.get_mut(&index) else {
            return false;
        };
        if chunk.words[word] & mask == 0 {
            return false;
        }
        chunk.words[word] &= !mask;
        chunk.count -= 1;
        self.count -= 1;
        if chunk.count == 0 {
            self.chunks.remove(&index);
        }
        true
    }

    /// The lowest clear bit in `lo..hi`, if any.
    pub(super) fn first_clear(&self, lo: u64, hi: u64) -> Option<u64> {
        let mut pos = lo;
        while pos < hi {
            let index = pos >> CHUNK_SHIFT;
            let chunk_end = ((index + 1) << CHUNK_SHIFT).min(hi);
            match self.chunks.get(&index) {
                None => return Some(pos),
                Some(chunk) if chunk.count == CHUNK_BITS => {}
                Some(chunk) => {
                    if let Some(found) = Self::first_clear_in(chunk, pos, chunk_end) {
                        return Some(found);
                    }
                }
            }
            pos = chunk_end;
        }
        None
    }

    /// The lowest clear bit of `chunk` in `pos..end` (both inside the chunk).
    fn first_clear_in(chunk: &Chunk, mut pos: u64, end: u64) -> Option<u64> {
        while pos < end {
            let (_, word, _) = locate(pos);
            let below = (1u64 << (pos % 64)) - 1;
            let free = !(chunk.words[word] | below);
            if free != 0 {
                let found = pos - pos % 64 + u64::from(free.trailing_zeros());
                return (found < end).then_some(found);
            }
            pos = pos - pos % 64 + 64;
        }
        None
    }

    /// The set bits, in ascending order.
    pub(super) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.chunks.iter().flat_map(|(index, chunk)| {
            let base = index << CHUNK_SHIFT;
            (0u64..)
                .zip(chunk.words.iter())
                .flat_map(move |(w, &word)| {
                    (0..64u64)
                        .filter(move |b| word & (1 << b) != 0)
                        .map(move |b| base + w * 64 + b)
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_clear_and_count() {
        let mut b = Bitmap::default();
        assert!(b.set(5));
        assert!(!b.set(5));
        assert!(b.set(70_000));
        assert_eq!(b.count(), 2);
        assert!(b.get(5) && b.get(70_000) && !b.get(6));
        assert!(b.clear(5));
        assert!(!b.clear(5));
        assert!(!b.clear(123));
        assert_eq!(b.count(), 1);
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![70_000]);
        assert!(b.clear(70_000));
        assert!(b.chunks.is_empty());
    }

    #[test]
    fn first_clear_skips_full_words_and_chunks() {
        let mut b = Bitmap::default();
        for bit in 0..(CHUNK_BITS + 130) {
            b.set(bit);
        }
        let cases = [
            (0, 10_000, Some(CHUNK_BITS + 130)),
            (0, CHUNK_BITS + 130, None),
            (CHUNK_BITS + 131, 10_000, Some(CHUNK_BITS + 131)),
            (3, 3, None),
        ];
        for (lo, hi, want) in cases {
            assert_eq!(b.first_clear(lo, hi), want, "{lo}..{hi}");
        }
        b.clear(77);
        assert_eq!(b.first_clear(0, 10_000), Some(77));
        assert_eq!(b.first_clear(78, 10_000), Some(CHUNK_BITS + 130));
    }
}
