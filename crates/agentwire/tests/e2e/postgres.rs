//! `storage.sessions: postgres://…`: the real server on the PostgreSQL
//! store. The database is `AGENTWIRE_TEST_POSTGRES` (`scripts/test` starts a
//! throwaway cluster with `scripts/postgres.sh` and exports it); without it
//! the tests that need it are skipped, except under `CI`. Sessions get
//! fresh ids, so the tests share the database.

use std::time::Duration;

use serde_json::json;

use crate::support::{Client, TestServer, install_tls_provider};

fn postgres_url() -> Option<String> {
    match std::env::var("AGENTWIRE_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the PostgreSQL tests: set AGENTWIRE_TEST_POSTGRES (scripts/test does)"
            );
            eprintln!("skipped: no PostgreSQL server (set AGENTWIRE_TEST_POSTGRES)");
            None
        }
    }
}

async fn ask(
    client: &mut Client,
    session_id: Option<&str>,
    scenario: &str,
    content: &str,
) -> serde_json::Value {
    let mut message =
        json!({"type": "message", "content": content, "metadata": {"mock_scenario": scenario}});
    if let Some(id) = session_id {
        message["session_id"] = json!(id);
    }
    client.send_json(message).await;
    client.recv_turn().await.pop().unwrap()
}

#[tokio::test]
async fn a_turn_is_stored_in_postgres_and_resumed_from_a_new_connection_and_a_new_server() {
    let Some(url) = postgres_url() else {
        return;
    };
    let server = TestServer::with_sessions(&url).await;
    let (mut first, connected) = server.connect("agent=test-agent").await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    let done = ask(&mut first, None, "echo", "my name is Ada").await;
    assert_eq!(done["type"], "done", "{done}");
    drop(first);

    let transcript = "user: my name is Ada\nassistant: echo: my name is Ada\n";
    let (mut second, _) = server.connect("agent=test-agent").await;
    let done = ask(&mut second, Some(&session), "history", "who am I?").await;
    assert_eq!(done["session_id"], session.as_str());
    assert_eq!(done["content"], transcript);
    drop(second);
    let (status, body) = server.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    server.stop().await;

    // Another process on the same database (a restart, or another
    // replica) reads the session from PostgreSQL.
    let server = TestServer::with_sessions(&url).await;
    let (mut third, _) = server.connect("agent=test-agent").await;
    let done = ask(&mut third, Some(&session), "history", "and now?").await;
    assert_eq!(done["session_id"], session.as_str());
    let content = done["content"].as_str().unwrap();
    assert!(content.starts_with(transcript), "{content}");
    assert!(content.contains("user: who am I?\n"), "{content}");
    server.stop().await;
}

#[tokio::test]
async fn an_unreachable_database_fails_startup_naming_the_key_not_the_password() {
    install_tls_provider();
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\nstorage:\n  sessions: postgres://aw:pg-s3cret-0123@127.0.0.1:1/agentwire\n  postgres: {{connect_timeout: 2s}}\n{}",
        crate::support::AGENTS
    );
    let config = agentwire::config::parse(&yaml, |_| None).expect("a valid config");
    assert!(!format!("{config:?}").contains("pg-s3cret-0123"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let run = agentwire::run(listener, config, std::future::pending());
    let error = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("startup gives up within the connect timeout")
        .expect_err("nothing listens on port 1");
    let message = format!("{error:#}");
    assert!(message.starts_with("storage.sessions: "), "{message}");
    assert!(
        message.contains("postgres://aw:<redacted>@127.0.0.1:1/agentwire"),
        "{message}"
    );
    assert!(!message.contains("pg-s3cret-0123"), "{message}");
}

/// A database of the test's own on the test server, made with `psql`; its
/// URL.
fn fresh_database(url: &str, test: &str) -> String {
    let name = format!(
        "aw_{test}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let created = std::process::Command::new("psql")
        .arg(url)
        .args(["-v", "ON_ERROR_STOP=1", "-q", "-c"])
        .arg(format!("CREATE DATABASE {name}"))
        .status()
        .expect("psql runs (Debian's postgresql-client, with scripts/postgres.sh)");
    assert!(created.success(), "CREATE DATABASE {name}");
    url.replacen("///postgres?", &format!("///{name}?"), 1)
}

#[test]
fn migrate_applies_the_schema_once_and_a_server_that_does_not_migrate_needs_it() {
    let Some(url) = postgres_url() else {
        return;
    };
    let database = fresh_database(&url, "migrate");
    let config = |migrate_on_start: bool| {
        crate::config_errors::write_config(&format!(
            "storage:\n  sessions: \"{database}\"\n  postgres:\n    migrate_on_start: {migrate_on_start}\nagents:\n  - name: a\n    handler: echo\n"
        ))
    };
    let (_dir, path) = config(false);
    // A server that does not migrate refuses the empty database, naming
    // what to run.
    let refused = crate::config_errors::agentwire()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("lacks migrations [1, 2, 3]"), "{stderr}");
    assert!(stderr.contains("agentwire migrate"), "{stderr}");

    let migrate = || {
        crate::config_errors::agentwire()
            .args(["migrate", "--config"])
            .arg(&path)
            .output()
            .unwrap()
    };
    let first = migrate();
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert_eq!(first.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("applied migrations [1, 2, 3]"), "{stdout}");
    assert!(!stdout.contains("agentwire@"), "no credentials: {stdout}");
    let again = migrate();
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(stdout.contains("schema up to date"), "{stdout}");
}
