//! What the engine did with the live state the replicas share, counted for
//! `/metrics`: plain relaxed atomics, no labels by session.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counted by the engine; read by the server's `/metrics`.
#[derive(Default, Debug)]
pub struct LiveCounters {
    /// Turn leases granted, refused (another turn holds the session, here or
    /// elsewhere) and lost (renewals refused or failing for a whole lease).
    pub leases_granted: AtomicU64,
    pub leases_refused: AtomicU64,
    pub leases_lost: AtomicU64,
    /// Batches this replica appended to shared logs, and those refused
    /// because its lease had been taken.
    pub batches_published: AtomicU64,
    pub batches_fenced: AtomicU64,
    /// Entries of turns running elsewhere mirrored into this replica's logs.
    pub entries_mirrored: AtomicU64,
    /// Turns of dead replicas this one ended ("turn interrupted").
    pub orphans_ended: AtomicU64,
    /// Controls (cancels, client tool answers) forwarded to another replica,
    /// and received from one.
    pub controls_sent: AtomicU64,
    pub controls_received: AtomicU64,
    /// Calls to the shared live state that failed (Redis unreachable, timed
    /// out).
    pub errors: AtomicU64,
}

impl LiveCounters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Every counter with its metric name's suffix and help, for rendering.
    pub fn all(&self) -> [(&'static str, &'static str, u64); 10] {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        [
            (
                "leases_granted_total",
                "Turn leases granted.",
                get(&self.leases_granted),
            ),
            (
                "leases_refused_total",
                "Turn leases refused: another turn held the session.",
                get(&self.leases_refused),
            ),
            (
                "leases_lost_total",
                "Turn leases lost while their turn ran.",
                get(&self.leases_lost),
            ),
            (
                "log_batches_published_total",
                "Turn log batches appended to the shared log.",
                get(&self.batches_published),
            ),
            (
                "log_batches_fenced_total",
                "Turn log batches refused: the lease had been taken.",
                get(&self.batches_fenced),
            ),
            (
                "log_entries_mirrored_total",
                "Entries of turns running on other replicas mirrored here.",
                get(&self.entries_mirrored),
            ),
            (
                "orphaned_turns_ended_total",
                "Turns of dead replicas ended here.",
                get(&self.orphans_ended),
            ),
            (
                "controls_sent_total",
                "Cancels and client tool answers forwarded to another replica.",
                get(&self.controls_sent),
            ),
            (
                "controls_received_total",
                "Cancels and client tool answers received from another replica.",
                get(&self.controls_received),
            ),
            (
                "errors_total",
                "Calls to the shared live state (Redis) that failed.",
                get(&self.errors),
            ),
        ]
    }
}
