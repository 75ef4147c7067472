//! The hop between replicas: a `resume=S` that lands on a replica other
//! than the one holding S's call is relayed there (`relay.rs`), because a
//! realtime provider's session cannot move between processes.
//!
//! The receiving replica admits the client as any other (its credential,
//! the agent's gate) and checks the call's route names the same owner;
//! then it opens a WebSocket to the holder's [`HOP_PATH`] with the client's
//! query and `Authorization` header, signed with `replica.secret`. The
//! holder answers only a signed request (anything else is 404, as for a
//! path it does not serve), admits the forwarded credential again, and
//! upgrades only while it holds a call parked on S for that owner; it never
//! hops further. Whatever fails on the way (no route, another owner, the
//! holder gone or not answering within [`HOP_TIMEOUT`], no parked call
//! there) leaves the resume to the receiving replica: a fresh session, as a
//! resume of a call that has ended gets.

use std::net::IpAddr;
use std::time::Duration;

use agentwire_core::SessionId;
use axum::http::{HeaderMap, HeaderValue, header};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tungstenite::client::IntoClientRequest as _;
use tungstenite::protocol::WebSocketConfig;

use super::routes::HopSecret;
use crate::AppState;
use crate::metrics::CallHop;
use crate::socket;
use crate::upgrade::ClientAddress;

/// Where a replica takes hops, on its one listener.
pub(crate) const HOP_PATH: &str = "/internal/call-hop";
/// `<deadline>.<signature>`: the hop's signature and until when it holds.
const HOP_HEADER: &str = "x-agentwire-hop";
/// The client's address as the receiving replica saw it (`-`: unknown),
/// for the holder's per-address limits.
const HOP_CLIENT_HEADER: &str = "x-agentwire-hop-client";
/// How long a signature holds: the hop is made at once, so a captured
/// request cannot be replayed later (and replayed at once, it resumes the
/// call its own credential owns, as the client could).
const SIGNATURE_LIFE: Duration = Duration::from_secs(30);
/// Connecting to the holder and its upgrade, at most: a holder that is
/// gone costs a resume this long before it is served here.
pub(crate) const HOP_TIMEOUT: Duration = Duration::from_secs(2);

/// A hop to the holder of a call, upgraded.
pub(crate) type HopSocket = WebSocketStream<TcpStream>;

/// What a hop request says and its signature covers.
struct Signed<'a> {
    deadline: u64,
    client: &'a str,
    query: &'a str,
    authorization: &'a [u8],
}

impl Signed<'_> {
    fn mac(&self, secret: &HopSecret) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret.bytes()).expect("HMAC takes keys of any length");
        for part in [
            b"agentwire-call-hop-v1".as_slice(),
            self.deadline.to_string().as_bytes(),
            self.client.as_bytes(),
            self.query.as_bytes(),
            self.authorization,
        ] {
            // Lengths first: no two requests sign the same bytes.
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }
}

fn now_secs(state: &AppState) -> u64 {
    let nanos = state.engine().clock().now().unix_nanos();
    u64::try_from(nanos / 1_000_000_000).unwrap_or(0)
}

fn client_text(address: ClientAddress) -> String {
    address
        .0
        .map_or_else(|| "-".to_owned(), |ip| ip.to_string())
}

/// The hop to the replica holding the call `session` names, when it is
/// elsewhere and `owner`'s; `None`: the resume is this replica's to serve.
pub(crate) async fn towards_holder(
    state: &AppState,
    session: Option<&SessionId>,
    owner: Option<&str>,
    query: &str,
    headers: &HeaderMap,
    address: ClientAddress,
) -> Option<HopSocket> {
    let (links, session, owner) = (state.replicas()?, session?, owner?);
    if state.calls().is_parked(session, owner) {
        return None;
    }
    let route = match links.routes.find(session).await {
        Ok(route) => route?,
        Err(e) => {
            tracing::warn!(error = %e, "a call's route could not be read; the resume is served here");
            return None;
        }
    };
    if route.address == links.advertise {
        return None;
    }
    if route.owner != owner {
        // Another owner's call: it is not even told the call exists.
        return None;
    }
    let client = client_text(address);
    let hop = sign(&links.secret, now_secs(state), &client, query, headers);
    let request = HopRequest {
        address: &route.address,
        query,
        authorization: headers.get(header::AUTHORIZATION),
        hop,
        client: &client,
    };
    let why = match tokio::time::timeout(HOP_TIMEOUT, request.connect()).await {
        Ok(Ok(hop)) => {
            state.metrics().count_call_hop(CallHop::Relayed);
            return Some(hop);
        }
        Ok(Err(why)) => why,
        Err(_) => "no answer in time",
    };
    tracing::info!(holder = %route.address, why, "a call's resume could not hop to its holder; served here");
    state.metrics().count_call_hop(CallHop::Failed);
    None
}

