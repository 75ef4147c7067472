//! A session's turn log: every event of its turns, numbered, for any number
//! of readers.
//!
//! A turn never writes to a socket. It appends to its session's log, and a
//! connection following the session is a [`LogReader`], a cursor into the
//! log. So the producer does not wait for a consumer short of the log's
//! bound (and then at most [`SLOW_AGE`], below): a slow or vanished socket
//! does not slow the turn, two sockets can follow one session, and a reader
//! that fell behind is served from where it is, not from a queue of its own
//! (issue #13; `resumable-turns.md`).
//!
//! Positions are `(epoch, seq)`. `seq` counts a session's entries from 1
//! without gaps, whatever the turn. The [`Epoch`] is minted with the log and
//! stands for its past: this log lives in memory with its live session, so a
//! session that leaves memory (or a restart) starts a new epoch, and a
//! position of an old epoch says nothing about the new one.
//!
//! Each turn is a [`TurnEvent::TurnStarted`] entry (its seq is the turn's
//! [`TurnId`]), its events, and exactly one terminal entry (`Completed` or
//! `Failed`): a [`TurnWriter`] dropped before it wrote one writes `Failed`,
//! and nothing is appended to a turn after its terminal.
//!
//! Bounds, per session: the running turn and the [`KEPT_TURNS`] before it,
//! at most [`MAX_ENTRIES`] entries and [`MAX_BYTES`] of payload (the oldest
//! go first, the running turn's too), and when a turn starts the finished
//! ones keep at most [`FINISHED_MAX_BYTES`]. A reader the tail overtakes has lost
//! entries and is told so ([`Lagged`]); a reader whose next entry is older
//! than [`SLOW_AGE`] is a slow consumer ([`LogReader::is_slow`]) and is
//! closed by its connection. Lag therefore costs the log's bound, never
//! more memory.
//!
//! A turn's handler appends through [`TurnWriter::append_paced`]: at the
//! log's bound, it waits rather than drop an entry a reader is about to
//! read, for as long as that entry is younger than [`SLOW_AGE`]. So a
//! reader that keeps reading is never overtaken, however fast the turn
//! writes (it reads a long run of deltas merged, [`COALESCE_BEHIND`]), and
//! one that stops holds the turn back at most [`SLOW_AGE`] before it is the
//! slow consumer that loses the entry.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::content::ContentPart;
use crate::turn::{ToolOutcome, TurnEvent, TurnFailure};

/// Entries a session's log holds at most.
pub const MAX_ENTRIES: usize = 2_000;
/// Payload bytes (text, arguments, media) a session's log holds at most:
/// room for a turn's media to reach a reader that is still catching up.
pub const MAX_BYTES: usize = 8 * 1024 * 1024;
/// What the finished turns may keep once the next turn starts.
pub const FINISHED_MAX_BYTES: usize = 1024 * 1024;
/// Finished turns kept besides the running one.
pub const KEPT_TURNS: usize = 2;
/// A reader this many entries behind the head has consecutive text deltas
/// merged into one entry as it reads them; below it every delta is read as
/// it was appended.
pub const COALESCE_BEHIND: u64 = 256;
/// The most text one merged delta carries.
const COALESCE_MAX_BYTES: usize = 64 * 1024;
/// A reader whose next entry is older than this is a slow consumer.
pub const SLOW_AGE: Duration = Duration::from_secs(10);
/// What an entry costs besides its payload, for [`MAX_BYTES`].
const ENTRY_OVERHEAD: usize = 64;
/// Places kept free for the running turn's entries when it starts: a
/// 20-chunk turn's 22 fit without growing the log.
const RUNNING_TURN_ROOM: usize = 32;

/// Which past a log position belongs to: minted with the log, so it
/// changes whenever the log's past may be lost.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Epoch(pub u64);

