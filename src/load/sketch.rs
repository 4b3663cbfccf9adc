//! The heaviest keys of a hot slot: a space-saving sketch (Metwally, Agrawal, El Abbadi),
//! a few dozen counters whatever the number of distinct keys. A key it holds has a count
//! that is never below its true count, and at most `error` above it; a key whose true count
//! is over total / capacity is always held.

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
}

/// Keys longer than this are counted by their first bytes (a key is shown, not stored).
pub const MAX_KEY: usize = 64;

impl Sketch {
    pub fn new(capacity: usize) -> Self {
        Sketch {
            capacity: capacity.max(1),
            items: Vec::new(),
            total: 0,
        }
    }

    /// Counts one sight of `key`.
    pub fn offer(&mut self, key: &[u8]) {
        let key = &key[..key.len().min(MAX_KEY)];
        self.total += 1;
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
    fn a_long_key_is_kept_by_its_first_bytes() {
        let mut s = Sketch::new(2);
        s.offer(&[b'x'; 200]);
        assert_eq!(s.top(1)[0].key.len(), MAX_KEY);
    }
}
