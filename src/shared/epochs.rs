//! Which client commands began before a point in time, so that a change of the rules can
//! wait for every command planned under the rules before it to end (a global index begins
//! its backfill only once no write that does not keep it can still run).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// Commands running, counted by the parity of the epoch they began in.
#[derive(Default)]
pub struct Epochs {
    epoch: AtomicU64,
    running: [AtomicUsize; 2],
    /// One barrier at a time: a second would count new commands with the first's parity.
    barrier: tokio::sync::Mutex<()>,
}

/// A command being counted; it ends when dropped.
pub struct Running<'a> {
    epochs: &'a Epochs,
    slot: usize,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.epochs.running[self.slot].fetch_sub(1, SeqCst);
    }
}

impl Epochs {
    /// Counts a command from now until the guard drops. Whatever the command reads after
    /// this (the rules in force) is at least as new as any barrier that does not wait for
    /// it.
    pub fn enter(&self) -> Running<'_> {
        loop {
            let e = self.epoch.load(SeqCst);
            let slot = (e & 1) as usize;
            self.running[slot].fetch_add(1, SeqCst);
            if self.epoch.load(SeqCst) == e {
                return Running { epochs: self, slot };
            }
            self.running[slot].fetch_sub(1, SeqCst);
        }
    }

    /// Waits until every command that began before this call has ended, at most `bound`;
    /// `Err` with how many are still running past it.
    pub async fn barrier(&self, bound: Duration) -> Result<(), usize> {
        let _one = self.barrier.lock().await;
        let e = self.epoch.fetch_add(1, SeqCst);
        let slot = (e & 1) as usize;
        let until = Instant::now() + bound;
        loop {
            let n = self.running[slot].load(SeqCst);
            if n == 0 {
                return Ok(());
            }
            if Instant::now() >= until {
                return Err(n);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_barrier_waits_for_commands_begun_before_it_only() {
        let e = Epochs::default();
        let old = e.enter();
        let waited = Duration::from_millis(50);
        assert_eq!(e.barrier(waited).await, Err(1), "a command begun before");
        // Begun after that barrier: the next one waits for it.
        let new = e.enter();
        drop(old);
        assert_eq!(
            e.barrier(waited).await,
            Err(1),
            "the newer command still runs"
        );
        drop(new);
        assert_eq!(e.barrier(waited).await, Ok(()));
    }

    #[tokio::test]
    async fn commands_begun_while_a_barrier_waits_do_not_hold_it_up() {
        let e = std::sync::Arc::new(Epochs::default());
        let old = e.enter();
        let b = {
            let e = e.clone();
            tokio::spawn(async move { e.barrier(Duration::from_secs(5)).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _new = e.enter();
        drop(old);
        assert_eq!(b.await.expect("the barrier"), Ok(()));
    }
}