impl fmt::Display for Epoch {
    /// Sixteen lowercase hex digits: how positions travel on the wire.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A turn of a session: the seq of its `TurnStarted` entry.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct TurnId(pub u64);

/// One entry of the log. Cheap to clone: readers share the event.
#[derive(Clone, Debug, PartialEq)]
pub struct LogEntry {
    pub seq: u64,
    pub turn: TurnId,
    pub event: Arc<TurnEvent>,
}

/// The entries after a reader's cursor are no longer in the log: the reader
/// fell behind its tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the log no longer holds the entries after seq {after} (its oldest is {oldest})")]
pub struct Lagged {
    pub after: u64,
    pub oldest: u64,
}

/// A session's log. Shared by its turn's writer and its readers.
pub struct SessionLog {
    state: Mutex<LogState>,
    /// Woken on every append.
    appended: Notify,
    /// Woken when a reader reads (or goes) while the turn's writer waits
    /// for room ([`LogState::writer_waiting`]). One permit: the log has one
    /// writer at a time, and a read just before it waits is not lost.
    read: Notify,
}

struct LogState {
    /// Changes only when a mirror starts again ([`SessionLog::reset`]).
    epoch: Epoch,
    entries: VecDeque<Kept>,
    /// The seq of the latest entry; 0 before the first.
    head: u64,
    /// Payload bytes of `entries`, as [`payload_bytes`] counts them.
    bytes: usize,
    /// The turns with entries kept, oldest first.
    turns: VecDeque<TurnId>,
    /// The turn started and not yet ended.
    running: Option<TurnId>,
    /// The cursor of each reader of this epoch, by its slot; `None`: a free
    /// slot. What a paced writer must not overtake.
    readers: Vec<Option<u64>>,
    /// A paced writer waits for a reader to read.
    writer_waiting: bool,
    /// Where this log is a replica's copy of a shared one: the seq of the
    /// last entry the shared log is known to hold, as far as clients read
    /// (`publication`). `None`: this log is the only one, and an entry is
    /// read as soon as it is appended.
    published: Option<u64>,
    /// Stamped on each [`TurnWriter`]; raised when a turn's unpublished
    /// entries are withdrawn, so that turn's writer appends no more.
    writer_generation: u64,
    /// What entries' append times count from.
    origin: Instant,
}

/// An entry as the log holds it: 40 bytes besides its event, since a
/// session keeps its last turns' entries for as long as it is live.
struct Kept {
    seq: u64,
    /// The event, or where a finished turn's text delta reads its text.
    held: Held,
    /// When it was appended: milliseconds after the log's
    /// [`LogState::origin`].
    appended_ms: u64,
    /// How far before this entry its turn's `TurnStarted` is.
    turn_offset: u32,
    /// What it counts against [`MAX_BYTES`].
    bytes: u32,
}

// A session keeps up to about 128 places of these (three 20-chunk turns),
// so every byte here is 128 bytes of an active session.
const _: () = assert!(size_of::<Kept>() <= 40);

impl Kept {
    fn turn(&self) -> TurnId {
        TurnId(self.seq - u64::from(self.turn_offset))
    }

    fn bytes(&self) -> usize {
        self.bytes as usize
    }
}

impl SessionLog {
    pub fn new(epoch: Epoch) -> Arc<SessionLog> {
        Arc::new(SessionLog {
            state: Mutex::new(LogState {
                epoch,
                entries: VecDeque::new(),
                head: 0,
                bytes: 0,
                turns: VecDeque::new(),
                running: None,
                readers: Vec::new(),
                writer_waiting: false,
                published: None,
                writer_generation: 0,
                origin: Instant::now(),
            }),
            appended: Notify::new(),
            read: Notify::new(),
        })
    }

    pub fn epoch(&self) -> Epoch {
        self.state.lock().epoch
    }

    /// The seq of the latest entry; 0 while the log is empty.
    pub fn head(&self) -> u64 {
        self.state.lock().head
    }

    /// How many entries, and payload bytes, the log holds now.
    pub fn held(&self) -> (usize, usize) {
        let state = self.state.lock();
        (state.entries.len(), state.bytes)
    }

    /// The turn that has started and not ended, if any.
    pub fn running(&self) -> Option<TurnId> {
        self.state.lock().running
    }

    /// Starts a turn answering the stored message `question` (when it
    /// answers one): appends its `TurnStarted`. One turn runs per session
    /// (the engine's rule); a turn still open (mirrored from a replica that
    /// died) is ended `Failed` first, so every turn keeps exactly one
    /// terminal.
    pub fn start_turn(self: &Arc<Self>, agent: &str, question: Option<u64>) -> TurnWriter {
        let mut state = self.state.lock();
        if let Some(open) = state.running {
            state.push(
                open,
                TurnEvent::Failed(TurnFailure::new(
                    crate::error::ErrorCode::Internal,
                    crate::turn::TURN_INTERRUPTED,
                )),
            );
        }
        let turn = TurnId(state.head + 1);
        state.open_turn(turn);
        state.push(
            turn,
            TurnEvent::TurnStarted {
                agent: agent.to_owned(),
                question,
            },
        );
        let generation = state.writer_generation;
        drop(state);
        self.appended.notify_waiters();
        TurnWriter {
            log: self.clone(),
            turn,
            generation,
        }
    }

