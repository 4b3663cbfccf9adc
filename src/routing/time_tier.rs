//! The `time_tier` rule: rows live on hot / warm / cold nodes by a date column.
//!
//! Tier `i` (newest first) holds rows dated at or after its lower bound `L[i]` and before the
//! bound of the tier above, `L[i-1]`. An ETL moves rows across `L[i]` (export, import into
//! tier `i+1`, delete from tier `i`) and may run late, so a row in the overlap window
//! `[L[i] - overlap_days, L[i])` can be on tier `i` only, on both, or on tier `i+1` only. That
//! window is read from both tiers: the newer tier's primary keys in the window are excluded from
//! the older tier (the newer copy wins), which makes the tiers' row sets disjoint, so every
//! merge (append, aggregate, ordered, paged) counts each row exactly once.
//!
//! Bounds are days: relative ones (`now-365d`) are evaluated on the current UTC day, so a plan
//! is the same all day long.

use std::fmt;
use std::ops::Bound;

use chrono::NaiveDate;

use super::range::RangeKey;
use crate::sql::ranges::Ranges;

/// A tier's lower bound as the rules file writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundSpec {
    /// `now-365d`: that many days before today (UTC).
    Relative { days: i64 },
    /// `2020-01-01`.
    Absolute(NaiveDate),
}

impl BoundSpec {
    pub fn parse(text: &str) -> Result<BoundSpec, String> {
        let t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let bad = || {
            format!(
                "bound \"{text}\" is neither `now-<N>d` (e.g. now-365d) nor a date `YYYY-MM-DD`"
            )
        };
        if let Some(rest) = t.strip_prefix("now") {
            if rest.is_empty() {
                return Ok(BoundSpec::Relative { days: 0 });
            }
            let rest = rest.strip_prefix('-').ok_or_else(bad)?;
            let days = rest.strip_suffix('d').ok_or_else(bad)?;
            let days: i64 = days.parse().map_err(|_| bad())?;
            if !(0..=100_000).contains(&days) {
                return Err(bad());
            }
            return Ok(BoundSpec::Relative { days });
        }
        NaiveDate::parse_from_str(&t, "%Y-%m-%d")
            .map(BoundSpec::Absolute)
            .map_err(|_| bad())
    }

    /// The bound's day, evaluated on `today`.
    pub fn at(&self, today: NaiveDate) -> NaiveDate {
        match self {
            BoundSpec::Relative { days } => today - chrono::Duration::days(*days),
            BoundSpec::Absolute(d) => *d,
        }
    }
}

