//! The web console: a small, dependency-free Omnia client (vanilla HTML,
//! CSS and ES modules under `crates/agentwire-server/console/`, on the
//! project's TypeScript client, whose bundle `agentwire-client.js` the
//! client's build copies there), embedded in
//! the binary with `include_str!` and served at `GET /` and
//! `GET /console/{file}`. `server.console: false` leaves every route of this
//! module out (404).
//!
//! Every asset is answered with its `Content-Type`, `X-Content-Type-Options:
//! nosniff`, a strict `Content-Security-Policy` (scripts and styles from this
//! origin only, no inline script; sockets to this origin; images and media
//! from this origin, `blob:` and `data:`; no plugins, no framing), an `ETag`
//! (a hash of the file, computed at compile time) with `Cache-Control:
//! no-cache`, so a browser revalidates and gets `304` while the binary is
//! unchanged. HEAD works as GET without the body (axum's `get`).
//!
//! `GET /console/ws` is `/ws` for browsers, which cannot set headers on a
//! WebSocket: its query parameter `access_token` becomes the `Authorization:
//! Bearer` credential (a header already present wins) and is removed from
//! the query; everything else is exactly `/ws`'s upgrade. The console uses it
//! only when a credential was typed in.

use std::sync::Arc;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;
use crate::omnia::upgrade::ws_upgrade;
use crate::query::QueryParams;
use crate::upgrade::ClientAddress;
use crate::websocket::{WebSocketUpgrade, WebSocketUpgradeRejection};

/// The console's policy: nothing but this origin's own files; sockets to any
/// host (`ws:`/`wss:`, as `'self'` does not name the socket schemes in every
/// browser); media the console builds from frames (`blob:`, `data:`).
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' blob: data:; media-src 'self' blob: data:; \
     connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The query parameter `/console/ws` turns into `Authorization: Bearer`.
const ACCESS_TOKEN: &str = "access_token";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
    etag: &'static str,
}

macro_rules! asset {
    ($name:literal, $content_type:literal) => {{
        const BODY: &str = include_str!(concat!("../../console/", $name));
        const HASH: [u8; 18] = etag_of(BODY.as_bytes());
        Asset {
            name: $name,
            content_type: $content_type,
            body: BODY,
            etag: match std::str::from_utf8(&HASH) {
                Ok(etag) => etag,
                Err(_) => panic!("an ETag is ASCII"),
            },
        }
    }};
}

/// Every file of the console; `index.html` is also `GET /`.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("console.js", "text/javascript; charset=utf-8"),
    asset!("page.js", "text/javascript; charset=utf-8"),
    asset!("bubbles.js", "text/javascript; charset=utf-8"),
    asset!("sessions.js", "text/javascript; charset=utf-8"),
    asset!("memory.js", "text/javascript; charset=utf-8"),
    // The project's TypeScript client (clients/typescript), bundled by its
    // build into one ES module; the console has no socket code of its own.
    asset!("agentwire-client.js", "text/javascript; charset=utf-8"),
    asset!("markdown.js", "text/javascript; charset=utf-8"),
    asset!("tools.js", "text/javascript; charset=utf-8"),
    asset!("media.js", "text/javascript; charset=utf-8"),
    asset!("voice.js", "text/javascript; charset=utf-8"),
    // The microphone tap, loaded with `audioWorklet.addModule` (a worklet
    // is governed by `script-src 'self'`, like the modules).
    asset!("voice-worklet.js", "text/javascript; charset=utf-8"),
];

/// `"` + 16 hex digits of the FNV-1a 64-bit hash of `bytes` + `"`: a strong
/// validator that changes whenever the file does.
const fn etag_of(bytes: &[u8]) -> [u8; 18] {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [b'"'; 18];
    let mut d = 0;
    while d < 16 {
        out[1 + d] = HEX[((hash >> (60 - 4 * d)) & 0xf) as usize];
        d += 1;
    }
    out
}

/// The console's routes, or none when it is switched off.
pub(crate) fn routes(enabled: bool) -> Router<Arc<AppState>> {
    if !enabled {
        return Router::new();
    }
    assets().route("/console/ws", get(socket))
}

/// The static files alone (no state needed).
fn assets<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|headers: HeaderMap| async move { serve("index.html", &headers) }))
        .route(
            "/console/{file}",
            get(
                |axum::extract::Path(file): axum::extract::Path<String>, headers: HeaderMap| async move {
                    serve(&file, &headers)
                },
            ),
        )
}

fn serve(name: &str, request: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "not found\n",
        )
            .into_response();
    };
    let fresh = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.trim_start_matches("W/") == asset.etag
        });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.body,
        )
            .into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, HeaderValue::from_static(asset.etag));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// `/console/ws`: `/ws` with `?access_token=` as the bearer credential.
async fn socket(
    state: State<Arc<AppState>>,
    RawQuery(raw_query): RawQuery,
    mut headers: HeaderMap,
    address: ClientAddress,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let token = QueryParams::parse(raw_query.as_deref())
        .first(ACCESS_TOKEN)
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    if let Some(token) = token
        && !headers.contains_key(header::AUTHORIZATION)
    {
        match HeaderValue::from_str(&format!("Bearer {token}")) {
            Ok(value) => {
                headers.insert(header::AUTHORIZATION, value);
            }
            // Not a header value (a control character): no credential a
            // validator could accept either.
            Err(_) => return (StatusCode::UNAUTHORIZED, "unauthorized\n").into_response(),
        }
    }
    let query = raw_query.map(|raw| without_access_token(&raw));
    ws_upgrade(state, RawQuery(query), headers, address, upgrade).await
}

