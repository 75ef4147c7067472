//! Standard input: lines read by a task of their own (so a running turn can
//! watch for `/cancel`), and the REPL's commands.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::sync::mpsc;

/// Lines typed ahead are few; the reader waits when the REPL is behind.
const LINES_AHEAD: usize = 64;

pub(crate) const HELP: &str = "\
/new          start a new session (a new connection)
/resume ID    continue session ID (its history is printed)
/sessions     list your sessions
/memories     list what this agent remembers about you
/forget ID    delete memory ID (an id /memories printed) for good
/cancel       stop the running turn
/quit         leave (so does the end of input)
anything else is sent to the agent";

/// What `/forget` without an id prints.
pub(crate) const FORGET_USAGE: &str = "usage: /forget ID (an id /memories printed)";

/// The lines of standard input, in order, as they arrive.
pub(crate) struct Input {
    lines: mpsc::Receiver<String>,
    closed: bool,
}

impl Input {
    pub(crate) fn spawn<I>(input: I) -> Input
    where
        I: AsyncBufRead + Unpin + Send + 'static,
    {
        let (sender, lines) = mpsc::channel(LINES_AHEAD);
        tokio::spawn(async move {
            let mut input = input.lines();
            while let Ok(Some(line)) = input.next_line().await {
                if sender.send(line).await.is_err() {
                    return;
                }
            }
        });
        Input {
            lines,
            closed: false,
        }
    }

    /// The next line; `None` at the end of input (and after it).
    pub(crate) async fn next(&mut self) -> Option<String> {
        if self.closed {
            return None;
        }
        let line = self.lines.recv().await;
        self.closed = line.is_none();
        line
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }
}

/// What one line asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command {
    Empty,
    Message(String),
    New,
    Resume(String),
    Sessions,
    Memories,
    Forget(String),
    Cancel,
    Quit,
    Help,
    /// A known command used the wrong way: its usage.
    Usage(&'static str),
    Unknown(String),
}

/// A line that starts with `/` is a command; `//text` sends `/text`.
pub(crate) fn parse(line: &str) -> Command {
    let line = line.trim_end_matches(['\r', '\n']);
    if line.trim().is_empty() {
        return Command::Empty;
    }
    if let Some(escaped) = line.strip_prefix("//") {
        return Command::Message(format!("/{escaped}"));
    }
    let Some(command) = line.strip_prefix('/') else {
        return Command::Message(line.to_owned());
    };
    let mut words = command.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("new"), None, _) => Command::New,
        (Some("resume"), Some(id), None) => Command::Resume(id.to_owned()),
        (Some("sessions"), None, _) => Command::Sessions,
        (Some("memories"), None, _) => Command::Memories,
        (Some("forget"), Some(id), None) => Command::Forget(id.to_owned()),
        (Some("forget"), _, _) => Command::Usage(FORGET_USAGE),
        (Some("cancel"), None, _) => Command::Cancel,
        (Some("quit" | "exit"), None, _) => Command::Quit,
        (Some("help"), None, _) => Command::Help,
        _ => Command::Unknown(format!("/{command}")),
    }
}

#[cfg(test)]
mod tests {
    use super::{Command, FORGET_USAGE, parse};

    #[test]
    fn lines_are_messages_unless_they_name_a_command() {
        assert_eq!(parse("hello"), Command::Message("hello".into()));
        assert_eq!(parse("  "), Command::Empty);
        assert_eq!(parse("/new"), Command::New);
        assert_eq!(parse("/resume abc"), Command::Resume("abc".into()));
        assert_eq!(parse("/resume"), Command::Unknown("/resume".into()));
        assert_eq!(parse("/sessions"), Command::Sessions);
        assert_eq!(parse("/cancel"), Command::Cancel);
        assert_eq!(parse("/quit\r"), Command::Quit);
        assert_eq!(parse("//etc/hosts"), Command::Message("/etc/hosts".into()));
        assert_eq!(parse("/frobnicate"), Command::Unknown("/frobnicate".into()));
    }

    #[test]
    fn memories_are_listed_and_forgotten_by_id() {
        assert_eq!(parse("/memories"), Command::Memories);
        assert_eq!(parse("/memories\r"), Command::Memories);
        assert_eq!(
            parse("/memories all"),
            Command::Unknown("/memories all".into())
        );
        assert_eq!(parse("/forget m-1"), Command::Forget("m-1".into()));
        assert_eq!(parse("/forget   m-1  "), Command::Forget("m-1".into()));
        assert_eq!(parse("/forget"), Command::Usage(FORGET_USAGE));
        assert_eq!(parse("/forget "), Command::Usage(FORGET_USAGE));
        assert_eq!(parse("/forget m-1 m-2"), Command::Usage(FORGET_USAGE));
        assert_eq!(
            parse("//forget m-1"),
            Command::Message("/forget m-1".into())
        );
        assert_eq!(parse("forget m-1"), Command::Message("forget m-1".into()));
    }
}
