//! A reader of a session's log: a cursor into it, one per client (or
//! per replica publishing the log), reading on from where it is.

use std::collections::VecDeque;
use std::sync::Arc;

use super::packed::{self, Held};
use super::{
    COALESCE_BEHIND, COALESCE_MAX_BYTES, Epoch, Kept, Lagged, LogEntry, SLOW_AGE, SessionLog,
};
use crate::turn::TurnEvent;

/// A cursor into a session's log: the entries after the last one it read.
pub struct LogReader {
    pub(super) log: Arc<SessionLog>,
    /// The log's epoch when the reader was made: a log that started again
    /// since has nothing this reader can read on from.
    pub(super) epoch: Epoch,
    /// The seq of the last entry read.
    pub(super) cursor: u64,
    /// Deltas merged into others since [`LogReader::take_merged`].
    pub(super) merged: u64,
    /// Where the log keeps this reader's cursor ([`LogState::readers`]).
    pub(super) slot: usize,
    pub(super) reach: Reach,
}

/// How far a reader reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Reach {
    /// What the shared log holds, where there is one: a client's reader.
    Published,
    /// Every entry appended: what the replica publishing the log reads.
    Appended,
}

impl LogReader {
    /// The seq of the last entry read (or skipped by a merge).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Whether there is more to read now or to come: entries this reader
    /// has not read, or a turn still running.
    pub fn is_live(&self) -> bool {
        let state = self.log.state.lock();
        state.readable_head(self.reach) > self.cursor || state.running.is_some()
    }

    /// The next entry, without waiting; `Ok(None)` when there is none yet.
    /// Far behind the head ([`COALESCE_BEHIND`]), a run of text deltas of
    /// one turn comes as one delta carrying the last one's seq.
    pub fn try_next(&mut self) -> Result<Option<LogEntry>, Lagged> {
        self.read_next(COALESCE_BEHIND)
    }

    /// The next entry; a run of deltas merged when more than
    /// `coalesce_behind` entries behind the head.
    pub(super) fn read_next(&mut self, coalesce_behind: u64) -> Result<Option<LogEntry>, Lagged> {
        let mut state = self.log.state.lock();
        let oldest = state.entries.front().map_or(state.head + 1, |k| k.seq);
        if state.epoch != self.epoch {
            return Err(Lagged {
                after: self.cursor,
                oldest,
            });
        }
        let head = state.readable_head(self.reach);
        if self.cursor >= head {
            return Ok(None);
        }
        if self.cursor + 1 < oldest {
            return Err(Lagged {
                after: self.cursor,
                oldest,
            });
        }
        let start = (self.cursor + 1 - oldest) as usize;
        let entry = if head - self.cursor > coalesce_behind && state.entries[start].held.is_delta()
        {
            merge_deltas(&state.entries, start, head)
        } else {
            packed::entry_at(&state.entries, start)
        };
        state.readers[self.slot] = Some(entry.seq);
        let writer_waiting = std::mem::take(&mut state.writer_waiting);
        drop(state);
        if writer_waiting {
            self.log.read.notify_one();
        }
        // Every entry from the cursor to this one is a delta merged into it.
        self.merged += entry.seq - self.cursor - 1;
        self.cursor = entry.seq;
        Ok(Some(entry))
    }

    /// How many deltas came merged into others since the last call.
    pub fn take_merged(&mut self) -> u64 {
        std::mem::take(&mut self.merged)
    }

    /// The next entry, once there is one.
    pub async fn next(&mut self) -> Result<LogEntry, Lagged> {
        self.next_with(LogReader::try_next).await
    }

    /// The next entry `try_next` reads, once there is one.
    pub(super) async fn next_with(
        &mut self,
        try_next: fn(&mut LogReader) -> Result<Option<LogEntry>, Lagged>,
    ) -> Result<LogEntry, Lagged> {
        if let Some(entry) = try_next(self)? {
            return Ok(entry);
        }
        let log = self.log.clone();
        loop {
            let mut appended = std::pin::pin!(log.appended.notified());
            // Registered before the check, so an append between the check
            // and the wait still wakes us.
            appended.as_mut().enable();
            if let Some(entry) = try_next(self)? {
                return Ok(entry);
            }
            appended.await;
        }
    }

    /// Whether this reader is a slow consumer: its next entry is older
    /// than [`SLOW_AGE`], or gone. How far behind the head it is does not
    /// matter: a writer outruns any socket, and waits for a reader that
    /// reads ([`TurnWriter::append_paced`]).
    pub fn is_slow(&self) -> bool {
        let state = self.log.state.lock();
        if state.epoch != self.epoch {
            return true;
        }
        let oldest = state.entries.front().map_or(state.head + 1, |k| k.seq);
        let next = self.cursor + 1;
        if next > state.readable_head(self.reach) {
            // Nothing to read yet: waiting is not being slow.
            return false;
        }
        match next.checked_sub(oldest) {
            Some(index) => state
                .entries
                .get(index as usize)
                .is_some_and(|kept| state.appended_at(kept).elapsed() > SLOW_AGE),
            // Behind the tail already: it has lost entries.
            None => true,
        }
    }
}

impl Drop for LogReader {
    /// Frees the reader's slot: a writer waiting for it goes on.
    fn drop(&mut self) {
        let mut state = self.log.state.lock();
        if state.epoch == self.epoch
            && let Some(slot) = state.readers.get_mut(self.slot)
        {
            *slot = None;
        }
        let writer_waiting = std::mem::take(&mut state.writer_waiting);
        drop(state);
        if writer_waiting {
            self.log.read.notify_one();
        }
    }
}

/// The run of text deltas of one turn from `start` on, up to seq `head`,
/// as one entry with the last one's seq.
fn merge_deltas(entries: &VecDeque<Kept>, start: usize, head: u64) -> LogEntry {
    let first = &entries[start];
    // The turn's reply, which deltas held as spans read from: found once,
    // at the first of them (a running turn has none).
    let mut reply = None;
    let mut text = String::new();
    let mut last = start;
    for (index, kept) in entries.iter().enumerate().skip(start) {
        if matches!(kept.held, Held::ReplySpan { .. }) && reply.is_none() {
            reply = Some(packed::reply_of_turn(entries, index));
        }
        let Some(delta) = kept.held.delta(reply.flatten()) else {
            break;
        };
        if kept.seq > head
            || kept.turn() != first.turn()
            || (!text.is_empty() && text.len() + delta.len() > COALESCE_MAX_BYTES)
        {
            break;
        }
        text.push_str(delta);
        last = index;
    }
    if last == start {
        return packed::entry_at(entries, start);
    }
    LogEntry {
        seq: entries[last].seq,
        turn: first.turn(),
        event: Arc::new(TurnEvent::TextDelta(text)),
    }
}