    /// Holds the log as compactly as a quiet session allows: the last
    /// finished turn's deltas as spans of its reply (as a turn's start
    /// does for the turn before), and no spare places. For a session gone
    /// quiet, whose readers have read its turns; nothing while a turn
    /// runs.
    pub fn settle(&self) {
        let mut state = self.state.lock();
        if state.running.is_some() {
            return;
        }
        if let Some(&finished) = state.turns.back() {
            packed::pack_turn(&mut state.entries, finished);
        }
        state.entries.shrink_to_fit();
    }

    /// The store seq of the question `turn` answers, while the log still
    /// holds the turn's `TurnStarted` and it names one.
    pub fn question_of(&self, turn: TurnId) -> Option<u64> {
        let state = self.state.lock();
        let oldest = state.entries.front()?.seq;
        let kept = state.entries.get(turn.0.checked_sub(oldest)? as usize)?;
        match kept.held.event() {
            Some(TurnEvent::TurnStarted { question, .. }) if kept.seq == turn.0 => *question,
            _ => None,
        }
    }

    /// A client's reader of the entries after `seq` (0: from the oldest
    /// kept).
    pub fn reader_after(self: &Arc<Self>, seq: u64) -> LogReader {
        self.reader_reaching(seq, Reach::Published)
    }

    fn reader_reaching(self: &Arc<Self>, seq: u64, reach: Reach) -> LogReader {
        let mut state = self.state.lock();
        let slot = state.follow(seq);
        LogReader {
            epoch: state.epoch,
            log: self.clone(),
            cursor: seq,
            merged: 0,
            slot,
            reach,
        }
    }

    /// A reader for a client that had read up to `after` and comes back:
    /// from the start of the turn that holds entry `after` (from `after`
    /// itself when that was a turn's terminal), so a dialect rebuilds its
    /// per-turn state from the `TurnStarted` on and sends only what comes
    /// after `after`. `None` when the log no longer holds that start, or
    /// `after` is past the head (a position this log never gave).
    pub fn rejoin_reader(self: &Arc<Self>, after: u64) -> Option<LogReader> {
        let state = self.state.lock();
        if after > state.readable_head(Reach::Published) {
            return None;
        }
        let oldest = state.entries.front().map_or(state.head + 1, |k| k.seq);
        let start = match after.checked_sub(oldest) {
            Some(index) => {
                let last_read = &state.entries[index as usize];
                match last_read.held.is_terminal() {
                    true => after + 1,
                    false if last_read.turn().0 >= oldest => last_read.turn().0,
                    false => return None,
                }
            }
            // Nothing of the log read yet: fine if nothing is lost before
            // its oldest entry, which then starts a turn.
            None if after + 1 == oldest => after + 1,
            None => return None,
        };
        drop(state);
        Some(self.reader_after(start - 1))
    }

    /// Appends `event` to `turn` if it is still running and `writer`'s
    /// entries are not withdrawn; returns its seq.
    fn append(&self, writer: &TurnWriter, event: TurnEvent) -> Option<u64> {
        let turn = writer.turn;
        let seq = {
            let mut state = self.state.lock();
            if !state.takes_from(writer) {
                return None;
            }
            state.push(turn, event)
        };
        self.appended.notify_waiters();
        Some(seq)
    }
}

impl LogState {
    /// Whether `writer` may still append: its turn runs, and its entries
    /// were not withdrawn.
    fn takes_from(&self, writer: &TurnWriter) -> bool {
        self.running == Some(writer.turn) && self.writer_generation == writer.generation
    }

    /// The last entry a reader reaching `reach` may read.
    fn readable_head(&self, reach: Reach) -> u64 {
        match (reach, self.published) {
            (Reach::Published, Some(published)) => published.min(self.head),
            _ => self.head,
        }
    }

    /// A slot for a reader whose cursor is `seq`.
    fn follow(&mut self, seq: u64) -> usize {
        match self.readers.iter().position(Option::is_none) {
            Some(free) => {
                self.readers[free] = Some(seq);
                free
            }
            None => {
                self.readers.push(Some(seq));
                self.readers.len() - 1
            }
        }
    }

