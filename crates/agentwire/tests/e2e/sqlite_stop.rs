//! A clean stop leaves the SQLite database whole in its own file: the real
//! binary, a turn, SIGTERM, then `agentwire.db` copied alone (as a backup or
//! a move would) still holds the turn.

use std::path::Path;
use std::time::Duration;

use tokio::process::Command;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::{Client, Dialect, agentwire_serve, start_child, stored_messages};

/// The length of the file at `path`, 0 when there is none.
fn length(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[tokio::test]
async fn after_sigterm_the_database_file_alone_holds_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentwire.db");
    let wal = dir.path().join("agentwire.db-wal");
    let config = dir.path().join("agentwire.yaml");
    std::fs::write(
        &config,
        format!(
            "server:\n  listen: 127.0.0.1:0\nstorage:\n  sessions: sqlite://{}\nagents:\n  - name: echo\n    handler: echo\n",
            db.display()
        ),
    )
    .unwrap();
    let (mut child, address, mut log) = start_child(agentwire_serve(&config)).await;
    tokio::spawn(async move { while let Ok(Some(_)) = log.next_line().await {} });

    let request = format!("ws://{address}/ws?agent=echo")
        .into_client_request()
        .unwrap();
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut client = Client::new(ws, Dialect::Omnia);
    let connected = client.recv().await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    client.say("keep this").await;
    let done = client.recv().await;
    assert_eq!(done["content"], "Echo: keep this", "{done}");
    // The turn is written: its rows are in the log, not yet in the file.
    assert!(length(&wal) > 0, "the rows are in the write-ahead log");

    let pid = child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let exit = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("agentwire exits after SIGTERM")
        .unwrap();
    assert!(exit.success(), "{exit}");
    assert_eq!(length(&wal), 0, "the write-ahead log is empty or gone");

    let copy = tempfile::tempdir().unwrap();
    let copied = copy.path().join("agentwire.db");
    std::fs::copy(&db, &copied).unwrap();
    let rows: Vec<(String, String)> = stored_messages(&copied)
        .into_iter()
        .filter(|(id, ..)| *id == session)
        .map(|(_, _, role, content)| (role, content))
        .collect();
    assert_eq!(
        rows,
        [
            ("user".to_owned(), "keep this".to_owned()),
            ("assistant".to_owned(), "Echo: keep this".to_owned()),
        ],
        "the copy alone holds the turn"
    );
}
