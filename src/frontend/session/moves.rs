//! A session's part in slot moves: its writes counted toward a move's target while they (or
//! their transaction) run, so a cutover waits for them (`crate::shared::Running`).

use tokio::io::{AsyncRead, AsyncWrite};

use super::Session;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Counts this session's statement toward each of `targets` (once per target), then
    /// looks at the rules again: false when they changed since `version` was planned
    /// against, and the statement must be planned again. Counted before the rules are looked
    /// at again, so a freeze or hold acknowledged after this cannot miss it, and one applied
    /// before is seen.
    pub(super) fn count_toward(&mut self, targets: &[usize], captured: bool, version: u64) -> bool {
        self.captured |= captured;
        let running: Vec<crate::shared::Running> = targets
            .iter()
            .map(|t| crate::shared::Running::new(self.shared.clone(), *t))
            .collect();
        if self.shared.topology().version != version {
            return false;
        }
        for r in running {
            if !self.dual_write.iter().any(|d| d.target() == r.target()) {
                self.dual_write.push(r);
            }
        }
        true
    }

    /// Is this session counted toward every one of `targets` already?
    pub(super) fn counted_toward(&self, targets: &[usize]) -> bool {
        targets
            .iter()
            .all(|t| self.dual_write.iter().any(|r| r.target() == *t))
    }

    /// After a statement: the counts end with it, unless its transaction goes on and holds
    /// row images (a freeze waits for its commit, whose images the target must have before
    /// it owns the slots) or wrote moving rows whose changes the source's binary log carries
    /// (the target must have its commit before it owns them).
    pub(super) fn release_moves(&mut self) {
        let tx = crate::exec::door::Door::state(&self.nodes).tx.as_ref();
        let images = tx.is_some_and(|t| t.branches.iter().any(|b| b.shadow));
        if !images && (!self.captured || tx.is_none()) {
            self.dual_write.clear();
            self.captured = false;
        }
    }
}
