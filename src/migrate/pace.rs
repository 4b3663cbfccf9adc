//! The pace of a move's copy (its backfill, its verify and its cleanup): at most its `rate`
//! rows/s, and slower while the application's statements on the move's two nodes take longer
//! than before the copy began by more than `[metadata] copy_slowdown_pct` (the proxy times
//! every statement it sends a node, so no probe is needed: the load the copy must not hurt is
//! the load it measures). An additive-increase, multiplicative-decrease controller, as TCP's:
//! the copy's share halves at once when the application slows, and grows back a tenth each
//! quarter second while it does not; never below a tenth of `rate`, and when the application
//! stays slow for two seconds with the copy held at a quarter or less, the copy is not the
//! cause: that latency becomes the baseline and the copy grows back. What gh-ost's
//! `--max-load` and Vitess's tablet throttler do with a server variable or replication lag,
//! here with the application's own latency.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::shared::Shared;

/// The longest sleep between pings of the connections a paced step keeps (the shortest
/// lease's idle limit is one second).
const KEEP_ALIVE: Duration = Duration::from_millis(400);

/// How often the controller looks at the latency.
const TICK: Duration = Duration::from_millis(250);
/// The window before the copy that sets the baseline.
const BASELINE: Duration = Duration::from_millis(500);
/// Fewer application statements than this in a window say nothing about its latency.
const MIN_STATEMENTS: u64 = 20;
/// The copy's share never goes below this part of its rate.
const FLOOR: f64 = 0.1;
/// Ticks (2 s) the application may stay slow with the copy held low before its latency is
/// taken as the new baseline.
const STUCK_TICKS: u32 = 8;

/// The controller: the copy's share of its rate (1.0: all of it).
#[derive(Debug, Clone, PartialEq)]
pub struct Controller {
    /// Seconds per application statement before the copy, once known.
    baseline: Option<f64>,
    /// How much slower the application may get: 1.15 for 15%.
    limit: f64,
    pub share: f64,
    /// Ticks in a row the application stayed slow with the copy already held low.
    stuck: u32,
}

impl Controller {
    pub fn new(slowdown_pct: u32) -> Controller {
        Controller {
            baseline: None,
            limit: 1.0 + f64::from(slowdown_pct) / 100.0,
            share: 1.0,
            stuck: 0,
        }
    }

    /// The window before the copy: its mean, when it had enough statements.
    pub fn baseline(&mut self, mean: Option<f64>, statements: u64) {
        if statements >= MIN_STATEMENTS {
            self.baseline = mean;
        }
    }

    /// One tick's window of application statements (their mean time, how many): the share
    /// of the rate the copy may take until the next.
    pub fn tick(&mut self, mean: Option<f64>, statements: u64) -> f64 {
        let slowed = match (self.baseline, mean) {
            (Some(base), Some(m)) if statements >= MIN_STATEMENTS => m > base * self.limit,
            _ => false,
        };
        // Slow for two seconds with the copy at a quarter of its rate or less: the copy is
        // not what slows the application (its load grew, the capture's tail reads), so
        // that latency is the new baseline and the copy grows back.
        self.stuck = if slowed && self.share <= 0.25 {
            self.stuck + 1
        } else {
            0
        };
        if self.stuck >= STUCK_TICKS {
            self.stuck = 0;
            self.baseline = mean;
            self.share = (self.share + 0.1).min(1.0);
            return self.share;
        }
        self.share = if slowed {
            (self.share / 2.0).max(FLOOR)
        } else {
            (self.share + 0.1).min(1.0)
        };
        self.share
    }
}

/// A copy loop's throttle: `after(n)` once `n` more rows are copied (or deleted) sleeps as
/// long as the pace asks.
pub struct Throttle<'a> {
    shared: &'a Shared,
    rate: u64,
    nodes: [String; 2],
    ctl: Option<Controller>,
    /// When the rows done so far are due at the current pace.
    due: Instant,
    tick: Instant,
    /// The latency histograms' (sum, count) at the last tick.
    seen: (f64, u64),
}

