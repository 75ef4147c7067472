//! A log that mirrors a shared one (`crate::live::SharedLogs`): entries
//! appended with the seqs another replica gave them, a start at the shared
//! head, and a fresh start when the shared log's past is lost.

use std::sync::Arc;

use super::{LogEntry, LogState, SessionLog};
use crate::log::Epoch;
use crate::turn::{ToolSide, TurnEvent};

/// Entries given to [`SessionLog::mirror`] skip some this log lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the mirrored entries start after seq {expected} (the log's head + 1)")]
pub struct MirrorGap {
    pub expected: u64,
}

impl SessionLog {
    /// An empty log at `epoch` whose next entry is `head + 1`: a replica's
    /// copy of a shared log whose past it has not read. Its clients read
    /// only what the shared log holds (`publication`).
    pub fn starting_at(epoch: Epoch, head: u64) -> Arc<SessionLog> {
        let log = SessionLog::new(epoch);
        {
            let mut state = log.state.lock();
            state.head = head;
            state.published = Some(head);
        }
        log
    }

    /// Appends entries another replica appended, with their seqs: those
    /// this log has already are skipped; one that would leave a gap stops
    /// the mirror there.
    pub fn mirror(&self, entries: &[LogEntry]) -> Result<(), MirrorGap> {
        let result = {
            let mut state = self.state.lock();
            entries.iter().try_for_each(|entry| state.mirror(entry))
        };
        self.appended.notify_waiters();
        result
    }

    /// Forgets every entry and starts again at `epoch` after `head`: the
    /// shared log is of another past, or this one lost track of it. Readers
    /// of the old entries find they lagged.
    pub fn reset(&self, epoch: Epoch, head: u64) {
        {
            let mut state = self.state.lock();
            state.entries.clear();
            state.bytes = 0;
            state.turns.clear();
            state.running = None;
            state.head = head;
            state.epoch = epoch;
            state.publish_all();
            // The old epoch's readers have lagged: none is waited for.
            state.readers.clear();
        }
        self.appended.notify_waiters();
    }

    /// Gives the log `entries` (a turn read back from the shared log for a
    /// client that rejoins) when they reach further back than what it holds:
    /// ignored unless they are contiguous and reach its head, so nothing it
    /// holds is lost and every reader's next entry is still there. Whether
    /// it took them.
    pub fn backfill(&self, entries: &[LogEntry]) -> bool {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return false;
        };
        {
            let mut state = self.state.lock();
            let oldest = state.entries.front().map_or(state.head + 1, |k| k.seq);
            let contiguous = entries
                .windows(2)
                .all(|pair| pair[1].seq == pair[0].seq + 1);
            if first.seq >= oldest || last.seq < state.head || !contiguous {
                return false;
            }
            state.entries.clear();
            state.bytes = 0;
            state.turns.clear();
            state.running = None;
            state.head = first.seq - 1;
            for entry in entries {
                let _ = state.mirror(entry);
            }
            state.publish_all();
        }
        self.appended.notify_waiters();
        true
    }

    /// Whether the log holds entry `seq`.
    pub fn holds(&self, seq: u64) -> bool {
        let state = self.state.lock();
        state
            .entries
            .front()
            .is_some_and(|oldest| oldest.seq <= seq && seq <= state.head)
    }

    /// Whether the running turn asked the client for `call_id` and has not
    /// had its outcome yet.
    pub fn awaits_client_call(&self, call_id: &str) -> bool {
        let state = self.state.lock();
        let Some(turn) = state.running else {
            return false;
        };
        let mut asked = false;
        // The running turn's entries: none of them is packed.
        let events = state.entries.iter().filter(|kept| kept.turn() == turn);
        for event in events.filter_map(|kept| kept.held.event()) {
            match event {
                TurnEvent::ToolCall(call)
                    if call.id == call_id && call.side == ToolSide::Client =>
                {
                    asked = true;
                }
                TurnEvent::ToolResult { id, .. } if id == call_id => return false,
                _ => {}
            }
        }
        asked
    }
}

impl LogState {
    fn mirror(&mut self, entry: &LogEntry) -> Result<(), MirrorGap> {
        if entry.seq <= self.head {
            return Ok(());
        }
        if entry.seq != self.head + 1 {
            return Err(MirrorGap {
                expected: self.head + 1,
            });
        }
        if let TurnEvent::TurnStarted { .. } = &*entry.event {
            self.open_turn(entry.turn);
        }
        self.push_entry(entry.clone(), super::entry_bytes(&entry.event));
        // What is mirrored is what the shared log holds.
        self.publish_all();
        Ok(())
    }
}