impl fmt::Display for BoundSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundSpec::Relative { days } => write!(f, "now-{days}d"),
            BoundSpec::Absolute(d) => write!(f, "{d}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tier {
    pub name: String,
    pub node: usize,
    /// `None` only for the last (oldest) tier, which holds everything older.
    pub lower: Option<BoundSpec>,
    pub overlap_days: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierRule {
    /// Lower-cased date column.
    pub column: String,
    /// Primary-key columns: rows in an overlap window are de-duplicated by them.
    pub primary_key: Vec<String>,
    /// Newest first.
    pub tiers: Vec<Tier>,
    /// Columns a lookup without a date asks the tiers by, newest first.
    pub poll_columns: Vec<String>,
    /// The poll columns are unique: a lookup stops at the first tier that has rows.
    pub poll_unique: bool,
    /// Extra attempts of a tier's write that failed transiently.
    pub poll_retries: u32,
    pub poll_retry_ms: u64,
}

/// A date as a literal (`'2024-06-28'`).
fn date(d: NaiveDate) -> String {
    crate::sql::write::text_literal(&d.to_string())
}

/// The predicate text of `col >= lo AND col < hi` (either side open); `col` is the column
/// reference as SQL (quoted, qualified).
fn range_sql(col: &str, lo: Option<NaiveDate>, hi: Option<NaiveDate>) -> String {
    match (lo, hi) {
        (Some(l), Some(h)) => format!("{col} >= {} AND {col} < {}", date(l), date(h)),
        (Some(l), None) => format!("{col} >= {}", date(l)),
        (None, Some(h)) => format!("({col} < {} OR {col} IS NULL)", date(h)),
        (None, None) => "1 = 1".to_string(),
    }
}

/// A day as a key of the date domain (see [`super::range::KeyKind::Date`]).
pub fn day_key(d: NaiveDate) -> RangeKey {
    RangeKey::Text(format!("{d} 00:00:00.000000"))
}

fn overlaps(q: &Ranges<RangeKey>, lo: Option<NaiveDate>, hi: Option<NaiveDate>) -> bool {
    if q.is_all() {
        return true;
    }
    let lo = lo.map(day_key);
    let hi = hi.map(day_key);
    q.overlaps(
        lo.as_ref().map_or(Bound::Unbounded, Bound::Included),
        hi.as_ref().map_or(Bound::Unbounded, Bound::Excluded),
    )
}

/// One tier a read asks, with the predicate that keeps it to its serving range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub tier: usize,
    pub node: usize,
    /// `col >= L[i] - overlap` and `col < L[i-1]` (the oldest tier also takes NULL dates).
    pub pred: String,
    /// The window (index into [`Layout::windows`]) whose newer tier's rows this part must not
    /// repeat.
    pub exclude: Option<usize>,
}

/// An overlap window both its tiers are asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The newer tier's node, whose primary keys in the window win.
    pub node: usize,
    pub lo: NaiveDate,
    pub hi: NaiveDate,
}

impl Window {
    pub fn pred(&self, col: &str) -> String {
        range_sql(col, Some(self.lo), Some(self.hi))
    }
}

/// A stretch of dates, in the order a page reads them, and the parts holding its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Rows with a NULL date (on the oldest tier).
    pub null: bool,
    pub lo: Option<NaiveDate>,
    pub hi: Option<NaiveDate>,
    /// Indexes into [`Layout::parts`].
    pub parts: Vec<usize>,
}

impl Segment {
    pub fn pred(&self, col: &str) -> String {
        if self.null {
            format!("{col} IS NULL")
        } else {
            match (self.lo, self.hi) {
                (None, Some(h)) => format!("{col} < {}", date(h)),
                (lo, hi) => range_sql(col, lo, hi),
            }
        }
    }
}

/// Which tiers a query with these date ranges asks, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub parts: Vec<Part>,
    pub windows: Vec<Window>,
    /// Newest first (reverse them for an ascending order; NULL dates then come first).
    pub segments: Vec<Segment>,
}

impl TierRule {
    /// Checks the shape (not the dates, which depend on the day: see [`TierRule::bounds`]).
    pub fn validate(&self) -> Result<(), String> {
        if self.tiers.len() < 2 {
            return Err("a time_tier rule needs at least two tiers".into());
        }
        for (i, t) in self.tiers.iter().enumerate() {
            let last = i + 1 == self.tiers.len();
            match (&t.lower, last) {
                (None, false) => {
                    return Err(format!(
                        "tier `{}` needs `lower` (only the last tier holds everything older)",
                        t.name
                    ))
                }
                (Some(_), true) => {
                    return Err(format!(
                        "the last tier `{}` must not have `lower`: it holds everything older",
                        t.name
                    ))
                }
                _ => {}
            }
            if last && t.overlap_days > 0 {
                return Err(format!(
                    "the last tier `{}` has no bound, so `overlap_days` does not apply",
                    t.name
                ));
            }
            if self.tiers[..i].iter().any(|o| o.name == t.name) {
                return Err(format!("tier `{}` is named twice", t.name));
            }
            if self.tiers[..i].iter().any(|o| o.node == t.node) {
                return Err(format!(
                    "tier `{}` uses the node of an earlier tier: each tier is its own node",
                    t.name
                ));
            }
        }
        if self.primary_key.is_empty() && self.tiers.iter().any(|t| t.overlap_days > 0) {
            return Err(
                "overlap_days needs `primary_key`: rows in an overlap window are de-duplicated by it"
                    .into(),
            );
        }
        Ok(())
    }