    /// When appending an entry of `bytes` would drop one a reader reads
    /// next (it has read up to the entry before) and the oldest such entry
    /// is younger than [`SLOW_AGE`]: the instant it ages out. Readers
    /// behind the tail already have lagged and are not waited for.
    fn overtakes_reader(&self, bytes: usize) -> Option<Instant> {
        let oldest = self.entries.front()?;
        let (mut entries, mut held) = (self.entries.len() + 1, self.bytes + bytes);
        let mut dropped = self.entries.iter();
        let mut last_dropped = None;
        while entries > MAX_ENTRIES || held > MAX_BYTES {
            let Some(kept) = dropped.next() else { break };
            (entries, held) = (entries - 1, held - kept.bytes());
            last_dropped = Some(kept.seq);
        }
        let last_dropped = last_dropped?;
        let first_dropped = oldest.seq;
        let next_of_reader = |cursor: &u64| (first_dropped..=last_dropped).contains(&(cursor + 1));
        let ages_out = self.appended_at(oldest) + SLOW_AGE;
        (self.readers.iter().flatten().any(next_of_reader) && Instant::now() < ages_out)
            .then_some(ages_out)
    }

    /// Makes `turn` the running one, dropping what the bounds on finished
    /// turns no longer keep.
    fn open_turn(&mut self, turn: TurnId) {
        // Every reader has had its turn's end by now, or is a slow one.
        while self.bytes > FINISHED_MAX_BYTES && !self.entries.is_empty() {
            self.pop_oldest();
        }
        // The turn before has ended: its deltas can give up their copies.
        if let Some(&finished) = self.turns.back() {
            packed::pack_turn(&mut self.entries, finished);
        }
        self.turns.push_back(turn);
        while self.turns.len() > KEPT_TURNS + 1 {
            if let Some(oldest) = self.turns.pop_front() {
                self.drop_turn(oldest);
            }
        }
        // Growth doubles the places, and a live session keeps them: give
        // back what the kept turns and the new one's room do not use.
        self.entries
            .shrink_to(self.entries.len() + RUNNING_TURN_ROOM);
        self.running = Some(turn);
    }

    fn push(&mut self, turn: TurnId, event: TurnEvent) -> u64 {
        let bytes = entry_bytes(&event);
        self.push_sized(turn, event, bytes)
    }

    /// [`LogState::push`] of an event whose [`entry_bytes`] are known.
    fn push_sized(&mut self, turn: TurnId, event: TurnEvent, bytes: usize) -> u64 {
        let entry = LogEntry {
            seq: self.head + 1,
            turn,
            event: Arc::new(event),
        };
        self.push_entry(entry, bytes)
    }

    /// Appends `entry`, whose seq is the head + 1 and which counts `bytes`
    /// against [`MAX_BYTES`].
    fn push_entry(&mut self, entry: LogEntry, bytes: usize) -> u64 {
        debug_assert_eq!(entry.seq, self.head + 1);
        if entry.event.is_terminal() {
            self.running = None;
        }
        self.head = entry.seq;
        // A frame is at most `max_payload_bytes`, far below 4 GiB.
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        self.bytes += bytes as usize;
        // Rounded up: an entry is never judged older than it is.
        let appended_ms = self.origin.elapsed().as_nanos().div_ceil(1_000_000);
        self.entries.push_back(Kept {
            seq: entry.seq,
            held: Held::Event(entry.event),
            appended_ms: u64::try_from(appended_ms).unwrap_or(u64::MAX),
            // A turn of more than 4 billion entries reads as a later one's.
            turn_offset: u32::try_from(entry.seq.saturating_sub(entry.turn.0)).unwrap_or(u32::MAX),
            bytes,
        });
        // The newest entry stays whatever its size: a reader must be able
        // to see a turn's terminal.
        while self.entries.len() > 1 && (self.entries.len() > MAX_ENTRIES || self.bytes > MAX_BYTES)
        {
            self.pop_oldest();
        }
        self.head
    }

