//! Which client commands began before a point in time, so that a change of the rules can
//! wait for every command planned under the rules before it to end (a global index begins
//! its backfill only once no write that does not keep it can still run).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Commands running, counted by the epoch they began in.
#[derive(Default)]
pub struct Epochs {
    /// The current epoch and, by epoch, the commands still running that began in it.
    state: Mutex<(u64, BTreeMap<u64, usize>)>,
}

/// A command being counted; it ends when dropped.
pub struct Running<'a> {
    epochs: &'a Epochs,
    epoch: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.epochs.state.lock() {
            if let Some(n) = s.1.get_mut(&self.epoch) {
                *n -= 1;
                if *n == 0 {
                    s.1.remove(&self.epoch);
                }
            }
        }
    }
}

impl Epochs {
    /// Counts a command from now until the guard drops. Whatever the command reads after
    /// this (the rules in force) is at least as new as what any barrier that does not wait
    /// for it saw.
    pub fn enter(&self) -> Running<'_> {
        let epoch = match self.state.lock() {
            Ok(mut s) => {
                let e = s.0;
                *s.1.entry(e).or_default() += 1;
                e
            }
            Err(_) => u64::MAX,
        };
        Running {
            epochs: self,
            epoch,
        }
    }

    /// Waits until every command that began before this call has ended, at most `bound`;
    /// `Err` with how many are still running past it.
    pub async fn barrier(&self, bound: Duration) -> Result<(), usize> {
        let before = match self.state.lock() {
            Ok(mut s) => {
                s.0 += 1;
                s.0
            }
            Err(_) => return Err(usize::MAX),
        };
        let until = Instant::now() + bound;
        loop {
            let n: usize = match self.state.lock() {
                Ok(s) => s.1.range(..before).map(|(_, n)| n).sum(),
                Err(_) => return Err(usize::MAX),
            };
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
        // Begun after that barrier: the next one waits for it, and still for `old`.
        let new = e.enter();
        assert_eq!(e.barrier(waited).await, Err(2));
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

    #[tokio::test]
    async fn a_barrier_that_gave_up_leaves_no_straggler_behind_the_next() {
        let e = Epochs::default();
        let straggler = e.enter();
        let waited = Duration::from_millis(20);
        assert_eq!(e.barrier(waited).await, Err(1));
        let _ = e.enter();
        assert_eq!(
            e.barrier(waited).await,
            Err(1),
            "the straggler of two epochs ago"
        );
        assert_eq!(e.barrier(waited).await, Err(1));
        drop(straggler);
        assert_eq!(e.barrier(waited).await, Ok(()));
    }
}
