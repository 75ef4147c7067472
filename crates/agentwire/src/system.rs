//! The real clock and randomness behind the core's ports.

use std::time::{SystemTime, UNIX_EPOCH};

use agentwire_core::{Clock, IdSource, SessionId, Timestamp};

pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX))
    }
}

/// UUIDv4 from the operating system's generator.
pub(crate) struct RandomIds;

impl IdSource for RandomIds {
    fn session_id(&self) -> SessionId {
        SessionId::minted(uuid::Uuid::new_v4().to_string())
    }

    fn call_id(&self) -> String {
        format!("call_{}", uuid::Uuid::new_v4().simple())
    }

    fn log_epoch(&self) -> u64 {
        // The high half of a random UUID: 64 bits of the generator's output.
        (uuid::Uuid::new_v4().as_u128() >> 64) as u64
    }
}

/// This process among the replicas of a deployment: its host name (when
/// the kernel tells it), its pid and a random part, so a restarted process
/// on the same host is another replica.
#[cfg(feature = "redis")]
pub(crate) fn replica_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty() && !name.contains(':'))
        .unwrap_or_else(|| "agentwire".to_owned());
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &random[..8])
}