    fn drop_turn(&mut self, turn: TurnId) {
        while self.entries.front().is_some_and(|k| k.turn() <= turn) {
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        if let Some(kept) = self.entries.pop_front() {
            self.bytes -= kept.bytes();
        }
    }

    fn appended_at(&self, kept: &Kept) -> Instant {
        self.origin + Duration::from_millis(kept.appended_ms)
    }
}

/// What an entry of `event` counts against [`MAX_BYTES`].
fn entry_bytes(event: &TurnEvent) -> usize {
    payload_bytes(event) + ENTRY_OVERHEAD
}

/// What an event holds that the log must keep, roughly, in bytes: enough
/// to bound a session's log, without serialising anything.
fn payload_bytes(event: &TurnEvent) -> usize {
    match event {
        TurnEvent::TextDelta(text) => text.len(),
        TurnEvent::ToolCall(call) => {
            call.name.len()
                + value_bytes(&call.arguments)
                + call.consent_message.as_ref().map_or(0, String::len)
        }
        TurnEvent::ToolResult { id, outcome, .. } => {
            id.len()
                + match outcome {
                    ToolOutcome::Ok(value) => value_bytes(value),
                    ToolOutcome::Error(text) | ToolOutcome::Denied(text) => text.len(),
                }
        }
        TurnEvent::Media(chunk) => chunk.data.len() + chunk.media_id.len(),
        TurnEvent::Completed(reply) | TurnEvent::Cancelled(reply) => {
            reply.text.len() + reply.parts.iter().map(part_bytes).sum::<usize>()
        }
        TurnEvent::Failed(failure) => failure.message.len(),
        TurnEvent::TurnStarted { agent, .. } | TurnEvent::AgentSwitched { name: agent, .. } => {
            agent.len()
        }
        TurnEvent::Interrupt | TurnEvent::AudioFormat(_) => 0,
    }
}

fn part_bytes(part: &ContentPart) -> usize {
    let text = part.text.as_ref().map_or(0, String::len);
    let media = part.media.as_ref().map_or(0, |m| {
        [&m.data, &m.url, &m.storage_ref, &m.filename]
            .into_iter()
            .map(|field| field.as_ref().map_or(0, String::len))
            .sum::<usize>()
            + m.mime_type.len()
    });
    ENTRY_OVERHEAD + text + media
}

fn value_bytes(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(value_bytes).sum::<usize>() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + 3 + value_bytes(v))
                .sum::<usize>()
                + 2
        }
    }
}

/// The only way to append to a turn: held by the turn's event sinks.
/// Dropped without a terminal (its task aborted), it ends the turn
/// `Failed`, so readers never wait for a turn that is gone.
pub struct TurnWriter {
    log: Arc<SessionLog>,
    turn: TurnId,
    /// The log's writer generation when the turn started.
    generation: u64,
}

impl TurnWriter {
    pub fn turn(&self) -> TurnId {
        self.turn
    }

    pub fn log(&self) -> &Arc<SessionLog> {
        &self.log
    }

    /// Appends a non-terminal event at once, overtaking any reader it must
    /// to stay within the bounds; ignored once the turn has ended.
    pub fn append(&self, event: TurnEvent) {
        debug_assert!(!event.is_terminal(), "terminals go through finish");
        self.log.append(self, event);
    }

    /// Appends a non-terminal event as [`TurnWriter::append`] does, but
    /// first waits while it would drop an entry a reader is about to read,
    /// until that reader reads it or the entry ages past [`SLOW_AGE`] (its
    /// reader is a slow consumer then). What a turn's handler appends
    /// through: a reader that keeps reading is never overtaken.
    pub async fn append_paced(&self, event: TurnEvent) {
        debug_assert!(!event.is_terminal(), "terminals go through finish");
        let bytes = entry_bytes(&event);
        loop {
            let ages_out = {
                let mut state = self.log.state.lock();
                if !state.takes_from(self) {
                    return;
                }
                match state.overtakes_reader(bytes) {
                    None => {
                        // Sized once: the check above counted the same bytes.
                        state.push_sized(self.turn, event, bytes);
                        break;
                    }
                    Some(ages_out) => {
                        state.writer_waiting = true;
                        ages_out
                    }
                }
            };
            tokio::select! {
                () = self.log.read.notified() => {}
                () = tokio::time::sleep_until(ages_out) => {}
            }
        }
        self.log.appended.notify_waiters();
    }

    /// Appends the turn's terminal event; later appends are ignored.
    pub fn finish(&self, terminal: TurnEvent) {
        debug_assert!(terminal.is_terminal(), "finish takes a terminal");
        self.log.append(self, terminal);
    }
}

impl Drop for TurnWriter {
    fn drop(&mut self) {
        // A no-op when the turn has its terminal already.
        self.log
            .append(self, TurnEvent::Failed(TurnFailure::internal()));
    }
}

mod mirror;
mod packed;
mod publication;
mod reader;
pub use mirror::MirrorGap;
use packed::Held;
pub use reader::LogReader;
use reader::Reach;

#[cfg(test)]
mod tests;
