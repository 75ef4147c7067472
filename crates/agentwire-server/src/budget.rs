//! The server-wide budget of inbound bytes in flight
//! (`server.limits.inbound_bytes_in_flight`).
//!
//! A client frame is held in memory, in several shapes (the frame, the
//! decoded message, the turn's input, the live history, the store's write,
//! the reply and its frame), from the moment it has been read until the turn
//! it started has ended. Per-connection limits bound one socket; this bounds
//! the sum, so a burst of large messages across many sockets cannot take the
//! process's memory with it. The limit is memory, not frame bytes: a frame
//! counts [`InboundBudget::COST_PER_BYTE`] times its size, what a message
//! costs at the peak of its turn. A frame whose cost would exceed the budget
//! is refused at once (before it is decoded, so the refusal costs no copy)
//! with `RATE_LIMITED` [`BUSY`]; nothing is stored and the socket stays open.
//!
//! Bytes count from when the frame has been read (tungstenite hands it over
//! whole) and are released when their [`InboundPermit`] drops: when the
//! frame was answered without a turn, or when the turn it started has
//! ended. `in_flight` (the metric `agentwire_inbound_bytes_in_flight`) is
//! the frames' own bytes, not their cost. Not counted: what stays after
//! the turn (tungstenite keeps a socket's read and write buffers at the
//! size of the largest frame until the socket closes; a live session keeps
//! its window of messages and its turn log).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::AppState;

/// The text both dialects send with a frame the budget refused.
pub(crate) const BUSY: &str =
    "server busy: too many large messages in flight; send it again shortly";

/// Shared by every connection of one server. Cheap to clone.
#[derive(Debug, Clone)]
pub struct InboundBudget {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    limit: usize,
    /// What the frames in flight cost (their bytes times their kind's
    /// cost), held against `limit`.
    cost: AtomicUsize,
    /// The frames' own bytes, for `agentwire_inbound_bytes_in_flight`.
    bytes: AtomicUsize,
}

/// What a frame held in flight is, for what a byte of it costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// A text frame: a message and its turn ([`InboundBudget::COST_PER_BYTE`]).
    Message,
    /// A binary media frame: the frame and the voice call's copy of its
    /// audio ([`InboundBudget::MEDIA_COST_PER_BYTE`]).
    Media,
}

impl Held {
    fn cost_per_byte(self) -> usize {
        match self {
            Held::Message => InboundBudget::COST_PER_BYTE,
            Held::Media => InboundBudget::MEDIA_COST_PER_BYTE,
        }
    }
}

/// Bytes taken from the budget; given back when dropped.
#[derive(Debug)]
#[must_use = "the bytes are released as soon as the permit drops"]
pub(crate) struct InboundPermit {
    inner: Arc<Inner>,
    bytes: usize,
    cost: usize,
}

impl InboundBudget {
    /// What one byte of a message costs the server's memory at the peak of
    /// its turn: the budget counts a message at its size times this.
    ///
    /// Measured over the real binary (debug build, jemalloc, SQLite store,
    /// default limits): the server's VmHWM before and after one 15 MiB
    /// message on a new session, the socket left open (`docs/src/
    /// configuration.md`, "Large messages and memory", says how). Peak
    /// growth per byte of the message: Omnia to the test handler's `echo`
    /// 6.2-6.3, to a runtime agent on the mock provider 5.2; Gnosari to the
    /// `echo` agent 6.3-7.3, to the test handler's `echo` 8.3 (before the
    /// engine stopped copying a write's messages beside the live history,
    /// and a reply beside its record: 8.2-8.3 on every path). What remains,
    /// each as large as the message: the frame (tungstenite's read buffer),
    /// the turn's input, the live history's user message and reply, the
    /// reply in the turn's log, the store's row and SQLite's two (the bound
    /// value and the record), then the reply's frame and tungstenite's
    /// write buffer; Gnosari's encoder adds two copies of the reply, and a
    /// second frame (its `token` and `agent_completed` both carry it).
    pub const COST_PER_BYTE: usize = 9;

    /// What one byte of a binary media frame costs: the frame, and the
    /// copy of its audio a voice call's input takes; released once the
    /// frame is handed on.
    pub const MEDIA_COST_PER_BYTE: usize = 2;

    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> InboundBudget {
        InboundBudget {
            inner: Arc::new(Inner {
                limit,
                cost: AtomicUsize::new(0),
                bytes: AtomicUsize::new(0),
            }),
        }
    }