    /// Each tier's lower bound on `today` (`None` for the last); bounds must fall strictly and
    /// windows must not reach the tier above's window.
    pub fn bounds(&self, today: NaiveDate) -> Result<Vec<Option<NaiveDate>>, String> {
        let b: Vec<Option<NaiveDate>> = self
            .tiers
            .iter()
            .map(|t| t.lower.as_ref().map(|l| l.at(today)))
            .collect();
        for i in 1..b.len() {
            if let (Some(upper), Some(lower)) = (b[i - 1], b[i]) {
                let ov = i64::from(self.tiers[i - 1].overlap_days);
                let floor = upper - chrono::Duration::days(ov);
                if lower >= floor {
                    return Err(format!(
                        "on {today} tier `{}` starts at {lower}, not before {floor} (tier `{}` from {upper} minus its {ov} overlap days): tier bounds must fall strictly",
                        self.tiers[i].name,
                        self.tiers[i - 1].name
                    ));
                }
            }
        }
        Ok(b)
    }

    /// The tier a row dated `key` is written to (by the nominal bounds).
    pub fn tier_of(&self, bounds: &[Option<NaiveDate>], key: &RangeKey) -> usize {
        for (i, b) in bounds.iter().enumerate() {
            match b {
                Some(d) if *key >= day_key(*d) => return i,
                Some(_) => {}
                None => return i,
            }
        }
        bounds.len().saturating_sub(1)
    }

    /// Serving range `[lo, hi)` of tier `i`.
    fn serving(&self, b: &[Option<NaiveDate>], i: usize) -> (Option<NaiveDate>, Option<NaiveDate>) {
        let lo = b[i].map(|d| d - chrono::Duration::days(i64::from(self.tiers[i].overlap_days)));
        let hi = if i == 0 { None } else { b[i - 1] };
        (lo, hi)
    }

    /// The tiers a query whose date column is limited to `q` reads, their predicates, the
    /// windows to de-duplicate, and the segments a page walks through.
    pub fn layout(&self, b: &[Option<NaiveDate>], q: &Ranges<RangeKey>, col: &str) -> Layout {
        let n = self.tiers.len();
        let mut part_of: Vec<Option<usize>> = vec![None; n];
        let mut parts = Vec::new();
        let mut windows = Vec::new();
        for (i, tier) in self.tiers.iter().enumerate() {
            let (lo, hi) = self.serving(b, i);
            let last = i + 1 == n;
            if !(overlaps(q, lo, hi) || (last && q.is_all())) {
                continue;
            }
            part_of[i] = Some(parts.len());
            parts.push(Part {
                tier: i,
                node: tier.node,
                pred: range_sql(col, lo, hi),
                exclude: None,
            });
        }
        // Windows between two tiers both asked.
        for i in 0..n.saturating_sub(1) {
            let (Some(bound), Some(_), Some(older)) = (b[i], part_of[i], part_of[i + 1]) else {
                continue;
            };
            let ov = self.tiers[i].overlap_days;
            if ov == 0 {
                continue;
            }
            let lo = bound - chrono::Duration::days(i64::from(ov));
            if !overlaps(q, Some(lo), Some(bound)) {
                continue;
            }
            parts[older].exclude = Some(windows.len());
            windows.push(Window {
                node: self.tiers[i].node,
                lo,
                hi: bound,
            });
        }
        // Segments, newest first: each tier's own stretch, then its window with the next.
        let mut segments = Vec::new();
        for i in 0..n {
            let Some(p) = part_of[i] else { continue };
            let solo_hi = if i == 0 {
                None
            } else {
                b[i - 1]
                    .map(|u| u - chrono::Duration::days(i64::from(self.tiers[i - 1].overlap_days)))
            };
            let solo_lo = b[i];
            if overlaps(q, solo_lo, solo_hi) {
                segments.push(Segment {
                    null: false,
                    lo: solo_lo,
                    hi: solo_hi,
                    parts: vec![p],
                });
            }
            if let Some(bound) = b[i] {
                let ov = self.tiers[i].overlap_days;
                if ov > 0 {
                    let lo = bound - chrono::Duration::days(i64::from(ov));
                    if overlaps(q, Some(lo), Some(bound)) {
                        let mut ps = vec![p];
                        ps.extend(part_of[i + 1]);
                        segments.push(Segment {
                            null: false,
                            lo: Some(lo),
                            hi: Some(bound),
                            parts: ps,
                        });
                    }
                }
            }
        }
        if q.is_all() {
            if let Some(p) = part_of[n - 1] {
                segments.push(Segment {
                    null: true,
                    lo: None,
                    hi: None,
                    parts: vec![p],
                });
            }
        }
        Layout {
            parts,
            windows,
            segments,
        }
    }

