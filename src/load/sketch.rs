//! The heaviest keys of a hot slot: a space-saving sketch (Metwally, Agrawal, El Abbadi),
//! a few dozen counters whatever the number of distinct keys. A key it holds has a count
//! that is never below its true count, and at most `error` above it; a key whose true count
//! is over total / capacity is always held. Beside it, a uniform sample of the keys seen
//! (reservoir sampling, Vitter's algorithm R), from which a hot range's split point is
//! chosen: the sketch's keys are the heavy ones, and over many light keys only the latest.

/// A key's counter: its count, and how much of it may belong to the keys it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    pub key: Box<[u8]>,
    pub count: u64,
    pub error: u64,
}

#[derive(Debug, Clone)]
pub struct Sketch {
    capacity: usize,
    items: Vec<Counted>,
    /// Keys offered in all.
    pub total: u64,
    /// Each sight had the same chance to be one of these (at most `capacity` of them).
    sample: Vec<Box<[u8]>>,
}

/// A well-mixed number of `x` (SplitMix64's finalizer): the reservoir's choices, without a
/// generator's state on the hot path.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Keys longer than this are counted by their first bytes (a key is shown, not stored).
pub const MAX_KEY: usize = 64;

impl Sketch {
    pub fn new(capacity: usize) -> Self {
        Sketch {
            capacity: capacity.max(1),
            items: Vec::new(),
            total: 0,
            sample: Vec::new(),
        }
    }

    /// The sampled keys (each sight of a key equally likely to be among them).
    pub fn sample(&self) -> &[Box<[u8]>] {
        &self.sample
    }

    /// Counts one sight of `key`.
    pub fn offer(&mut self, key: &[u8]) {
        let key = &key[..key.len().min(MAX_KEY)];
        self.total += 1;
        if self.sample.len() < self.capacity {
            self.sample.push(key.into());
        } else {
            let at = (mix(self.total) % self.total) as usize;
            if let Some(s) = self.sample.get_mut(at) {
                *s = key.into();
            }
        }
        if let Some(c) = self.items.iter_mut().find(|c| &*c.key == key) {
            c.count += 1;
            return;
        }
        if self.items.len() < self.capacity {
            self.items.push(Counted {
                key: key.into(),
                count: 1,
                error: 0,
            });
            return;
        }
        // The least counted key gives its counter up: the newcomer may have been seen as
        // often as it was, never more.
        if let Some(min) = self.items.iter_mut().min_by_key(|c| c.count) {
            let floor = min.count;
            *min = Counted {
                key: key.into(),
                count: floor + 1,
                error: floor,
            };
        }
    }

    /// The `n` most counted keys, most first (ties by key, so the order is stable).
    pub fn top(&self, n: usize) -> Vec<Counted> {
        let mut all = self.items.clone();
        all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        all.truncate(n);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heavy_key_is_found_among_many_light_ones() {
        let mut s = Sketch::new(8);
        for i in 0..10_000u32 {
            // Every third sight is key "hot"; the rest are 5,000 distinct keys.
            if i % 3 == 0 {
                s.offer(b"hot");
            } else {
                s.offer(format!("k{}", i % 5000).as_bytes());
            }
        }
        let top = s.top(3);
        assert_eq!(&*top[0].key, b"hot");
        // Never under the true count (3,334), at most `error` over it.
        assert!(top[0].count >= 3334);
        assert!(top[0].count - top[0].error <= 3334);
        assert_eq!(s.total, 10_000);
    }

    #[test]
    fn counts_are_exact_while_the_keys_fit() {
        let mut s = Sketch::new(4);
        for k in [b"a", b"b", b"a", b"c", b"a", b"b"] {
            s.offer(k);
        }
        let top = s.top(10);
        let got: Vec<(&[u8], u64, u64)> = top.iter().map(|c| (&*c.key, c.count, c.error)).collect();
        assert_eq!(
            got,
            vec![(&b"a"[..], 3, 0), (&b"b"[..], 2, 0), (&b"c"[..], 1, 0)]
        );
    }

    #[test]
    fn the_sample_is_spread_over_every_key_seen_not_the_latest() {
        let mut s = Sketch::new(32);
        // 1,000 keys seen in order, each 20 times: the sample spans them all.
        for _ in 0..20 {
            for k in 0..1000u32 {
                s.offer(format!("{k:04}").as_bytes());
            }
        }
        let mut keys: Vec<u32> = s
            .sample()
            .iter()
            .map(|k| std::str::from_utf8(k).unwrap().parse().unwrap())
            .collect();
        keys.sort_unstable();
        assert_eq!(keys.len(), 32);
        let median = keys[16];
        assert!((250..750).contains(&median), "{keys:?}");
        assert!(keys[0] < 250 && keys[31] >= 750, "{keys:?}");
        // The sketch's own keys are the last ones offered.
        assert!(s.top(32).iter().all(|c| &*c.key >= b"0900".as_slice()));
    }

    #[test]
    fn a_long_key_is_kept_by_its_first_bytes() {
        let mut s = Sketch::new(2);
        s.offer(&[b'x'; 200]);
        assert_eq!(s.top(1)[0].key.len(), MAX_KEY);
    }
}
