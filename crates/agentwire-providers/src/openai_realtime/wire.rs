//! The Realtime API's JSON both ways, and failures in words that carry no
//! body, message, URL or key. Pure: no socket here.

use agentwire_core::AudioFormat;
use agentwire_core::realtime::{CallSpec, PCM};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite;

use super::OpenAiRealtimeSettings;

/// The provider's audio rate, both ways.
pub(super) const RATE: u32 = 24_000;

/// The query component: everything but RFC 3986's unreserved characters.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Event types the adapter reads or deliberately ignores (GA names, and the
/// beta names still sent); any other is counted as unknown.
const KNOWN: &str = "error session.created session.updated conversation.created \
    conversation.item.added conversation.item.created conversation.item.done \
    conversation.item.retrieved conversation.item.truncated conversation.item.deleted \
    conversation.item.input_audio_transcription.delta \
    conversation.item.input_audio_transcription.segment \
    conversation.item.input_audio_transcription.completed \
    conversation.item.input_audio_transcription.failed \
    input_audio_buffer.committed input_audio_buffer.cleared input_audio_buffer.speech_started \
    input_audio_buffer.speech_stopped input_audio_buffer.timeout_triggered \
    output_audio_buffer.started output_audio_buffer.stopped output_audio_buffer.cleared \
    response.created response.done response.output_item.added response.output_item.done \
    response.content_part.added response.content_part.done \
    response.output_text.delta response.output_text.done response.text.delta response.text.done \
    response.output_audio.delta response.output_audio.done response.audio.delta response.audio.done \
    response.output_audio_transcript.delta response.output_audio_transcript.done \
    response.audio_transcript.delta response.audio_transcript.done \
    response.function_call_arguments.delta response.function_call_arguments.done \
    rate_limits.updated";

/// `kind` as the list spells it, if it is known.
fn known(kind: &str) -> Option<&'static str> {
    (!kind.is_empty())
        .then(|| KNOWN.split_ascii_whitespace().find(|known| *known == kind))
        .flatten()
}

/// A server event as a call acts on it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ServerEvent {
    /// Known, and nothing for the call to do.
    Ignored,
    /// What the caller said, trimmed and not empty.
    UserTranscript(String),
    /// Audio of `response`'s item `item`, decoded.
    Audio {
        response: String,
        item: String,
        pcm: Vec<u8>,
    },
    /// More of `response`'s transcript (or text).
    TextDelta {
        response: String,
        delta: String,
    },
    /// A function call item begins: its name, for when the arguments come.
    FunctionCallAdded {
        call_id: String,
        name: String,
    },
    /// A function call's arguments are complete.
    FunctionCall {
        call_id: String,
        /// When the event names it (it may not: see `FunctionCallAdded`).
        name: Option<String>,
        arguments: Value,
    },
    ResponseCreated {
        response: String,
    },
    ResponseDone {
        response: String,
        cancelled: bool,
    },
    SpeechStarted,
    SpeechStopped,
    Committed,
    /// An `error` event, in [`provider_error`]'s words.
    Error(String),
}

/// A server event's type (as [`KNOWN`] spells it) and what it says; `None`
/// when it is not JSON, of an unknown type, or audio that is not base64
/// (counted as unknown, never a failure: the API adds events).
pub(crate) fn decode(text: &str) -> Option<(&'static str, ServerEvent)> {
    let event = serde_json::from_str::<Value>(text).ok()?;
    let kind = known(text_of(&event, "type"))?;
    let owned = |field: &str| text_of(&event, field).to_owned();
    let decoded = match kind {
        "conversation.item.input_audio_transcription.completed" => {
            match text_of(&event, "transcript").trim() {
                "" => ServerEvent::Ignored,
                text => ServerEvent::UserTranscript(text.to_owned()),
            }
        }
        "response.output_audio.delta" | "response.audio.delta" => ServerEvent::Audio {
            pcm: BASE64.decode(text_of(&event, "delta")).ok()?,
            response: owned("response_id"),
            item: owned("item_id"),
        },
        "response.output_audio_transcript.delta"
        | "response.audio_transcript.delta"
        | "response.output_text.delta"
        | "response.text.delta" => ServerEvent::TextDelta {
            response: owned("response_id"),
            delta: owned("delta"),
        },
        "response.output_item.added" if text_of(&event["item"], "type") == "function_call" => {
            let item = &event["item"];
            ServerEvent::FunctionCallAdded {
                call_id: text_of(item, "call_id").to_owned(),
                name: text_of(item, "name").to_owned(),
            }
        }
        "response.function_call_arguments.done" => ServerEvent::FunctionCall {
            call_id: owned("call_id"),
            name: event["name"].as_str().map(str::to_owned),
            arguments: arguments(text_of(&event, "arguments")),
        },
        "response.created" => ServerEvent::ResponseCreated {
            response: text_of(&event["response"], "id").to_owned(),
        },
        "response.done" => {
            let done = &event["response"];
            ServerEvent::ResponseDone {
                response: text_of(done, "id").to_owned(),
                cancelled: text_of(done, "status") == "cancelled",
            }
        }
        "input_audio_buffer.speech_started" => ServerEvent::SpeechStarted,
        "input_audio_buffer.speech_stopped" => ServerEvent::SpeechStopped,
        "input_audio_buffer.committed" => ServerEvent::Committed,
        "error" => ServerEvent::Error(provider_error(&event)),
        _ => ServerEvent::Ignored,
    };
    Some((kind, decoded))
}

