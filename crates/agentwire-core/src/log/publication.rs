//! A replica's log of a shared one shows its clients only what the shared
//! log holds.
//!
//! The replica running a turn appends to its own log first and publishes
//! from it. Were its clients to read an entry before it is published, a
//! replica cut off from the shared log would go on delivering entries that
//! no other replica will ever see, and the replica that takes the session
//! over would append its own at the same seqs: one client would see two
//! different histories at one position. So a client's reader stops at the
//! last published entry; the publisher alone reads further; and when
//! publishing stops short of the turn's end, the entries it did not publish
//! are withdrawn and the turn's writer stops, so the log goes on from what
//! every replica agrees on.

use std::sync::Arc;

use super::{Kept, Lagged, LogEntry, LogReader, LogState, Reach, SessionLog};

impl SessionLog {
    /// The reader publishing this log from after `seq`: it reads entries
    /// before they are published.
    pub fn publishing_reader(self: &Arc<Self>, seq: u64) -> LogReader {
        self.reader_reaching(seq, Reach::Appended)
    }

    /// The seq of the last entry a client may read: the head, or where
    /// the log is a copy of a shared one, the last entry published.
    pub fn readable_head(&self) -> u64 {
        self.state.lock().readable_head(Reach::Published)
    }

    /// The shared log holds every entry up to `seq`: clients may read them.
    pub fn mark_published(&self, seq: u64) {
        {
            let mut state = self.state.lock();
            let head = state.head;
            if let Some(published) = &mut state.published {
                *published = seq.clamp(*published, head);
            }
        }
        self.appended.notify_waiters();
    }

    /// Publishing stopped before the shared log had every entry: those
    /// after the last one published go, and the running turn's writer
    /// appends no more. Whether a turn is still open: the shared log has
    /// its start and not its end, so the shared log will tell how it ended.
    pub fn withdraw_unpublished(&self) -> bool {
        let mut state = self.state.lock();
        let Some(published) = state.published else {
            return state.running.is_some();
        };
        state.writer_generation += 1;
        while state.head > published {
            let Some(kept) = state.entries.pop_back() else {
                break;
            };
            state.bytes -= kept.bytes();
            state.head -= 1;
        }
        state.head = published;
        while state.turns.back().is_some_and(|turn| turn.0 > published) {
            state.turns.pop_back();
        }
        state.running = state
            .entries
            .back()
            .filter(|kept| !kept.held.is_terminal())
            .map(Kept::turn);
        let open = state.running.is_some();
        drop(state);
        // A writer waiting for room goes on, to find it may append no more.
        self.read.notify_one();
        open
    }
}

impl LogState {
    /// This log is a copy of a shared one, which holds everything up to
    /// its head.
    pub(super) fn publish_all(&mut self) {
        if self.published.is_some() {
            self.published = Some(self.head);
        }
    }
}

impl LogReader {
    /// The next entry exactly as appended (never merged), without waiting:
    /// what a replica publishing the log reads.
    pub fn try_next_exact(&mut self) -> Result<Option<LogEntry>, Lagged> {
        self.read_next(u64::MAX)
    }

    /// The next exact entry, once there is one.
    pub async fn next_exact(&mut self) -> Result<LogEntry, Lagged> {
        self.next_with(LogReader::try_next_exact).await
    }
}
