//! permessage-deflate (RFC 7692): the offer a client makes in
//! `Sec-WebSocket-Extensions`, the one the server accepts and its answer.
//! The compression itself is in `codec` (a message compressed whole on
//! the way out, inflated frame by frame on the way in) and `inflating`
//! (the inflation below tungstenite, which refuses RSV1 frames).
//!
//! Every offer the server cannot take is declined, never refused: the
//! handshake then goes on without the extension (§5: "the server ... MUST
//! decline"; a refused upgrade would cost a browser its socket over a
//! header it sends by default).

use axum::http::HeaderValue;

pub(crate) mod codec;
pub(crate) mod inflating;

/// The extension's name in the header.
const EXTENSION: &str = "permessage-deflate";

/// The largest LZ77 window, 32 KiB (§7.1.2.1).
pub const MAX_WINDOW_BITS: u8 = 15;

/// The server's window unless configured: 4 KiB. zlib-rs's compressor
/// holds 161 KiB at 12 bits against 371 KiB at 15, and a streamed turn's
/// frames compress to 9.6% of their size instead of 9.0%.
pub const DEFAULT_WINDOW_BITS: u8 = 12;

/// The smallest window the server compresses with. zlib (and zlib-rs)
/// cannot keep a raw deflate stream within a 256-byte window (they turn
/// 8 into 9), so an offer that asks `server_max_window_bits=8` is declined.
pub const MIN_WINDOW_BITS: u8 = 9;

/// What `server.websocket.compression` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compression {
    /// Negotiate permessage-deflate at all; off, every offer is declined.
    pub enabled: bool,
    /// Whether a compression context may carry over from one message to
    /// the next, in either direction (what makes small streamed frames
    /// compress, at the cost of a compressor and a decompressor held per
    /// connection). [`Takeover::Reset`] answers every offer with
    /// `server_no_context_takeover` and `client_no_context_takeover`.
    pub context_takeover: Takeover,
    /// The server's LZ77 window, 9 to 15 bits (the compressor's memory
    /// grows with it).
    pub max_window_bits: u8,
}

impl Default for Compression {
    fn default() -> Compression {
        Compression {
            enabled: true,
            context_takeover: Takeover::Keep,
            max_window_bits: DEFAULT_WINDOW_BITS,
        }
    }
}

/// Whether a direction's compression context outlives its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takeover {
    /// Kept: each message may refer back to the ones before it.
    Keep,
    /// Reset after every message: no state is held between messages.
    Reset,
}

/// The parameters both ends agreed on for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Agreement {
    /// The window the server compresses with.
    pub(crate) server_window_bits: u8,
    /// Whether the server's compression context carries over.
    pub(crate) server_takeover: Takeover,
    /// Whether the client's does (so whether the server's decompressor
    /// must be kept between messages).
    pub(crate) client_takeover: Takeover,
    /// `server_max_window_bits` goes in the answer: the offer had it (the
    /// answer must then carry it, §7.1.2.1) or the server uses less than
    /// 15 bits.
    announce_window: bool,
}

impl Agreement {
    /// The `Sec-WebSocket-Extensions` value that accepts the offer.
    pub(crate) fn response_header(&self) -> HeaderValue {
        let mut value = EXTENSION.to_owned();
        if self.server_takeover == Takeover::Reset {
            value.push_str("; server_no_context_takeover");
        }
        if self.client_takeover == Takeover::Reset {
            value.push_str("; client_no_context_takeover");
        }
        if self.announce_window {
            value.push_str(&format!(
                "; server_max_window_bits={}",
                self.server_window_bits
            ));
        }
        HeaderValue::from_str(&value).expect("the answer is ASCII: fixed names and a number")
    }
}

/// The first of the client's offers (every `Sec-WebSocket-Extensions`
/// header, in order) that `settings` can take, with what was agreed; `None`
/// when there is none (or compression is off): no extension then.
pub(crate) fn negotiate<'a>(
    headers: impl IntoIterator<Item = &'a HeaderValue>,
    settings: &Compression,
) -> Option<Agreement> {
    if !settings.enabled {
        return None;
    }
    headers
        .into_iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(split_outside_quotes(','))
        .filter_map(Offer::parse)
        .find_map(|offer| offer.accept(settings))
}

/// One `permessage-deflate` offer, its parameters checked (§7.1).
#[derive(Debug, Default, PartialEq, Eq)]
struct Offer {
    server_no_context_takeover: bool,
    client_no_context_takeover: bool,
    server_max_window_bits: Option<u8>,
    /// `Some(None)`: offered without a value (the client can be told a
    /// window); the server's decompressor takes any window, so the value
    /// is never asked for.
    client_max_window_bits: Option<Option<u8>>,
}