/// `{url}?model={model}`, the model percent-encoded.
pub(super) fn endpoint(url: &str, model: &str) -> String {
    format!("{url}?model={}", utf8_percent_encode(model, QUERY))
}

/// The format of every call: 24 kHz mono PCM16.
pub(super) fn effective() -> AudioFormat {
    AudioFormat {
        codec: PCM.to_owned(),
        sample_rate: RATE,
        channels: 1,
    }
}

/// The `session.update` every session of a call opens with.
pub(super) fn session_update(settings: &OpenAiRealtimeSettings, spec: &CallSpec) -> String {
    let format = json!({ "type": "audio/pcm", "rate": RATE });
    let mut output = json!({ "format": format });
    if let Some(voice) = &settings.voice {
        output["voice"] = json!(voice);
    }
    let tools: Vec<Value> = (spec.tools.iter())
        .map(|tool| {
            json!({
                "type": "function", "name": tool.name,
                "description": tool.description, "parameters": tool.parameters,
            })
        })
        .collect();
    json!({
        "type": "session.update",
        "session": {
            "type": "realtime",
            "instructions": spec.instructions,
            "audio": {
                "input": {
                    "format": format,
                    "transcription": { "model": settings.transcription_model },
                    "turn_detection": {
                        "type": "server_vad", "create_response": true, "interrupt_response": true,
                    },
                },
                "output": output,
            },
            "tools": tools,
        },
    })
    .to_string()
}

/// `input_audio_buffer.append`, written directly: base64 needs no escaping.
pub(super) fn append(pcm: &[u8]) -> String {
    let audio = BASE64.encode(pcm);
    format!(r#"{{"type":"input_audio_buffer.append","audio":"{audio}"}}"#)
}

pub(super) fn tool_output(call_id: &str, output: &str) -> String {
    let item = json!({ "type": "function_call_output", "call_id": call_id, "output": output });
    json!({ "type": "conversation.item.create", "item": item }).to_string()
}

pub(super) fn truncate(item_id: &str, audio_end_ms: u64) -> String {
    json!({
        "type": "conversation.item.truncate",
        "item_id": item_id, "content_index": 0, "audio_end_ms": audio_end_ms,
    })
    .to_string()
}

pub(super) fn simple(kind: &str) -> String {
    json!({ "type": kind }).to_string()
}

/// Who said a line of the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    User,
    Assistant,
}

/// A line of the transcript as a text item, seeding a new session.
pub(super) fn seed(role: Role, text: &str) -> String {
    let (role, kind) = match role {
        Role::User => ("user", "input_text"),
        Role::Assistant => ("assistant", "output_text"),
    };
    let content = json!([{ "type": kind, "text": text }]);
    let item = json!({ "type": "message", "role": role, "content": content });
    json!({ "type": "conversation.item.create", "item": item }).to_string()
}

fn text_of<'a>(event: &'a Value, field: &str) -> &'a str {
    event[field].as_str().unwrap_or("")
}

/// Tool-call arguments: `{}` when empty, the raw string (as a JSON string)
/// when not JSON.
pub(super) fn arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// A WebSocket failure in words that carry no body or URL.
pub(super) fn describe(error: &tungstenite::Error) -> String {
    use tungstenite::Error;
    match error {
        Error::Http(response) => format!("HTTP {}", response.status().as_u16()),
        Error::Io(e) => format!("I/O error ({})", e.kind()),
        Error::Tls(_) => "TLS failure".to_owned(),
        Error::Url(_) => "invalid URL".to_owned(),
        Error::ConnectionClosed | Error::AlreadyClosed => "connection closed".to_owned(),
        Error::Capacity(_) => "message too large".to_owned(),
        Error::Protocol(_) => "WebSocket protocol error".to_owned(),
        _ => "WebSocket error".to_owned(),
    }
}

