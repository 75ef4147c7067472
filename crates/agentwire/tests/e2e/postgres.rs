//! `storage.sessions: postgres://…`: the real server on the PostgreSQL
//! store. The database is `AGENTWIRE_TEST_POSTGRES` (`scripts/test` starts a
//! throwaway cluster with `scripts/postgres.sh` and exports it); without it
//! the tests that need it are skipped, except under `CI`. Sessions get
//! fresh ids, so the tests share the database.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::support::{Client, Dialect, TestServer, install_tls_provider, repo_root};

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

/// The startup error of a server on `sessions`, or `None` when it starts
/// (then it has answered a turn stored in that database, and stopped).
async fn startup_error(sessions: &str) -> Option<String> {
    let top_level =
        format!("storage:\n  sessions: \"{sessions}\"\n  postgres: {{connect_timeout: 5s}}\n");
    startup_error_of(&top_level).await
}

/// The startup error of a server with `top_level` config, or `None` when
/// it starts (then it has answered a turn, and stopped).
pub(crate) async fn startup_error_of(top_level: &str) -> Option<String> {
    install_tls_provider();
    let yaml = format!(
        "server:\n  listen: 127.0.0.1:0\n{top_level}{}",
        crate::support::AGENTS
    );
    let config = agentwire::config::parse(&yaml, |_| None).expect("a valid config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(agentwire::run(listener, config, async {
        let _ = stopped.await;
    }));
    // A failed start ends the task; a good one answers (the listener was
    // bound before, so the upgrade waits for the server to serve).
    let url = format!("ws://{addr}/ws?agent=test-agent");
    let upgraded = tokio::time::timeout(
        Duration::from_secs(20),
        tokio_tungstenite::connect_async(url),
    )
    .await
    .expect("a start or an error within 20 s");
    let Ok((ws, _)) = upgraded else {
        // The listener went with the failed start.
        let error = run.await.unwrap().expect_err("the start failed");
        return Some(format!("{error:#}"));
    };
    let mut client = Client::new(ws, Dialect::Omnia);
    assert_eq!(client.recv().await["type"], "connected");
    let done = ask(&mut client, None, "echo", "over TLS").await;
    assert_eq!(done["content"], "echo: over TLS", "{done}");
    let _ = stop.send(());
    run.await.unwrap().expect("a clean stop");
    None
}

#[tokio::test]
async fn tls_to_postgres_is_what_sslmode_asks_and_a_bad_certificate_is_a_startup_error() {
    let Some(cluster) = OwnPostgres::start("--tls") else {
        return;
    };
    let (port, ca) = cluster.tls.clone().unwrap();
    // The server refuses plaintext over TCP (pg_hba), so every start over
    // TCP below spoke TLS; its certificate names localhost, not 127.0.0.1.
    let url = |host: &str, query: &str| {
        format!("postgres://agentwire@{host}:{port}/postgres?application_name=aw-tls{query}")
    };
    let verified = format!("&sslmode=verify-full&sslrootcert={ca}");
    assert_eq!(startup_error(&url("localhost", &verified)).await, None);
    let chain_only = format!("&sslmode=verify-ca&sslrootcert={ca}");
    assert_eq!(startup_error(&url("127.0.0.1", &chain_only)).await, None);
    // libpq's meanings: require and prefer encrypt without checking.
    assert_eq!(
        startup_error(&url("127.0.0.1", "&sslmode=require")).await,
        None
    );
    assert_eq!(startup_error(&url("127.0.0.1", "")).await, None);

    for (query, host, expected) in [
        // The certificate is not for the name the URL gives.
        (
            verified.as_str(),
            "127.0.0.1",
            "certificate not valid for name \"127.0.0.1\"",
        ),
        // Nor signed by a root the system trusts.
        (
            "&sslmode=verify-full",
            "localhost",
            "invalid peer certificate: UnknownIssuer",
        ),
        // Plaintext, refused by the server.
        ("&sslmode=disable", "127.0.0.1", "no encryption"),
    ] {
        let error = startup_error(&url(host, query)).await.expect("refused");
        assert!(error.starts_with("storage.sessions: "), "{error}");
        assert!(error.contains(expected), "{query} {host}: {error}");
    }
    let error = startup_error(&url(
        "localhost",
        "&sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    ))
    .await
    .expect("refused");
    assert!(
        error.contains("cannot read sslrootcert /nonexistent/ca.pem"),
        "{error}"
    );
    // A mode the store does not implement is a config error naming the key.
    let bad = format!(
        "storage:\n  sessions: \"{}\"\nagents:\n  - {{name: a, handler: echo}}\n",
        url("localhost", "&sslmode=allow")
    );
    let error = agentwire::config::parse(&bad, |_| None).unwrap_err();
    assert_eq!(error.key, "storage.sessions");
    assert!(error.to_string().contains("sslmode allow"), "{error}");
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
    assert!(
        stderr.contains("lacks migrations [1, 2, 3, 4, 5, 6, 7, 8, 9]"),
        "{stderr}"
    );
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
    assert!(
        stdout.contains("applied migrations [1, 2, 3, 4, 5, 6, 7, 8, 9]"),
        "{stdout}"
    );
    assert!(!stdout.contains("agentwire@"), "no credentials: {stdout}");
    let again = migrate();
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(stdout.contains("schema up to date"), "{stdout}");
}

/// A PostgreSQL cluster of the test's own, removed when dropped.
pub(crate) struct OwnPostgres {
    dir: String,
    /// Its Unix socket.
    pub(crate) url: String,
    /// With `--tls`: its TCP port (TLS only) and the CA's PEM file.
    pub(crate) tls: Option<(u16, String)>,
}

impl OwnPostgres {
    /// `scripts/postgres.sh start FLAG`; `None` (skipped) where the test
    /// servers are not there, as for every PostgreSQL test.
    pub(crate) fn start(flag: &str) -> Option<OwnPostgres> {
        postgres_url()?;
        let out = postgres_sh(&["start", flag]);
        let exported = |name: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}=")))
                .unwrap_or_else(|| panic!("postgres.sh start printed no {name}: {out}"))
                .trim_matches('\'')
                .to_owned()
        };
        let tls = (flag == "--tls").then(|| {
            let port = exported("POSTGRES_TLS_PORT").parse().unwrap();
            (port, exported("POSTGRES_TLS_CA"))
        });
        Some(OwnPostgres {
            url: exported("AGENTWIRE_TEST_POSTGRES"),
            dir: exported("POSTGRES_DIR"),
            tls,
        })
    }

    /// Stops the server as a crash would.
    pub(crate) fn pause(&self) {
        postgres_sh(&["pause", &self.dir]);
    }

    pub(crate) fn resume(&self) {
        postgres_sh(&["resume", &self.dir]);
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/postgres.sh"))
            .args(["stop", &self.dir])
            .status();
    }
}

fn postgres_sh(args: &[&str]) -> String {
    let mut command = Command::new(repo_root().join("scripts/postgres.sh"));
    stdout_of(command.args(args))
}

/// What `command` printed; it must succeed.
pub(crate) fn stdout_of(command: &mut Command) -> String {
    let out = command.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
