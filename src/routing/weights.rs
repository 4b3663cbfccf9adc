//! A collation's weights, read from a node, so the proxy can tell which strings the
//! collation holds equal: `'Bob@X.org'`, `'bob@x.org'` and `'bob@x.org  '` are one value in
//! `utf8mb4_general_ci`, and a global index must place them on one node and hold them once.
//!
//! For each character of the Basic Multilingual Plane the node's `WEIGHT_STRING` of it
//! followed by an `x` is read once (one query over MariaDB's `seq_0_to_65535`), less the
//! weight of the `x` (a PAD SPACE collation drops trailing spaces from a weight string, so a
//! space alone would weigh nothing); a string's key is its
//! characters' weights one after another, without the trailing ones that weigh as a space
//! (PAD SPACE collations ignore them). That key equals the node's own `WEIGHT_STRING` of the
//! string exactly when the collation weighs each character on its own (no contractions, as
//! Czech `ch`): [`Weights::check`] compares the two on strings that would show it, and a
//! collation that fails is not used. Characters past U+FFFF must all weigh as U+FFFD, as in
//! MariaDB's `_general_ci` and `_unicode_ci` collations (checked too).

use std::collections::HashMap;

/// Strings whose weight, in a collation with contractions or expansions that depend on
/// neighbours, differs from their characters' weights one after another.
pub const SAMPLES: [&str; 24] = [
    "ch",
    "CH",
    "ll",
    "LL",
    "dz",
    "dzs",
    "cs",
    "gy",
    "ly",
    "ny",
    "sz",
    "ty",
    "zs",
    "aa",
    "ae",
    "oe",
    "ss",
    "lj",
    "nj",
    "rr",
    "ij",
    "ä",
    "a\u{0308}",
    "ab c",
];

/// Code points past the BMP probed to weigh as U+FFFD.
pub const SUPPLEMENTARY: [u32; 4] = [0x1_0000, 0x1_F600, 0x2_0000, 0x10_FFFD];

/// One collation's weights (see the module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weights {
    pub collation: String,
    /// By BMP code point; empty for a character the collation ignores.
    bmp: Vec<Box<[u8]>>,
    /// Of every character past the BMP.
    supplementary: Box<[u8]>,
    /// Of a space; trailing characters of this weight are dropped (PAD SPACE).
    space: Box<[u8]>,
    pad: bool,
}

impl Weights {
    /// From the node's answer: `(code point, weight of it and an x)` for every BMP code
    /// point it could weigh (a surrogate has none: it is no character), and the weight of
    /// `x` alone.
    pub fn new(collation: &str, rows: Vec<(u32, Vec<u8>)>, x: &[u8]) -> Result<Weights, String> {
        let mut bmp: Vec<Box<[u8]>> = vec![Box::from([]); 0x1_0000];
        let mut seen = 0;
        for (cp, w) in rows {
            let Some(w) = w.strip_suffix(x) else {
                return Err(format!(
                    "{collation}: U+{cp:04X} and an x weigh otherwise than the two apart"
                ));
            };
            if let Some(slot) = bmp.get_mut(cp as usize) {
                *slot = Box::from(w);
                seen += 1;
            }
        }
        if seen < 0xF000 {
            return Err(format!(
                "{collation}: only {seen} of the 65,536 characters of the BMP were weighed"
            ));
        }
        let space = bmp[0x20].clone();
        let supplementary = bmp[0xFFFD].clone();
        if space.is_empty() {
            return Err(format!("{collation}: a space has no weight"));
        }
        Ok(Weights {
            collation: collation.to_string(),
            bmp,
            supplementary,
            space,
            pad: !collation.to_ascii_lowercase().contains("_nopad_"),
        })
    }

    /// The key of `s`: equal for strings the collation holds equal, and only for those.
    pub fn key(&self, s: &str) -> Vec<u8> {
        self.parts(s, self.pad).concat()
    }

    /// The weights of `s`'s characters one after another, trailing spaces and all.
    fn key_unpadded(&self, s: &str) -> Vec<u8> {
        self.parts(s, false).concat()
    }

    fn parts(&self, s: &str, pad: bool) -> Vec<&[u8]> {
        let mut parts: Vec<&[u8]> = s
            .chars()
            .map(|c| match self.bmp.get(c as usize) {
                Some(w) => &w[..],
                None => &self.supplementary[..],
            })
            .filter(|w| !w.is_empty())
            .collect();
        if pad {
            while parts.last().is_some_and(|w| *w == &self.space[..]) {
                parts.pop();
            }
        }
        parts
    }

    /// Whether the node's own weights of [`SAMPLES`] and of characters past the BMP, each
    /// followed by an `x` (`node`: string -> the `WEIGHT_STRING` of it and an x), agree with
    /// [`Weights::key`]; why not.
    pub fn check(&self, node: &HashMap<String, Vec<u8>>, x: &[u8]) -> Result<(), String> {
        let ours = |s: &str| {
            let mut k = self.key_unpadded(s);
            k.extend_from_slice(x);
            k
        };
        for s in SAMPLES {
            let Some(w) = node.get(s) else {
                return Err(format!("{}: no weight of '{s}' was read", self.collation));
            };
            if *w != ours(s) {
                return Err(format!(
                    "{} weighs '{s}' otherwise than its characters one by one (a contraction or expansion): the proxy cannot tell its equal strings apart",
                    self.collation
                ));
            }
        }
        for cp in SUPPLEMENTARY {
            let s = char::from_u32(cp).map(String::from).unwrap_or_default();
            if node.get(&s) != Some(&ours(&s)) {
                return Err(format!(
                    "{} weighs characters past U+FFFF apart: the proxy reads weights of the BMP only",
                    self.collation
                ));
            }
        }
        Ok(())
    }
}

