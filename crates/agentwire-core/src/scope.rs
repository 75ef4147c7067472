//! State that lives as long as one client connection: whatever handlers
//! cache for it (such as open MCP sessions, reused across the connection's
//! turns and closed with it). Pending client tool calls belong to the
//! session (`SessionLease::client_tools`), so a rejoined socket answers them.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

#[derive(Default)]
pub struct ConnectionScope {
    slots: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl ConnectionScope {
    pub fn new() -> Arc<ConnectionScope> {
        Arc::new(ConnectionScope::default())
    }

    /// The connection's `T`, made by `init` on first use.
    pub fn get_or_init<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let mut slots = self.slots.lock();
        let slot = slots
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(init()) as Arc<dyn Any + Send + Sync>)
            .clone();
        drop(slots);
        slot.downcast::<T>()
            .unwrap_or_else(|_| unreachable!("slots are keyed by their type"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_per_type() {
        let scope = ConnectionScope::new();
        let a = scope.get_or_init(|| 7u32);
        let b = scope.get_or_init(|| 9u32);
        assert_eq!((*a, *b), (7, 7));
        assert_eq!(*scope.get_or_init(|| "s"), "s");
    }
}
