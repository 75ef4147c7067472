//! agentwire as a library: the binary's pieces, callable from tests.
//!
//! - [`config`]: the YAML file, parsed and validated before any port is bound.
//! - [`app`]: builds the engine, store and agents from a [`config::Config`].
//! - [`run`]: serves an already bound listener until shutdown, as
//!   mini-redis' `server::run` does, so tests can bind `127.0.0.1:0`.

pub mod app;
pub mod config;
mod system;

use std::future::Future;

use tokio::net::TcpListener;

/// Builds the application from `config` and serves `listener` until
/// `shutdown` resolves and the drain completes.
pub async fn run(
    listener: TcpListener,
    config: config::Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = app::build(config, listener.local_addr()?).await?;
    let served = agentwire_server::serve(listener, state.clone(), shutdown).await;
    // After the drain: summaries not written yet keep their due time in the
    // store and are written after the next start.
    state.engine.shutdown().await;
    served?;
    Ok(())
}