impl<'a> Throttle<'a> {
    /// A throttle to `rate` rows/s (0: none) for a move from `source` to `target`; with a
    /// slowdown limit, it first measures the application's statements on the two nodes.
    pub async fn start(
        shared: &'a Shared,
        rate: u64,
        source: &str,
        target: &str,
        slowdown_pct: u32,
    ) -> Throttle<'a> {
        let mut t = Throttle {
            shared,
            rate,
            nodes: [source.to_string(), target.to_string()],
            ctl: None,
            due: Instant::now(),
            tick: Instant::now(),
            seen: (0.0, 0),
        };
        if rate > 0 && slowdown_pct > 0 {
            let mut ctl = Controller::new(slowdown_pct);
            t.seen = t.latency();
            tokio::time::sleep(BASELINE).await;
            let (mean, n) = t.window();
            ctl.baseline(mean, n);
            t.ctl = Some(ctl);
            t.due = Instant::now();
            t.tick = Instant::now();
        }
        t
    }

    /// The share of its rate the copy takes now (1.0 without a controller).
    pub fn share(&self) -> f64 {
        self.ctl.as_ref().map_or(1.0, |c| c.share)
    }

    /// `n` more rows done: sleeps until they are due at the current pace, pinging the
    /// connections `alive` meanwhile (a node closes a driver's connection idle for about a
    /// lease, `super::step::ends`, and a slowed pace sleeps longer than that).
    /// `Err((i, e))`: the ping of `alive[i]` failed.
    pub async fn after(
        &mut self,
        n: u64,
        alive: &mut [&mut Conn],
    ) -> Result<(), (usize, mysql_async::Error)> {
        if self.rate == 0 {
            return Ok(());
        }
        if self.tick.elapsed() >= TICK {
            self.tick = Instant::now();
            let (mean, count) = self.window();
            if let Some(ctl) = self.ctl.as_mut() {
                ctl.tick(mean, count);
            }
        }
        let rate = self.rate as f64 * self.share();
        let now = Instant::now();
        // A pause longer than a second (a catch-up, a slow batch) is not made up for by a
        // burst.
        if self.due + Duration::from_secs(1) < now {
            self.due = now;
        }
        self.due += Duration::from_secs_f64(n as f64 / rate);
        loop {
            let left = self.due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            tokio::time::sleep(left.min(KEEP_ALIVE)).await;
            if left > KEEP_ALIVE {
                for (i, c) in alive.iter_mut().enumerate() {
                    c.ping().await.map_err(|e| (i, e))?;
                }
            }
        }
    }

    /// The application's statements on both nodes since the last window: their mean time
    /// and how many.
    fn window(&mut self) -> (Option<f64>, u64) {
        let now = self.latency();
        let (sum, count) = (now.0 - self.seen.0, now.1.saturating_sub(self.seen.1));
        self.seen = now;
        ((count > 0).then(|| sum / count as f64), count)
    }

    fn latency(&self) -> (f64, u64) {
        let mut out = (0.0, 0);
        for n in &self.nodes {
            let h = self.shared.metrics.latency.with_label_values(&[n]);
            out.0 += h.get_sample_sum();
            out.1 += h.get_sample_count();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_halves_when_the_application_slows_and_grows_back_when_it_does_not() {
        let mut c = Controller::new(15);
        c.baseline(Some(0.001), 400);
        assert_eq!(
            c.tick(Some(0.00112), 100),
            1.0,
            "12% slower: within the limit"
        );
        assert_eq!(c.tick(Some(0.0012), 100), 0.5, "20% slower: halved");
        assert_eq!(c.tick(Some(0.0013), 100), 0.25);
        assert_eq!(c.tick(Some(0.002), 100), 0.125);
        assert_eq!(c.tick(Some(0.002), 100), FLOOR, "never below the floor");
        assert!(
            (c.tick(Some(0.001), 100) - 0.2).abs() < 1e-9,
            "a tenth back"
        );
        // Too few statements say nothing: the share grows back.
        assert!((c.tick(Some(0.01), 5) - 0.3).abs() < 1e-9);
    }

    #[test]
    fn a_slowdown_the_copy_does_not_cause_becomes_the_new_baseline() {
        let mut c = Controller::new(15);
        c.baseline(Some(0.001), 400);
        // The application is 50% slower whatever the copy does.
        let shares: Vec<f64> = (0..12).map(|_| c.tick(Some(0.0015), 100)).collect();
        assert_eq!(&shares[..3], [0.5, 0.25, 0.125]);
        // Held low and still slow for STUCK_TICKS ticks: that latency is the baseline now,
        // and the copy grows back.
        let grew = (1..shares.len())
            .find(|i| shares[*i] > shares[i - 1])
            .expect("the share grew back");
        assert!(grew <= 4 + STUCK_TICKS as usize, "{shares:?}");
        let last = c.share;
        assert!(
            c.tick(Some(0.0016), 100) > last,
            "within 15% of the new baseline"
        );
    }

    #[test]
    fn without_a_baseline_the_copy_keeps_its_rate() {
        let mut c = Controller::new(15);
        // Idle before the copy: no baseline, nothing to protect.
        c.baseline(None, 0);
        c.baseline(Some(0.001), 3);
        assert_eq!(c.tick(Some(0.5), 1000), 1.0);
    }
}
