use std::sync::Arc;

use agentwire_core::testing::multi_event_turn;
use agentwire_core::{Epoch, LogEntry, SessionLog, Timestamp};

use super::*;

const NOW: Timestamp = Timestamp(1_700_000_000_000);
const EPOCH: &str = "7";

/// A log holding two scripted turns: a cut point can fall in either, or
/// between them.
fn two_turn_log() -> Arc<SessionLog> {
    let log = SessionLog::new(Epoch(7));
    for _ in 0..2 {
        let (agent, events) = multi_event_turn();
        let writer = log.start_turn(&agent, None);
        let (terminal, events) = events.split_last().expect("a turn has a terminal");
        for event in events {
            writer.append(event.clone());
        }
        writer.finish(terminal.clone());
    }
    log
}

/// What the client sees of `entry`, binary media named by its chunk.
fn seen(encoded: Encoded<'_>) -> Option<String> {
    match encoded {
        Encoded::Nothing => None,
        Encoded::Text(frame) => Some(frame),
        Encoded::BinaryMedia(chunk) => {
            Some(format!("binary {} {}", chunk.media_id, chunk.sequence))
        }
    }
}

fn read_all(mut reader: agentwire_core::LogReader) -> Vec<LogEntry> {
    let mut entries = Vec::new();
    while let Some(entry) = reader.try_next().expect("not lagged") {
        entries.push(entry);
    }
    entries
}

/// Every frame of the log, each with the seq of the entry it encodes.
fn full_stream(log: &Arc<SessionLog>, options: EncoderOptions) -> Vec<(u64, String)> {
    let mut encoder = TurnEncoder::new(options);
    read_all(log.reader_after(0))
        .iter()
        .filter_map(|entry| {
            seen(encoder.encode("s1", entry, EPOCH, NOW)).map(|frame| (entry.seq, frame))
        })
        .collect()
}

fn every_option() -> impl Iterator<Item = EncoderOptions> {
    (0..8).map(|bits: u8| EncoderOptions {
        positions: bits & 1 != 0,
        shows_server_tools: bits & 2 != 0,
        binary_media: bits & 4 != 0,
    })
}

#[test]
fn a_rejoin_after_any_entry_sees_exactly_the_frames_it_had_not_seen() {
    let log = two_turn_log();
    for options in every_option() {
        let full = full_stream(&log, options);
        for after in 0..=log.head() {
            let reader = log.rejoin_reader(after).expect("the log holds both turns");
            let mut encoder = TurnEncoder::new(options);
            let mut rest = Vec::new();
            for entry in read_all(reader) {
                if entry.seq <= after {
                    encoder.observe(&entry);
                } else if let Some(frame) = seen(encoder.encode("s1", &entry, EPOCH, NOW)) {
                    rest.push((entry.seq, frame));
                }
            }
            let expected: Vec<_> = full
                .iter()
                .filter(|(seq, _)| *seq > after)
                .cloned()
                .collect();
            assert_eq!(rest, expected, "{options:?}, rejoined after {after}");
        }
    }
}

#[test]
fn the_scripted_turn_shows_what_an_omnia_client_is_owed() {
    let log = two_turn_log();
    let frames = |options| -> Vec<String> {
        full_stream(&log, options)
            .into_iter()
            .map(|(_, f)| f)
            .collect()
    };
    let plain = frames(EncoderOptions {
        positions: false,
        shows_server_tools: false,
        binary_media: false,
    });
    let text = plain.join("\n");
    // The delegate's text and tools are not the reply's.
    assert!(!text.contains("internal notes") && !text.contains("more notes"));
    assert!(!text.contains("\"search\"") && !text.contains("\"weather\""));
    // Client tools are shown; a call the client let time out is closed.
    assert!(text.contains("get_location") && text.contains("timed out"));
    let per_turn = plain.len() / 2;
    assert!(
        plain[per_turn - 1].starts_with("{\"type\":\"done\""),
        "{plain:?}"
    );
    assert!(!text.contains("\"seq\""));

    let positioned = frames(EncoderOptions {
        positions: true,
        shows_server_tools: true,
        binary_media: true,
    });
    assert!(
        positioned[0].contains("\"turn_started\""),
        "{}",
        positioned[0]
    );
    assert!(positioned.iter().any(|f| f.contains("\"weather\"")));
    assert!(positioned.iter().any(|f| f == "binary m1 0"));
    let seqs: Vec<u64> = positioned
        .iter()
        .filter(|f| f.starts_with('{'))
        .map(|f| {
            serde_json::from_str::<serde_json::Value>(f).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}