/// A close by the provider: the code, never the reason.
pub(super) fn closed(code: Option<u16>) -> String {
    match code {
        Some(code) => format!("closed by the provider (close code {code})"),
        None => "closed by the provider".to_owned(),
    }
}

/// `provider error <type> (<code>)` of an `error` event; its `message` is
/// never read.
pub(super) fn provider_error(event: &Value) -> String {
    let error = &event["error"];
    let kind = token(error["type"].as_str().unwrap_or("unknown"));
    match error["code"].as_str() {
        Some(code) => format!("provider error {kind} ({})", token(code)),
        None => format!("provider error {kind}"),
    }
}

/// An identifier from the provider, kept to identifier characters.
fn token(raw: &str) -> String {
    (raw.chars())
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_types_are_the_ga_and_beta_names() {
        for kind in [
            "response.output_audio.delta",
            "response.audio.delta",
            "error",
        ] {
            assert_eq!(known(kind), Some(kind));
        }
        for kind in ["", "response", "response.audio", "error error", "x.y"] {
            assert_eq!(known(kind), None, "{kind}");
        }
    }

    #[test]
    fn events_decode_to_what_the_call_acts_on() {
        let audio = r#"{"type":"response.output_audio.delta","response_id":"r1","item_id":"i1","delta":"AAEC"}"#;
        assert_eq!(
            decode(audio),
            Some((
                "response.output_audio.delta",
                ServerEvent::Audio {
                    response: "r1".into(),
                    item: "i1".into(),
                    pcm: vec![0, 1, 2]
                }
            ))
        );
        let beta = r#"{"type":"response.audio_transcript.delta","response_id":"r1","delta":"Hi"}"#;
        assert_eq!(
            decode(beta).map(|d| d.1),
            Some(ServerEvent::TextDelta {
                response: "r1".into(),
                delta: "Hi".into()
            })
        );
        let blank =
            r#"{"type":"conversation.item.input_audio_transcription.completed","transcript":"  "}"#;
        assert_eq!(decode(blank).map(|d| d.1), Some(ServerEvent::Ignored));
        let call = r#"{"type":"response.function_call_arguments.done","call_id":"c","arguments":"{\"a\":1}"}"#;
        assert_eq!(
            decode(call).map(|d| d.1),
            Some(ServerEvent::FunctionCall {
                call_id: "c".into(),
                name: None,
                arguments: json!({ "a": 1 })
            })
        );
        let cancelled = r#"{"type":"response.done","response":{"id":"r1","status":"cancelled"}}"#;
        assert_eq!(
            decode(cancelled).map(|d| d.1),
            Some(ServerEvent::ResponseDone {
                response: "r1".into(),
                cancelled: true
            })
        );
        for unreadable in [
            "",
            "not json",
            r#"{"type":"response.new_thing"}"#,
            r#"{"type":"response.audio.delta","delta":"not base64!"}"#,
            r#"["error"]"#,
        ] {
            assert_eq!(decode(unreadable), None, "{unreadable}");
        }
    }

    #[test]
    fn provider_errors_keep_type_and_code_only() {
        let event = json!({ "type": "error", "error": {
            "type": "server_error", "code": "bad code\n{x}", "message": "SECRET",
        }});
        assert_eq!(
            provider_error(&event),
            "provider error server_error (badcodex)"
        );
        assert_eq!(provider_error(&json!({})), "provider error unknown");
    }

    #[test]
    fn arguments_parse_or_stay_raw() {
        assert_eq!(arguments(" "), json!({}));
        assert_eq!(arguments("{\"a\":1}"), json!({ "a": 1 }));
        assert_eq!(arguments("{\"a\":"), json!("{\"a\":"));
    }

    #[test]
    fn the_model_is_percent_encoded() {
        let url = endpoint("wss://h/v1/realtime", "gpt-realtime-mini_1.0~ é&=");
        assert_eq!(
            url,
            "wss://h/v1/realtime?model=gpt-realtime-mini_1.0~%20%C3%A9%26%3D"
        );
    }
}