/// `raw` without its `access_token` pairs, so the credential goes no
/// further than this function.
fn without_access_token(raw: &str) -> String {
    raw.split('&')
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(k, _)| k);
            key != ACCESS_TOKEN
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    async fn serve_router(router: Router) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        addr
    }

    /// Status line, lowercased header lines and body of one request.
    async fn request(
        addr: SocketAddr,
        method: &str,
        path: &str,
        extra: &str,
    ) -> (u16, String, String) {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request =
            format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        let response = String::from_utf8(response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head[9..12].parse().unwrap();
        (status, head.to_ascii_lowercase(), body.to_owned())
    }

    fn header_value<'a>(head: &'a str, name: &str) -> Option<&'a str> {
        head.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(": "))
    }

    #[tokio::test]
    async fn assets_have_their_types_and_the_security_headers() {
        let addr = serve_router(assets()).await;
        for (path, content_type, marker) in [
            (
                "/",
                "text/html; charset=utf-8",
                "data-testid=\"transcript\"",
            ),
            (
                "/console/index.html",
                "text/html; charset=utf-8",
                "<!doctype html>",
            ),
            (
                "/console/console.js",
                "text/javascript; charset=utf-8",
                "import ",
            ),
            (
                "/console/markdown.js",
                "text/javascript; charset=utf-8",
                "export function",
            ),
            ("/console/console.css", "text/css; charset=utf-8", "{"),
            (
                "/console/voice.js",
                "text/javascript; charset=utf-8",
                "export class voicecall",
            ),
            (
                "/console/voice-worklet.js",
                "text/javascript; charset=utf-8",
                "registerprocessor(",
            ),
        ] {
            let (status, head, body) = request(addr, "GET", path, "").await;
            assert_eq!(status, 200, "{path}");
            assert_eq!(
                header_value(&head, "content-type"),
                Some(content_type),
                "{path}"
            );
            assert_eq!(
                header_value(&head, "x-content-type-options"),
                Some("nosniff")
            );
            assert_eq!(header_value(&head, "cache-control"), Some("no-cache"));
            let csp = header_value(&head, "content-security-policy").unwrap();
            for directive in [
                "script-src 'self'",
                "style-src 'self'",
                "connect-src 'self' ws: wss:",
                "img-src 'self' blob: data:",
                "media-src 'self' blob: data:",
                "object-src 'none'",
                "frame-ancestors 'none'",
            ] {
                assert!(csp.contains(directive), "{path}: {directive} in {csp}");
            }
            assert!(
                !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
                "{csp}"
            );
            assert!(
                body.to_ascii_lowercase().contains(marker),
                "{path} body has {marker}"
            );
            assert!(
                header_value(&head, "etag").is_some_and(|e| e.len() == 18),
                "{path}"
            );
        }
    }

    #[tokio::test]
    async fn the_page_has_no_inline_script_or_style() {
        let html = ASSETS[0].body.to_ascii_lowercase();
        assert_eq!(html.matches("<script").count(), 1, "one script element");
        assert!(html.contains("<script type=\"module\" src=\"/console/console.js\"></script>"));
        assert!(!html.contains("<style") && !html.contains(" style="));
        let handlers = html.match_indices(" on").filter(|(at, _)| {
            let name: String = html[at + 3..]
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .collect();
            !name.is_empty() && html[at + 3 + name.len()..].starts_with('=')
        });
        assert_eq!(handlers.count(), 0, "no inline event handler attributes");
    }

    #[test]
    fn no_script_writes_markup() {
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            for sink in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
            ] {
                assert!(!asset.body.contains(sink), "{} uses {sink}", asset.name);
            }
        }
    }

    #[tokio::test]
    async fn head_etag_revalidation_and_unknown_files() {
        let addr = serve_router(assets()).await;
        let (status, head, body) = request(addr, "HEAD", "/console/console.js", "").await;
        assert_eq!(status, 200);
        assert!(body.is_empty(), "HEAD has no body");
        let etag = header_value(&head, "etag").unwrap().to_owned();
        let (status, head, body) = request(
            addr,
            "GET",
            "/console/console.js",
            &format!("If-None-Match: {etag}\r\n"),
        )
        .await;
        assert_eq!(status, 304);
        assert!(body.is_empty());
        assert_eq!(header_value(&head, "etag"), Some(etag.as_str()));
        let (status, ..) = request(
            addr,
            "GET",
            "/console/console.js",
            "If-None-Match: \"0000000000000000\"\r\n",
        )
        .await;
        assert_eq!(status, 200, "another tag is stale");
        for path in [
            "/console/nope.js",
            "/console/",
            "/console/../Cargo.toml",
            "/console/a/b",
        ] {
            let (status, ..) = request(addr, "GET", path, "").await;
            assert_eq!(status, 404, "{path}");
        }
    }

    #[tokio::test]
    async fn switched_off_there_are_no_routes() {
        assert!(!routes(false).has_routes());
        assert!(routes(true).has_routes());
    }

    #[test]
    fn etags_differ_between_files_and_the_access_token_is_stripped() {
        let tags: std::collections::HashSet<_> = ASSETS.iter().map(|a| a.etag).collect();
        assert_eq!(tags.len(), ASSETS.len());
        assert_eq!(
            without_access_token("agent=a&access_token=s3cret&stream=2&access_token"),
            "agent=a&stream=2"
        );
        assert_eq!(without_access_token("agent=a"), "agent=a");
    }
}