    /// Takes a frame of `bytes` if its cost (its kind's cost a byte)
    /// fits beside the cost of what is in flight; `None` if it does not
    /// (the caller refuses the frame and counts the refusal). A frame whose
    /// cost alone is over the limit, but not its bytes, is taken when
    /// nothing else is in flight, and nothing beside it: a frame the payload
    /// limit allows (never more than the budget) is not always refused.
    pub(crate) fn try_take(&self, bytes: usize, held: Held) -> Option<InboundPermit> {
        let inner = &self.inner;
        let cost = bytes.saturating_mul(held.cost_per_byte());
        inner
            .cost
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |in_flight| {
                let total = in_flight.checked_add(cost)?;
                let alone = in_flight == 0 && bytes <= inner.limit;
                (total <= inner.limit || alone).then_some(total)
            })
            .ok()?;
        inner.bytes.fetch_add(bytes, Ordering::AcqRel);
        Some(InboundPermit {
            inner: inner.clone(),
            bytes,
            cost,
        })
    }

    /// The limit on the cost of what is in flight: [`Self::COST_PER_BYTE`]
    /// times its bytes.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Bytes of frames read and not yet released (their own size, not
    /// their cost).
    pub fn in_flight(&self) -> usize {
        self.inner.bytes.load(Ordering::Acquire)
    }
}

/// `len` bytes of `state`'s budget for a frame just read; `None` when they
/// do not fit, counted in `agentwire_inbound_refused_total`: the frame is
/// then refused undecoded.
pub(crate) fn take(state: &AppState, len: usize, held: Held) -> Option<InboundPermit> {
    let permit = state.inbound().try_take(len, held);
    if permit.is_none() {
        state
            .metrics()
            .inbound_refused_total
            .fetch_add(1, Ordering::Relaxed);
    }
    permit
}

impl Drop for InboundPermit {
    fn drop(&mut self) {
        self.inner.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
        self.inner.cost.fetch_sub(self.cost, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A budget for `bytes` of messages at their cost.
    fn budget_for(bytes: usize) -> InboundBudget {
        InboundBudget::new(bytes * InboundBudget::COST_PER_BYTE)
    }

    #[test]
    fn takes_what_fits_at_its_cost_and_releases_on_drop() {
        let budget = budget_for(100);
        let first = budget.try_take(60, Held::Message).expect("fits");
        assert_eq!(budget.in_flight(), 60, "the frame's own bytes");
        assert!(
            budget.try_take(41, Held::Message).is_none(),
            "60 + 41 > 100"
        );
        let second = budget
            .try_take(40, Held::Message)
            .expect("exactly the limit fits");
        assert_eq!(budget.in_flight(), 100);
        drop(first);
        assert_eq!(budget.in_flight(), 40);
        assert!(
            budget.try_take(60, Held::Message).is_some(),
            "released bytes are free again"
        );
        drop(second);
        assert_eq!(budget.in_flight(), 0);
    }

    #[test]
    fn a_frame_whose_cost_alone_is_over_the_limit_is_taken_only_alone() {
        let budget = InboundBudget::new(100);
        let small = budget.try_take(1, Held::Message).expect("fits at its cost");
        assert!(
            budget.try_take(50, Held::Message).is_none(),
            "not beside another"
        );
        drop(small);
        let large = budget.try_take(50, Held::Message).expect("alone");
        assert!(
            budget.try_take(1, Held::Message).is_none(),
            "nothing beside it"
        );
        drop(large);
        assert_eq!(budget.in_flight(), 0);
    }

    #[test]
    fn a_media_frame_costs_less_than_a_message() {
        let budget = budget_for(100);
        let message = budget.try_take(60, Held::Message).expect("fits");
        // 40 bytes of messages are left: 40 * 9 / 2 bytes of media.
        let media = budget.try_take(180, Held::Media).expect("fits at its cost");
        assert!(
            budget.try_take(1, Held::Message).is_none(),
            "the budget is spent"
        );
        assert_eq!(budget.in_flight(), 240, "the frames' own bytes");
        drop((message, media));
        assert_eq!(budget.in_flight(), 0);
        assert!(
            budget.try_take(100, Held::Message).is_some(),
            "all of it back"
        );
    }

    #[test]
    fn a_frame_larger_than_the_budget_is_refused_even_when_idle() {
        let budget = InboundBudget::new(10);
        assert!(budget.try_take(11, Held::Message).is_none());
        assert!(
            budget.try_take(usize::MAX, Held::Message).is_none(),
            "no overflow"
        );
        let _one = budget.try_take(1, Held::Message).expect("its cost fits");
        assert!(
            budget.try_take(usize::MAX - 1, Held::Message).is_none(),
            "no overflow"
        );
        assert_eq!(budget.in_flight(), 1);
    }
}
