//! Wiring: the one place that knows every adapter and picks them from the
//! config. A backend that cannot start is a startup error, never a fallback.

use std::collections::HashMap;
use std::sync::Arc;

use agentwire_core::{Agent, Engine, Handler, SessionStore};
use agentwire_handlers::{DemoHandler, EchoHandler, TestHandler};
use agentwire_server::{AgentEntry, AppState, Limits, ServerSettings};
use agentwire_store::{MemoryStore, SqliteStore};
use anyhow::Context as _;

use crate::config::{AgentConfig, Config, HandlerKind, SessionStorage};
use crate::system::{RandomIds, SystemClock};

pub async fn build(config: Config) -> anyhow::Result<Arc<AppState>> {
    let store = open_store(&config.sessions).await?;
    let engine = Engine::new(store, Arc::new(SystemClock), Arc::new(RandomIds));
    let agents = config
        .agents
        .iter()
        .map(|agent| (agent.name.clone(), Arc::new(agent_entry(agent))))
        .collect::<HashMap<_, _>>();
    let limits = config.limits;
    let settings = ServerSettings {
        allowed_origins: config.allowed_origins,
        allow_unauthenticated: config.allow_unauthenticated,
        limits: Limits {
            max_connections: limits.max_connections,
            messages_per_second: limits.messages_per_second,
            message_burst: limits.message_burst,
            max_payload_bytes: limits.max_payload_bytes,
            ping_interval: limits.ping_interval,
            pong_timeout: limits.pong_timeout,
            drain_timeout: limits.drain_timeout,
        },
    };
    Ok(Arc::new(AppState::new(engine, agents, settings)))
}

async fn open_store(storage: &SessionStorage) -> anyhow::Result<Arc<dyn SessionStore>> {
    Ok(match storage {
        SessionStorage::Memory => Arc::new(MemoryStore::default()),
        SessionStorage::Sqlite(path) => {
            Arc::new(SqliteStore::open(path).await.with_context(|| {
                format!(
                    "storage.sessions: cannot open SQLite database {}",
                    path.display()
                )
            })?)
        }
    })
}

fn agent_entry(config: &AgentConfig) -> AgentEntry {
    let handler: Arc<dyn Handler> = match config.handler {
        HandlerKind::Test => Arc::new(TestHandler),
        HandlerKind::Echo => Arc::new(EchoHandler),
        HandlerKind::Demo => Arc::new(DemoHandler),
        HandlerKind::Runtime => unreachable!("config validation refuses runtime agents"),
    };
    AgentEntry {
        agent: Arc::new(Agent {
            name: config.name.clone(),
            context_ttl: config.context_ttl,
            ack_timeout: config.ack_timeout,
            client_tool_timeout: config.client_tool_timeout,
            handler,
        }),
        shows_server_tools: config.handler == HandlerKind::Demo,
    }
}
