//! agentwire as a library: the binary's pieces, callable from tests.
//!
//! - [`config`]: the YAML file, parsed and validated before any port is bound.
//! - [`app`]: builds the engine, store and agents from a [`config::Config`].
//! - [`telemetry`]: traces over OTLP, when configured.
//! - [`pack_command`]: `agentwire pack compile`.
//! - [`run`]: serves an already bound listener until shutdown, as
//!   mini-redis' `server::run` does, so tests can bind `127.0.0.1:0`;
//!   [`serve`] does the same for an [`app::App`] built before binding.

pub mod app;
pub mod config;
pub mod pack_command;
mod system;
pub mod telemetry;

use std::future::Future;

use tokio::net::TcpListener;

/// Builds the application from `config` and serves `listener` until
/// `shutdown` resolves and the drain completes.
pub async fn run(
    listener: TcpListener,
    config: config::Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve(app::build(config).await?, listener, shutdown).await
}

/// Serves an application built before `listener` was bound (the binary's
/// order: a server that cannot start never binds its port) until `shutdown`
/// resolves and the drain completes.
pub async fn serve(
    app: app::App,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let sqlite = app.sqlite();
    let sandboxes = app.sandboxes();
    let state = app.into_state(listener.local_addr()?);
    let served = agentwire_server::serve(listener, state.clone(), shutdown).await;
    // After the drain: summaries not written yet keep their due time in the
    // store and are written after the next start.
    state.engine().shutdown().await;
    // No turn runs any more: the sandboxes' servers stop.
    if let Some(sandboxes) = sandboxes {
        sandboxes.shutdown();
    }
    // Last: the database file alone then holds every row (the store logs a
    // failure to checkpoint).
    if let Some(store) = sqlite {
        let _ = store.close().await;
    }
    served?;
    Ok(())
}
