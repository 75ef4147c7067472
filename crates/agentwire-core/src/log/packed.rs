//! A finished turn's text deltas, held as spans of its reply.
//!
//! The log keeps the turns before the running one for clients that rejoin
//! ([`super::KEPT_TURNS`]), and most of such a turn is its text deltas: a
//! 20-chunk reply is 20 events of their own (each an `Arc`, a `String` and
//! its bytes), about 200 bytes each besides the text, while the turn's
//! terminal carries the same text once more as its reply. Once the next
//! turn starts, a finished turn whose deltas, in order, spell its reply
//! keeps only where each delta lies in that reply; a reader that reads one
//! gets the same event back, built as it reads (rejoins and readers far
//! behind, not the live path, which has read the turn by then).

use std::collections::VecDeque;
use std::sync::Arc;

use super::{Kept, LogEntry, TurnId};
use crate::turn::TurnEvent;

/// How the log holds an entry's event.
pub(super) enum Held {
    /// As it was appended.
    Event(Arc<TurnEvent>),
    /// A text delta of a finished turn: bytes `start..end` of the reply
    /// its terminal carries (the turn's last entry).
    ReplySpan { start: u32, end: u32 },
}

impl Held {
    /// The event as appended; `None` for a delta held as a span.
    pub(super) fn event(&self) -> Option<&TurnEvent> {
        match self {
            Held::Event(event) => Some(event),
            Held::ReplySpan { .. } => None,
        }
    }

    pub(super) fn is_terminal(&self) -> bool {
        self.event().is_some_and(TurnEvent::is_terminal)
    }

    pub(super) fn is_delta(&self) -> bool {
        match self {
            Held::Event(event) => matches!(**event, TurnEvent::TextDelta(_)),
            Held::ReplySpan { .. } => true,
        }
    }

    /// The text of a delta; `reply` is its turn's reply, which a span needs.
    pub(super) fn delta<'a>(&'a self, reply: Option<&'a str>) -> Option<&'a str> {
        match self {
            Held::Event(event) => match &**event {
                TurnEvent::TextDelta(text) => Some(text),
                _ => None,
            },
            Held::ReplySpan { start, end } => reply?.get(*start as usize..*end as usize),
        }
    }
}

/// The text of entry `index` when it is a text delta.
fn delta_text(entries: &VecDeque<Kept>, index: usize) -> Option<&str> {
    let held = &entries[index].held;
    let reply = match held {
        Held::ReplySpan { .. } => reply_of_turn(entries, index),
        Held::Event(_) => None,
    };
    held.delta(reply)
}

/// Entry `index` as it was appended.
pub(super) fn entry_at(entries: &VecDeque<Kept>, index: usize) -> LogEntry {
    let kept = &entries[index];
    let event = match &kept.held {
        Held::Event(event) => event.clone(),
        Held::ReplySpan { .. } => {
            let text = delta_text(entries, index).unwrap_or_default();
            Arc::new(TurnEvent::TextDelta(text.to_owned()))
        }
    };
    LogEntry {
        seq: kept.seq,
        turn: kept.turn(),
        event,
    }
}

/// The reply text of the turn of entry `index`, from its terminal.
pub(super) fn reply_of_turn(entries: &VecDeque<Kept>, index: usize) -> Option<&str> {
    let turn = entries[index].turn();
    entries
        .range(index..)
        .take_while(|kept| kept.turn() == turn)
        .find_map(|kept| match kept.held.event()? {
            TurnEvent::Completed(reply) | TurnEvent::Cancelled(reply) => Some(reply.text.as_str()),
            _ => None,
        })
}

/// Holds `turn`'s text deltas as spans of its reply when, in order, they
/// spell it exactly; leaves the turn as it is otherwise (a failed turn, a
/// delegate's text, text before a tool call). `turn` is the newest turn in
/// `entries` and has ended.
pub(super) fn pack_turn(entries: &mut VecDeque<Kept>, turn: TurnId) {
    let first = entries
        .iter()
        .rposition(|kept| kept.turn() != turn)
        .map_or(0, |before| before + 1);
    let Some(reply) = entries.back().and_then(|last| match last.held.event()? {
        TurnEvent::Completed(reply) | TurnEvent::Cancelled(reply) => Some(reply.text.as_str()),
        _ => None,
    }) else {
        return;
    };
    let mut spans = Vec::new();
    let mut at = 0;
    for (index, kept) in entries.iter().enumerate().skip(first) {
        let Some(TurnEvent::TextDelta(delta)) = kept.held.event() else {
            continue;
        };
        let end = at + delta.len();
        if reply.get(at..end) != Some(delta.as_str()) {
            return;
        }
        let (Ok(start), Ok(end32)) = (u32::try_from(at), u32::try_from(end)) else {
            return;
        };
        spans.push((index, start, end32));
        at = end;
    }
    if at != reply.len() {
        return;
    }
    for (index, start, end) in spans {
        entries[index].held = Held::ReplySpan { start, end };
    }
}
