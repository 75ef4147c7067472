//! The server-wide budget of inbound bytes in flight
//! (`server.limits.inbound_bytes_in_flight`).
//!
//! A client frame is held in memory, in several shapes (the frame, the
//! decoded message, the turn's input, the live history, the store's write),
//! from the moment it has been read until the turn it started has ended.
//! Per-connection limits bound one socket; this bounds the sum, so a burst
//! of large messages across many sockets cannot take the process's memory
//! with it. A frame whose bytes would exceed the budget is refused at once
//! (before it is decoded, so the refusal costs no copy) with `RATE_LIMITED`
//! [`BUSY`]; nothing is stored and the socket stays open.
//!
//! Bytes count from when the frame has been read (tungstenite hands it over
//! whole) and are released when their [`InboundPermit`] drops: when the
//! frame was answered without a turn, or when the turn it started has
//! ended.

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
    in_flight: AtomicUsize,
}

/// Bytes taken from the budget; given back when dropped.
#[derive(Debug)]
#[must_use = "the bytes are released as soon as the permit drops"]
pub(crate) struct InboundPermit {
    inner: Arc<Inner>,
    bytes: usize,
}

impl InboundBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> InboundBudget {
        InboundBudget {
            inner: Arc::new(Inner {
                limit,
                in_flight: AtomicUsize::new(0),
            }),
        }
    }

    /// Takes `bytes` if they fit beside what is in flight; `None` if they
    /// do not (the caller refuses the frame and counts the refusal).
    pub(crate) fn try_take(&self, bytes: usize) -> Option<InboundPermit> {
        let inner = &self.inner;
        let taken =
            inner
                .in_flight
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |in_flight| {
                    in_flight
                        .checked_add(bytes)
                        .filter(|&total| total <= inner.limit)
                });
        taken.ok().map(|_| InboundPermit {
            inner: inner.clone(),
            bytes,
        })
    }

    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Bytes of frames read and not yet released.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::Acquire)
    }
}

/// `len` bytes of `state`'s budget for a frame just read; `None` when they
/// do not fit, counted in `agentwire_inbound_refused_total`: the frame is
/// then refused undecoded.
pub(crate) fn take(state: &AppState, len: usize) -> Option<InboundPermit> {
    let permit = state.inbound().try_take(len);
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
        self.inner.in_flight.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_what_fits_and_releases_on_drop() {
        let budget = InboundBudget::new(100);
        let first = budget.try_take(60).expect("fits");
        assert_eq!(budget.in_flight(), 60);
        assert!(budget.try_take(41).is_none(), "60 + 41 > 100");
        let second = budget.try_take(40).expect("exactly the limit fits");
        assert_eq!(budget.in_flight(), 100);
        drop(first);
        assert_eq!(budget.in_flight(), 40);
        assert!(
            budget.try_take(60).is_some(),
            "released bytes are free again"
        );
        drop(second);
        assert_eq!(budget.in_flight(), 0);
    }

    #[test]
    fn a_frame_larger_than_the_budget_is_refused_even_when_idle() {
        let budget = InboundBudget::new(10);
        assert!(budget.try_take(11).is_none());
        assert!(budget.try_take(usize::MAX).is_none(), "no overflow");
        assert_eq!(budget.in_flight(), 0);
    }
}
