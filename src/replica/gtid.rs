//! MariaDB GTIDs (`domain-server-seq`) and positions (one GTID per replication domain,
//! comma-separated: `@@gtid_binlog_pos`, `Gtid_Slave_Pos`), and the one question asked of
//! them: has a server applied a transaction? Within a domain, sequence numbers only grow,
//! so a position holding a domain's sequence `n` holds every transaction of that domain up
//! to `n`.

use std::fmt;

/// One transaction's GTID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gtid {
    pub domain: u32,
    pub server: u32,
    pub seq: u64,
}

impl Gtid {
    /// `0-1-42`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Gtid> {
        let mut parts = s.trim().splitn(3, '-');
        let domain = parts.next()?.parse().ok()?;
        let server = parts.next()?.parse().ok()?;
        let seq = parts.next()?.parse().ok()?;
        Some(Gtid {
            domain,
            server,
            seq,
        })
    }
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server, self.seq)
    }
}

/// A server's position: the last GTID of each domain it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Position(Vec<Gtid>);

impl Position {
    /// `0-1-42,1-2-7` (empty: nothing yet); `None` when a part is no GTID.
    pub fn parse(s: &str) -> Option<Position> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            out.push(Gtid::parse(part)?);
        }
        Some(Position(out))
    }

    /// Holds the transaction `g` (and so every earlier one of its domain). At `g`'s own
    /// sequence number only `g` itself counts: another server's transaction of that number
    /// is another history (a server replicating some other primary).
    pub fn covers(&self, g: &Gtid) -> bool {
        self.0.iter().any(|h| {
            h.domain == g.domain && (h.seq > g.seq || (h.seq == g.seq && h.server == g.server))
        })
    }

    /// Holds every transaction `other` holds.
    pub fn covers_all(&self, other: &Position) -> bool {
        other.0.iter().all(|g| self.covers(g))
    }

    pub fn gtids(&self) -> &[Gtid] {
        &self.0
    }

    /// Takes in `g`: its domain's sequence is `g`'s when that is later.
    pub fn add(&mut self, g: Gtid) {
        match self.0.iter_mut().find(|h| h.domain == g.domain) {
            Some(h) if h.seq < g.seq => *h = g,
            Some(_) => {}
            None => self.0.push(g),
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, g) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{g}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_covers_what_its_domains_reached() {
        let p = Position::parse("0-1-42, 1-2-7").expect("a position");
        assert!(p.covers(&Gtid::parse("0-1-42").expect("gtid")));
        assert!(p.covers(&Gtid::parse("0-3-40").expect("gtid")));
        assert!(!p.covers(&Gtid::parse("0-1-43").expect("gtid")));
        assert!(!p.covers(&Gtid::parse("2-1-1").expect("gtid")));
        // The same number from another server: not this history's transaction.
        assert!(!p.covers(&Gtid::parse("0-2-42").expect("gtid")));
        assert!(!p.covers_all(&Position::parse("0-2-42,1-2-7").expect("pos")));
        assert!(p.covers_all(&Position::parse("0-1-41,1-2-7").expect("pos")));
        assert!(!p.covers_all(&Position::parse("0-1-41,1-2-8").expect("pos")));
        assert!(p.covers_all(&Position::parse("").expect("empty")));
        assert_eq!(Position::parse("0-1"), None);
        assert_eq!(Gtid::parse("0-1-x"), None);
        let mut q = Position::default();
        q.add(Gtid::parse("0-1-5").expect("gtid"));
        q.add(Gtid::parse("0-1-3").expect("gtid"));
        q.add(Gtid::parse("1-1-1").expect("gtid"));
        assert_eq!(q.to_string(), "0-1-5,1-1-1");
    }
}