/// The weights of `collation` from the answers of [`probe_sql`] (`(code point, weight)`
/// rows) and [`check_sql`] (its one row), checked: `Err` says why the proxy cannot use them.
pub fn from_answers(
    collation: &str,
    probe: Vec<(u32, Vec<u8>)>,
    check: Vec<Vec<u8>>,
) -> Result<Weights, String> {
    let mut check = check.into_iter();
    let Some(x) = check.next() else {
        return Err(format!("{collation}: the weights to check were not read"));
    };
    let w = Weights::new(collation, probe, &x)?;
    let node: HashMap<String, Vec<u8>> = checked_strings().into_iter().zip(check).collect();
    w.check(&node, &x)?;
    Ok(w)
}

/// The character set of a collation (its name's first part: `utf8mb4_general_ci`).
pub fn charset_of(collation: &str) -> &str {
    collation.split('_').next().unwrap_or(collation)
}

/// The node query that weighs every BMP character in `collation` of `charset`.
pub fn probe_sql(charset: &str, collation: &str) -> String {
    format!(
        "SELECT seq, WEIGHT_STRING(CONCAT(CONVERT(CHAR(seq USING utf32) USING {charset}), 'x') COLLATE {collation}) \
         FROM seq_0_to_65535 WHERE seq NOT BETWEEN 55296 AND 57343"
    )
}

/// The node query that weighs `x`, then the [`SAMPLES`] and [`SUPPLEMENTARY`] characters
/// each followed by an `x`: one row, a column each, in that order.
pub fn check_sql(charset: &str, collation: &str) -> String {
    let mut cols: Vec<String> = vec![format!(
        "WEIGHT_STRING(CONVERT('x' USING {charset}) COLLATE {collation})"
    )];
    for s in SAMPLES {
        let mut lit = String::new();
        crate::sql::write::string(&mut lit, s.as_bytes(), "utf8mb4");
        cols.push(format!(
            "WEIGHT_STRING(CONCAT(CONVERT({lit} USING {charset}), 'x') COLLATE {collation})"
        ));
    }
    for cp in SUPPLEMENTARY {
        cols.push(format!(
            "WEIGHT_STRING(CONCAT(CONVERT(CHAR({cp} USING utf32) USING {charset}), 'x') COLLATE {collation})"
        ));
    }
    format!("SELECT {}", cols.join(", "))
}

/// The strings [`check_sql`] weighs after its first column, in its columns' order.
pub fn checked_strings() -> Vec<String> {
    SAMPLES
        .iter()
        .map(|s| s.to_string())
        .chain(
            SUPPLEMENTARY
                .iter()
                .map(|cp| char::from_u32(*cp).map(String::from).unwrap_or_default()),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: &[u8] = &[0, 0x58];

    /// A collation like general_ci over ASCII and Latin-1: letters by their upper case,
    /// accented a's as `A`.
    fn folding() -> Weights {
        let mut rows = Vec::new();
        for cp in 0u32..0x1_0000 {
            if (0xD800..0xE000).contains(&cp) {
                continue;
            }
            let c = char::from_u32(cp).unwrap();
            let folded = match c {
                'à'..='å' | 'À'..='Å' => 'A',
                c => c.to_ascii_uppercase(),
            };
            let mut w = (folded as u32 as u16).to_be_bytes().to_vec();
            w.extend_from_slice(X);
            rows.push((cp, w));
        }
        Weights::new("utf8mb4_general_ci", rows, X).unwrap()
    }

    #[test]
    fn equal_strings_have_one_key_and_trailing_spaces_do_not_count() {
        let w = folding();
        assert_eq!(w.key("Bob@X.org"), w.key("bob@x.org"));
        assert_eq!(w.key("bob@x.org   "), w.key("bob@x.org"));
        assert_eq!(w.key("äb"), w.key("AB"));
        assert_ne!(w.key("bob@x.org"), w.key("bob@x.orh"));
        assert_ne!(w.key(" a"), w.key("a"), "leading spaces count");
        // Past the BMP: all as U+FFFD.
        assert_eq!(w.key("\u{1F600}"), w.key("\u{FFFD}"));
        let nopad = Weights {
            pad: false,
            ..w.clone()
        };
        assert_ne!(nopad.key("a "), nopad.key("a"));
    }

    #[test]
    fn a_collation_whose_strings_weigh_otherwise_than_their_characters_is_refused() {
        let w = folding();
        let agreeing = || -> HashMap<String, Vec<u8>> {
            checked_strings()
                .into_iter()
                .map(|s| {
                    let mut k = w.key_unpadded(&s);
                    k.extend_from_slice(X);
                    (s, k)
                })
                .collect()
        };
        let mut node = agreeing();
        assert_eq!(w.check(&node, X), Ok(()));
        node.insert("ch".into(), vec![0x0F, 0x01, 0, 0x58]);
        assert!(w.check(&node, X).unwrap_err().contains("'ch'"));
        let mut node = agreeing();
        node.insert("\u{20000}".into(), vec![0xFB, 0x40, 0xC0, 0x00, 0, 0x58]);
        assert!(w.check(&node, X).unwrap_err().contains("U+FFFF"));
    }

    #[test]
    fn too_few_weights_are_refused() {
        assert!(Weights::new("x", vec![(0x20, vec![0, 0x20, 0, 0x58])], X).is_err());
        assert!(
            Weights::new("x", vec![(0x20, vec![0, 0x20])], X).is_err(),
            "no x"
        );
    }
}