    /// One line per tier for `shardproxy route` and SHOW TABLE RULE.
    pub fn describe(&self, name: &dyn Fn(usize) -> String) -> String {
        self.tiers
            .iter()
            .map(|t| {
                let lower = t
                    .lower
                    .as_ref()
                    .map_or("everything older".to_string(), |l| format!("from {l}"));
                let ov = if t.overlap_days > 0 {
                    format!(" (overlap {}d)", t.overlap_days)
                } else {
                    String::new()
                };
                format!("{} {lower} -> {}{ov}", t.name, name(t.node))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What a page reads, decided from per-segment row counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagePick {
    /// Segments `first..=last` (in page order) hold the page.
    pub first: usize,
    pub last: usize,
    /// Per part to ask: (part index, offset, row count) for its `LIMIT`.
    pub reads: Vec<(usize, u64, u64)>,
    /// Rows the merge skips before the page starts.
    pub skip: u64,
}

/// Finds where rows `[offset, offset + limit)` lie, given `counts[s][j]`: the rows of
/// segment `s` (page order) on its part `segments[s].parts[j]`. `None` when the offset is past
/// every row. Whole segments before the page are skipped by predicate, not read.
pub fn pick_page(
    segments: &[Segment],
    counts: &[Vec<u64>],
    offset: u64,
    limit: u64,
) -> Option<PagePick> {
    let total = |s: usize| counts.get(s).map_or(0, |c| c.iter().sum::<u64>());
    let mut before = 0u64;
    let mut first = None;
    for s in 0..segments.len() {
        let t = total(s);
        if before + t > offset {
            first = Some(s);
            break;
        }
        before += t;
    }
    let first = first?;
    let local = offset - before;
    let end = offset.saturating_add(limit);
    let mut last = first;
    let mut through = before + total(first);
    while through < end && last + 1 < segments.len() {
        last += 1;
        through += total(last);
    }
    let mut reads: Vec<(usize, u64, u64)> = Vec::new();
    let first_parts = &segments[first].parts;
    let single = first_parts.len() == 1;
    for (s, seg) in segments.iter().enumerate().take(last + 1).skip(first) {
        for (j, &p) in seg.parts.iter().enumerate() {
            if counts.get(s).and_then(|c| c.get(j)).copied().unwrap_or(0) == 0
                || reads.iter().any(|r| r.0 == p)
            {
                continue;
            }
            let read = if s == first && single {
                (p, local, limit)
            } else if s == first {
                (p, 0, local.saturating_add(limit))
            } else {
                (p, 0, limit)
            };
            reads.push(read);
        }
    }
    Some(PagePick {
        first,
        last,
        reads,
        skip: if single { 0 } else { local },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    fn rule() -> TierRule {
        TierRule {
            column: "txn_date".into(),
            primary_key: vec!["id".into()],
            tiers: vec![
                Tier {
                    name: "hot".into(),
                    node: 0,
                    lower: Some(BoundSpec::Relative { days: 365 }),
                    overlap_days: 2,
                },
                Tier {
                    name: "warm".into(),
                    node: 1,
                    lower: Some(BoundSpec::Absolute(d("2020-01-01"))),
                    overlap_days: 1,
                },
                Tier {
                    name: "cold".into(),
                    node: 2,
                    lower: None,
                    overlap_days: 0,
                },
            ],
            poll_columns: vec![],
            poll_unique: false,
            poll_retries: 0,
            poll_retry_ms: 0,
        }
    }

    #[test]
    fn bounds_parse_and_move_with_the_day() {
        assert_eq!(
            BoundSpec::parse("now - 365d").unwrap(),
            BoundSpec::Relative { days: 365 }
        );
        assert_eq!(
            BoundSpec::parse("2020-01-01").unwrap(),
            BoundSpec::Absolute(d("2020-01-01"))
        );
        for bad in ["now+3d", "now-3", "yesterday", "2020-13-01", "now-x d"] {
            assert!(BoundSpec::parse(bad).is_err(), "{bad}");
        }
        let r = rule();
        let b = r.bounds(d("2025-06-30")).unwrap();
        assert_eq!(b, vec![Some(d("2024-06-30")), Some(d("2020-01-01")), None]);
        let b2 = r.bounds(d("2025-07-01")).unwrap();
        assert_eq!(b2[0], Some(d("2024-07-01")));
        // In 2020 the relative bound falls before the absolute one: refused.
        assert!(r.bounds(d("2020-06-01")).is_err());
    }

    #[test]
    fn rows_go_to_the_tier_of_their_date() {
        let r = rule();
        let b = r.bounds(d("2025-06-30")).unwrap();
        let k = |s: &str| RangeKey::Text(format!("{s} 00:00:00.000000"));
        assert_eq!(r.tier_of(&b, &k("2025-01-01")), 0);
        assert_eq!(r.tier_of(&b, &k("2024-06-30")), 0);
        assert_eq!(r.tier_of(&b, &k("2024-06-29")), 1);
        assert_eq!(r.tier_of(&b, &k("2020-01-01")), 1);
        assert_eq!(r.tier_of(&b, &k("2019-12-31")), 2);
    }

    #[test]
    fn layout_without_dates_reads_every_tier_and_dedups_windows() {
        let r = rule();
        let b = r.bounds(d("2025-06-30")).unwrap();
        let l = r.layout(&b, &Ranges::all(), "`txn_date`");
        assert_eq!(l.parts.len(), 3);
        assert_eq!(l.parts[0].pred, "`txn_date` >= '2024-06-28'");
        assert_eq!(
            l.parts[1].pred,
            "`txn_date` >= '2019-12-31' AND `txn_date` < '2024-06-30'"
        );
        assert_eq!(
            l.parts[2].pred,
            "(`txn_date` < '2020-01-01' OR `txn_date` IS NULL)"
        );
        assert_eq!(l.parts[1].exclude, Some(0));
        assert_eq!(l.parts[2].exclude, Some(1));
        assert_eq!(
            l.windows,
            vec![
                Window {
                    node: 0,
                    lo: d("2024-06-28"),
                    hi: d("2024-06-30")
                },
                Window {
                    node: 1,
                    lo: d("2019-12-31"),
                    hi: d("2020-01-01")
                }
            ]
        );
        type Seg = (Option<NaiveDate>, Option<NaiveDate>, Vec<usize>, bool);
        let segs: Vec<Seg> = l
            .segments
            .iter()
            .map(|s| (s.lo, s.hi, s.parts.clone(), s.null))
            .collect();
        assert_eq!(
            segs,
            vec![
                (Some(d("2024-06-30")), None, vec![0], false),
                (
                    Some(d("2024-06-28")),
                    Some(d("2024-06-30")),
                    vec![0, 1],
                    false
                ),
                (Some(d("2020-01-01")), Some(d("2024-06-28")), vec![1], false),
                (
                    Some(d("2019-12-31")),
                    Some(d("2020-01-01")),
                    vec![1, 2],
                    false
                ),
                (None, Some(d("2019-12-31")), vec![2], false),
                (None, None, vec![2], true),
            ]
        );
    }

    #[test]
    fn a_date_range_asks_only_the_tiers_it_overlaps() {
        let r = rule();
        let b = r.bounds(d("2025-06-30")).unwrap();
        let k = |s: &str| RangeKey::Text(format!("{s} 00:00:00.000000"));
        // Only hot's own stretch.
        let q = Ranges::from_bounds(Bound::Included(k("2025-01-01")), Bound::Unbounded);
        let l = r.layout(&b, &q, "`txn_date`");
        assert_eq!(l.parts.len(), 1);
        assert_eq!(l.parts[0].node, 0);
        assert!(l.windows.is_empty());
        // Inside the hot/warm window: both, de-duplicated.
        let q = Ranges::point(k("2024-06-29"));
        let l = r.layout(&b, &q, "`txn_date`");
        assert_eq!(
            l.parts.iter().map(|p| p.node).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(l.windows.len(), 1);
        // Deep in warm: warm only.
        let q = Ranges::from_bounds(
            Bound::Included(k("2021-01-01")),
            Bound::Excluded(k("2022-01-01")),
        );
        let l = r.layout(&b, &q, "`txn_date`");
        assert_eq!(l.parts.iter().map(|p| p.node).collect::<Vec<_>>(), vec![1]);
        assert!(l.segments.iter().all(|s| !s.null));
    }

    fn seg(parts: Vec<usize>) -> Segment {
        Segment {
            null: false,
            lo: None,
            hi: None,
            parts,
        }
    }

    #[test]
    fn pages_skip_whole_segments_and_span_two() {
        // hot solo 10 rows, window hot 3 + warm 2, warm solo 100.
        let segs = vec![seg(vec![0]), seg(vec![0, 1]), seg(vec![1])];
        let counts = vec![vec![10], vec![3, 2], vec![100]];
        // Page inside hot's own stretch.
        let p = pick_page(&segs, &counts, 2, 5).unwrap();
        assert_eq!((p.first, p.last, p.skip), (0, 0, 0));
        assert_eq!(p.reads, vec![(0, 2, 5)]);
        // Spans hot's stretch and the window.
        let p = pick_page(&segs, &counts, 8, 5).unwrap();
        assert_eq!((p.first, p.last, p.skip), (0, 1, 0));
        assert_eq!(p.reads, vec![(0, 8, 5), (1, 0, 5)]);
        // Starts in the window: both window parts read past the local offset, merge skips.
        let p = pick_page(&segs, &counts, 12, 5).unwrap();
        assert_eq!((p.first, p.last, p.skip), (1, 2, 2));
        assert_eq!(p.reads, vec![(0, 0, 7), (1, 0, 7)]);
        // A jump page deep in warm reads only warm, from its own offset.
        let p = pick_page(&segs, &counts, 60, 20).unwrap();
        assert_eq!((p.first, p.last, p.skip), (2, 2, 0));
        assert_eq!(p.reads, vec![(1, 45, 20)]);
        // Past the end.
        assert!(pick_page(&segs, &counts, 115, 5).is_none());
        // Empty segments are skipped.
        let counts = vec![vec![0], vec![0, 0], vec![4]];
        let p = pick_page(&segs, &counts, 0, 10).unwrap();
        assert_eq!(p.reads, vec![(1, 0, 10)]);
    }
}
