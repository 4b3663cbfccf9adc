//! The admin language's answers and the words its statements share: what a statement
//! answers, its errors, and slot ranges (`SLOTS a-b`).

use crate::error::MyError;
use crate::routing::slot::SLOTS;

/// What an admin statement answers.
#[derive(Debug, PartialEq)]
pub enum Answer {
    Rows {
        columns: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    Done(String),
}

pub(crate) fn headers(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

pub(crate) fn unsupported(m: impl Into<String>) -> MyError {
    MyError::new(1235, m.into())
}

pub(crate) fn slot_range_from(text: &str) -> Option<String> {
    slot_range_before(text, "NODE")
}

/// The slot range between `SLOTS` and the word `until` (`MIGRATE SLOTS a-b OF ...`).
pub(crate) fn slot_range_before(text: &str, until: &str) -> Option<String> {
    let up = text.to_ascii_uppercase();
    let at = up.find("SLOTS")? + 5;
    let end = up[at..].find(&format!(" {until} "))? + at;
    Some(text[at..end].split_whitespace().collect::<String>())
}

pub(crate) fn parse_range(r: &str) -> Option<(usize, usize)> {
    let (a, b) = crate::routing::parse_run(r)?;
    (a <= b && b < SLOTS).then_some((a, b))
}
