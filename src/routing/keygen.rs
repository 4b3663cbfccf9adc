//! Snowflake ids for `key_generator = { kind = "snowflake" }`: 41 bits of milliseconds since
//! the table's epoch, 10 bits naming the logical slot of the row's shard key (never a node, so
//! rows keep a valid id when their slot moves), 12 bits of sequence, of which the top
//! `worker_bits` name this proxy when several proxies generate ids for one table.

use std::sync::Mutex;

pub const SEQ_BITS: u32 = 12;
pub const SLOT_BITS: u32 = 10;
pub const MS_BITS: u32 = 41;

/// Why no id was generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdError {
    /// The clock is behind the last id's millisecond: generating could repeat an id.
    ClockBack { by_ms: u64 },
    /// Before the epoch, or past the 41 bits (year epoch + 69).
    OutOfRange,
}

impl std::fmt::Display for IdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdError::ClockBack { by_ms } => write!(
                f,
                "the clock stepped back by {by_ms} ms; shardproxy refuses to generate ids until it passes the last id's time (a repeated id would be a duplicate key)"
            ),
            IdError::OutOfRange => write!(
                f,
                "the clock is outside the 41-bit millisecond range of this table's key_generator epoch"
            ),
        }
    }
}

/// Layout of one table's ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdLayout {
    /// Unix milliseconds of the epoch.
    pub epoch_ms: i64,
    /// This proxy's number, in the top `worker_bits` of the sequence.
    pub worker: u16,
    pub worker_bits: u8,
}

/// The process-wide state: the last millisecond used and the sequence within it. Shared by
/// every table and kept across reloads, so an id is never issued twice.
#[derive(Debug, Default)]
pub struct Snowflake {
    state: Mutex<(i64, u32)>,
}

impl Snowflake {
    pub const fn new() -> Snowflake {
        Snowflake {
            state: Mutex::new((0, 0)),
        }
    }

    /// The next id for a row in `slot`; `now_ms` is read again while a millisecond's
    /// sequence is used up.
    pub fn next(
        &self,
        layout: &IdLayout,
        slot: u16,
        now_ms: &dyn Fn() -> i64,
    ) -> Result<u64, IdError> {
        let seq_room = SEQ_BITS - u32::from(layout.worker_bits);
        let max_seq = (1u32 << seq_room) - 1;
        loop {
            let now = now_ms();
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let (last, seq) = *st;
            let seq = if now < last {
                return Err(IdError::ClockBack {
                    by_ms: (last - now) as u64,
                });
            } else if now == last {
                if seq >= max_seq {
                    drop(st);
                    std::thread::yield_now();
                    continue;
                }
                seq + 1
            } else {
                0
            };
            let ms = now - layout.epoch_ms;
            if !(0..(1i64 << MS_BITS)).contains(&ms) {
                return Err(IdError::OutOfRange);
            }
            *st = (now, seq);
            let seq_part = (u64::from(layout.worker) << seq_room) | u64::from(seq);
            return Ok(((ms as u64) << (SLOT_BITS + SEQ_BITS))
                | (u64::from(slot & 0x3FF) << SEQ_BITS)
                | seq_part);
        }
    }
}

/// The slot an id names.
pub fn slot_of_id(id: u64) -> u16 {
    ((id >> SEQ_BITS) & 0x3FF) as u16
}

/// Unix milliseconds now.
pub fn system_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, Ordering};

    const L: IdLayout = IdLayout {
        epoch_ms: 1_700_000_000_000,
        worker: 0,
        worker_bits: 0,
    };

    #[test]
    fn ids_carry_time_slot_and_sequence_and_grow() {
        let g = Snowflake::default();
        let t = AtomicI64::new(1_700_000_000_123);
        let clock = || t.load(Ordering::SeqCst);
        let a = g.next(&L, 513, &clock).unwrap();
        let b = g.next(&L, 513, &clock).unwrap();
        assert_eq!(a >> 22, 123);
        assert_eq!(slot_of_id(a), 513);
        assert_eq!(a & 0xFFF, 0);
        assert_eq!(b & 0xFFF, 1);
        t.store(1_700_000_000_124, Ordering::SeqCst);
        let c = g.next(&L, 7, &clock).unwrap();
        assert!(c > b);
        assert_eq!(slot_of_id(c), 7);
        assert!(c < (1u64 << 63), "ids stay positive BIGINTs");
    }

    #[test]
    fn a_clock_that_steps_back_is_refused() {
        let g = Snowflake::default();
        let t = AtomicI64::new(1_700_000_001_000);
        let clock = || t.load(Ordering::SeqCst);
        g.next(&L, 1, &clock).unwrap();
        t.store(1_700_000_000_990, Ordering::SeqCst);
        assert_eq!(g.next(&L, 1, &clock), Err(IdError::ClockBack { by_ms: 10 }));
        t.store(1_700_000_001_001, Ordering::SeqCst);
        assert!(g.next(&L, 1, &clock).is_ok());
    }

    #[test]
    fn a_used_up_millisecond_waits_for_the_next() {
        let g = Snowflake::default();
        let calls = AtomicI64::new(0);
        // The clock ticks once every 5000 reads.
        let clock = || 1_700_000_000_000 + calls.fetch_add(1, Ordering::SeqCst) / 5000;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..9000 {
            assert!(seen.insert(g.next(&L, 3, &clock).unwrap()));
        }
    }

    #[test]
    fn worker_bits_split_the_sequence() {
        let g = Snowflake::default();
        let l = IdLayout {
            worker: 3,
            worker_bits: 2,
            ..L
        };
        let clock = || 1_700_000_000_500;
        let id = g.next(&l, 0, &clock).unwrap();
        assert_eq!((id & 0xFFF) >> 10, 3);
        let before = || 1_600_000_000_000;
        let g2 = Snowflake::default();
        assert_eq!(g2.next(&L, 0, &before), Err(IdError::OutOfRange));
    }
}
