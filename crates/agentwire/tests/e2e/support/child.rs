//! `agentwire serve` as a child process, for the tests that kill or
//! restart the binary itself.

use std::path::Path;
use std::time::Duration;

/// The log lines of a child `agentwire serve`.
pub type ChildLog = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>;

/// `agentwire serve --config <config>` as a child process (killed when
/// dropped), logging at `info` to a pipe; the caller adds what else it
/// needs before [`start_child`].
pub fn agentwire_serve(config: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentwire"));
    command
        .arg("serve")
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Starts `command` (see [`agentwire_serve`]) and waits for its listening
/// line: the child, the `127.0.0.1:PORT` it listens on, and its later log
/// lines, which the caller must keep reading (or drop) so the child never
/// blocks on a full pipe.
pub async fn start_child(
    mut command: tokio::process::Command,
) -> (tokio::process::Child, String, ChildLog) {
    use tokio::io::AsyncBufReadExt as _;
    let mut child = command.spawn().expect("agentwire serve starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let address = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("agentwire listening")
                && let Some(at) = line.find("127.0.0.1:")
            {
                let port: String = line[at + 10..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                return format!("127.0.0.1:{port}");
            }
        }
        panic!("agentwire exited before listening");
    })
    .await
    .expect("agentwire listens");
    (child, address, lines)
}