impl Offer {
    /// The offer in one element of the extension list, or `None` for
    /// another extension or an offer the RFC says to decline: an unknown
    /// parameter, one given twice, or a value out of its range.
    fn parse(element: &str) -> Option<Offer> {
        let mut parts = split_outside_quotes(';')(element);
        if !parts.next()?.eq_ignore_ascii_case(EXTENSION) {
            return None;
        }
        let mut offer = Offer::default();
        let mut seen = Vec::new();
        for param in parts {
            let (name, value) = match param.split_once('=') {
                Some((name, value)) => (name.trim(), Some(unquote(value.trim())?)),
                None => (param, None),
            };
            let name = name.to_ascii_lowercase();
            if seen.contains(&name) {
                return None;
            }
            match (name.as_str(), value) {
                ("server_no_context_takeover", None) => offer.server_no_context_takeover = true,
                ("client_no_context_takeover", None) => offer.client_no_context_takeover = true,
                ("server_max_window_bits", Some(bits)) => {
                    offer.server_max_window_bits = Some(window_bits(&bits)?);
                }
                ("client_max_window_bits", None) => offer.client_max_window_bits = Some(None),
                ("client_max_window_bits", Some(bits)) => {
                    offer.client_max_window_bits = Some(Some(window_bits(&bits)?));
                }
                _ => return None,
            }
            seen.push(name);
        }
        Some(offer)
    }

    /// What the server agrees to for this offer under `settings`, or `None`
    /// when it cannot honour it.
    fn accept(&self, settings: &Compression) -> Option<Agreement> {
        let server_window_bits = match self.server_max_window_bits {
            Some(bits) if bits < MIN_WINDOW_BITS => return None,
            Some(bits) => bits.min(settings.max_window_bits),
            None => settings.max_window_bits,
        };
        let takeover = |asked_reset: bool| match (asked_reset, settings.context_takeover) {
            (true, _) | (_, Takeover::Reset) => Takeover::Reset,
            (false, Takeover::Keep) => Takeover::Keep,
        };
        Some(Agreement {
            server_window_bits,
            server_takeover: takeover(self.server_no_context_takeover),
            // A client that offers `client_no_context_takeover` says it will
            // not use its context (§7.1.1.2); echoing it binds the client to
            // that, so the server can drop its decompressor per message.
            client_takeover: takeover(self.client_no_context_takeover),
            announce_window: self.server_max_window_bits.is_some()
                || server_window_bits < MAX_WINDOW_BITS,
        })
    }
}

/// A window size: a decimal 8 to 15, no leading zero (§7.1.2.1).
fn window_bits(value: &str) -> Option<u8> {
    if value.starts_with('0') || value.len() > 2 {
        return None;
    }
    let bits: u8 = value.parse().ok()?;
    (8..=MAX_WINDOW_BITS).contains(&bits).then_some(bits)
}

/// A parameter's value as a token or a quoted string (RFC 6455 §9.1 allows
/// both), unescaped; `None` for an unterminated quote.
fn unquote(value: &str) -> Option<String> {
    let Some(inner) = value.strip_prefix('"') else {
        return Some(value.to_owned());
    };
    let inner = inner.strip_suffix('"')?;
    let mut unescaped = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        unescaped.push(if c == '\\' { chars.next()? } else { c });
    }
    Some(unescaped)
}

/// Splits on `separator` where it is not inside a quoted string, trimming
/// each part and skipping empty ones (a list may have empty elements, RFC
/// 9110 §5.6.1).
fn split_outside_quotes(separator: char) -> impl Fn(&str) -> std::vec::IntoIter<&str> {
    move |text: &str| {
        let mut parts = Vec::new();
        let (mut start, mut quoted, mut escaped) = (0, false, false);
        for (at, c) in text.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                c if c == separator && !quoted => {
                    parts.push(&text[start..at]);
                    start = at + c.len_utf8();
                }
                _ => {}
            }
        }
        parts.push(&text[start..]);
        parts.retain(|part| !part.trim().is_empty());
        parts
            .into_iter()
            .map(str::trim)
            .collect::<Vec<_>>()
            .into_iter()
    }
}

#[cfg(test)]
mod tests;

/// `len` bytes that do not compress (xorshift from `seed`): what the
/// codec tests feed a window or a frame limit.
#[cfg(test)]
pub(crate) fn incompressible(mut seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed.to_le_bytes()[0]
        })
        .collect()
}
