//! `server.websocket`: the WebSocket protocol below the dialects:
//! permessage-deflate, and the echo conformance suites run against.

use agentwire_server::{Compression, Takeover, WebSocketSettings};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;

/// `server.websocket`.
#[derive(Deserialize, Serialize, JsonSchema, Default)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawWebSocket {
    /// permessage-deflate (RFC 7692) on every WebSocket route, when the
    /// client offers it (browsers do).
    compression: RawCompression,
    /// Every socket echoes each text and binary message back unchanged,
    /// in place of its dialect (after the same upgrade checks): for
    /// conformance suites such as Autobahn's (`scripts/autobahn.sh`),
    /// never for serving agents. Default: `false`.
    echo_frames: bool,
}

/// `server.websocket.compression`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
struct RawCompression {
    /// Accept a client's permessage-deflate offer. Default: `true`.
    enabled: bool,
    /// Keep each direction's compression context from one message to the
    /// next: a streamed turn's frames shrink to about a tenth, for about
    /// 160 KiB (the compressor, at 12 window bits) and 46 KiB (the
    /// decompressor, once the client has sent a compressed message) held
    /// by each connection that uses compression. `false` answers with
    /// `server_no_context_takeover` and `client_no_context_takeover`: a
    /// connection holds compression state only while a message is
    /// (de)compressed, and messages under 1 KiB go uncompressed (without a
    /// context they hardly shrink). Default: `true`.
    context_takeover: bool,
    /// The server's LZ77 window, 9 to 15 bits (512 B to 32 KiB): its
    /// compressor holds about 134 KiB at 9 bits, 161 KiB at 12 and
    /// 371 KiB at 15; a smaller window compresses a little less. A
    /// client's lower `server_max_window_bits` wins. Default: 12.
    max_window_bits: u8,
}

impl Default for RawCompression {
    fn default() -> RawCompression {
        let defaults = Compression::default();
        RawCompression {
            enabled: defaults.enabled,
            context_takeover: defaults.context_takeover == Takeover::Keep,
            max_window_bits: defaults.max_window_bits,
        }
    }
}

pub(super) fn validate(raw: RawWebSocket) -> Result<WebSocketSettings, ConfigError> {
    let compression = raw.compression;
    if !(agentwire_server::MIN_WINDOW_BITS..=agentwire_server::MAX_WINDOW_BITS)
        .contains(&compression.max_window_bits)
    {
        return Err(ConfigError::new(
            "server.websocket.compression.max_window_bits",
            format!(
                "must be {} to {}",
                agentwire_server::MIN_WINDOW_BITS,
                agentwire_server::MAX_WINDOW_BITS
            ),
        ));
    }
    Ok(WebSocketSettings {
        compression: Compression {
            enabled: compression.enabled,
            context_takeover: match compression.context_takeover {
                true => Takeover::Keep,
                false => Takeover::Reset,
            },
            max_window_bits: compression.max_window_bits,
        },
        echo_frames: raw.echo_frames,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<crate::config::Config, ConfigError> {
        let text = format!("{yaml}\nagents:\n  - name: echo\n    handler: echo\n");
        crate::config::parse(&text, |_| None)
    }

    #[test]
    fn compression_is_on_with_context_takeover_by_default() {
        let config = parse("").unwrap();
        assert_eq!(config.websocket.compression, Compression::default());
        assert!(config.websocket.compression.enabled);
        assert_eq!(
            config.websocket.compression.context_takeover,
            Takeover::Keep
        );
        assert!(!config.websocket.echo_frames);
    }

    #[test]
    fn compression_settings_are_read() {
        let config = parse(
            "server:\n  websocket:\n    compression: {enabled: true, context_takeover: false, max_window_bits: 10}\n    echo_frames: true",
        )
        .unwrap();
        let compression = config.websocket.compression;
        assert_eq!(compression.context_takeover, Takeover::Reset);
        assert_eq!(compression.max_window_bits, 10);
        assert!(config.websocket.echo_frames);
    }

    #[test]
    fn a_window_out_of_range_names_the_key() {
        for bits in [8, 16] {
            let error = parse(&format!(
                "server:\n  websocket:\n    compression:\n      max_window_bits: {bits}"
            ))
            .unwrap_err();
            assert_eq!(error.key, "server.websocket.compression.max_window_bits");
        }
    }
}
