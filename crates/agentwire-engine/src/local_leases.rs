//! The leases of one process ([`LocalLeases`]): what the engine uses unless
//! it is given shared ones (`agentwire-live`'s Redis adapter).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentwire_core::SessionId;
use agentwire_core::live::{Acquired, Fence, LiveError, TurnLease, TurnLeases};
use async_trait::async_trait;
use parking_lot::Mutex;

/// The leases of one process, in memory: held while a turn runs, gone when
/// it ends (and with the process). What the engine uses unless it is given
/// shared ones.
#[derive(Default)]
pub struct LocalLeases {
    held: Mutex<HashMap<SessionId, Fence>>,
    /// One counter for every session: fences only need to grow per session.
    next_fence: AtomicU64,
}

impl LocalLeases {
    pub fn new() -> LocalLeases {
        LocalLeases::default()
    }
}

#[async_trait]
impl TurnLeases for LocalLeases {
    /// One process: its memory of a session is the truth, whatever `known`.
    async fn acquire(
        &self,
        session: &SessionId,
        _known: Option<Fence>,
    ) -> Result<Acquired, LiveError> {
        let mut held = self.held.lock();
        if held.contains_key(session) {
            return Ok(Acquired::Held);
        }
        let fence = Fence(self.next_fence.fetch_add(1, Ordering::Relaxed) + 1);
        held.insert(session.clone(), fence);
        Ok(Acquired::Granted(TurnLease {
            fence,
            changed_hands: false,
        }))
    }

    async fn renew(&self, session: &SessionId, fence: Fence) -> Result<bool, LiveError> {
        Ok(self.held.lock().get(session) == Some(&fence))
    }

    async fn release(&self, session: &SessionId, fence: Fence) -> Result<(), LiveError> {
        let mut held = self.held.lock();
        if held.get(session) == Some(&fence) {
            held.remove(session);
        }
        Ok(())
    }

    fn renew_every(&self) -> Option<Duration> {
        None
    }

    fn ttl(&self) -> Duration {
        Duration::MAX
    }

    async fn ping(&self) -> Result<(), LiveError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentwire_core::live::conformance;

    fn session(n: u8) -> SessionId {
        SessionId::parse(&format!("00000000-0000-4000-8000-0000000000{n:02x}")).unwrap()
    }

    #[tokio::test]
    async fn local_leases_pass_the_conformance_suite() {
        let leases = LocalLeases::new();
        conformance::one_holder_at_a_time(&leases, &leases, &session(1)).await;
        conformance::sessions_are_independent(&leases, &session(2), &session(3)).await;
        assert!(
            leases.held.lock().is_empty(),
            "released leases are forgotten"
        );
    }
}