/// The request a hop makes to the holder.
struct HopRequest<'a> {
    address: &'a str,
    query: &'a str,
    authorization: Option<&'a HeaderValue>,
    hop: String,
    client: &'a str,
}

impl HopRequest<'_> {
    /// Connects and upgrades; why not, in words for the log.
    async fn connect(self) -> Result<HopSocket, &'static str> {
        let url = format!("ws://{}{HOP_PATH}?{}", self.address, self.query);
        let mut request = url.into_client_request().map_err(|_| "bad address")?;
        let headers = request.headers_mut();
        if let Some(authorization) = self.authorization {
            headers.insert(header::AUTHORIZATION, authorization.clone());
        }
        let hop = HeaderValue::from_str(&self.hop).map_err(|_| "bad signature")?;
        headers.insert(HOP_HEADER, hop);
        let client = HeaderValue::from_str(self.client).map_err(|_| "bad address")?;
        headers.insert(HOP_CLIENT_HEADER, client);
        let stream = TcpStream::connect(self.address)
            .await
            .map_err(|_| "holder unreachable")?;
        // Audio: no Nagle delay on the way.
        let _ = stream.set_nodelay(true);
        let config = WebSocketConfig::default()
            .read_buffer_size(socket::READ_BUFFER_BYTES)
            .write_buffer_size(socket::WRITE_BUFFER_BYTES);
        match tokio_tungstenite::client_async_with_config(request, stream, Some(config)).await {
            Ok((hop, _)) => Ok(hop),
            Err(tungstenite::Error::Http(response)) if response.status() == 404 => {
                Err("no parked call there")
            }
            Err(_) => Err("upgrade refused"),
        }
    }
}

/// The [`HOP_HEADER`] of a hop for `client` with the client's `query`
/// and `Authorization` header (in `headers`), signed at `now` (seconds).
fn sign(secret: &HopSecret, now: u64, client: &str, query: &str, headers: &HeaderMap) -> String {
    let signed = Signed {
        deadline: now + SIGNATURE_LIFE.as_secs(),
        client,
        query,
        authorization: authorization(headers),
    };
    let signature = hex(&signed.mac(secret).finalize().into_bytes());
    format!("{}.{signature}", signed.deadline)
}

fn authorization(headers: &HeaderMap) -> &[u8] {
    headers
        .get(header::AUTHORIZATION)
        .map_or(&[][..], HeaderValue::as_bytes)
}

/// The client's address a hop request carries, if it is a hop this
/// deployment signed and its signature still holds; `None` for anything
/// else (answered as a path the server does not serve).
pub(crate) fn verify(state: &AppState, query: &str, headers: &HeaderMap) -> Option<ClientAddress> {
    let links = state.replicas()?;
    check(&links.secret, now_secs(state), query, headers)
}

/// [`verify`] at `now` (seconds).
fn check(secret: &HopSecret, now: u64, query: &str, headers: &HeaderMap) -> Option<ClientAddress> {
    let (deadline, signature) = headers.get(HOP_HEADER)?.to_str().ok()?.split_once('.')?;
    let deadline: u64 = deadline.parse().ok()?;
    // Not expired, and not signed for longer than a hop's life (a clock
    // far ahead on the signer would make a long-lived replay).
    if deadline < now || deadline > now + 2 * SIGNATURE_LIFE.as_secs() {
        return None;
    }
    let client = headers.get(HOP_CLIENT_HEADER)?.to_str().ok()?;
    let signed = Signed {
        deadline,
        client,
        query,
        authorization: authorization(headers),
    };
    let signature = unhex(signature)?;
    signed.mac(secret).verify_slice(&signature).ok()?;
    Some(ClientAddress(client.parse::<IpAddr>().ok()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests;
