//! What large messages cost the real binary: at the default inbound budget,
//! several 15 MiB messages sent at once keep the server's peak memory
//! within what the budget counts (each message admitted at
//! `InboundBudget::COST_PER_BYTE` times its size, each refused one its
//! frame), and those over the budget are told `RATE_LIMITED` "server busy"
//! on sockets that stay usable. RSS is read from `/proc`, so Linux only.

#![cfg(target_os = "linux")]

use std::net::SocketAddr;
use std::time::Duration;

use agentwire_server::InboundBudget;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::{
    Client, Dialect, agentwire_serve, assert_error, http_get, metric, start_child,
};

const MIB: usize = 1024 * 1024;
const SIZE: usize = 15 * MIB;
/// `server.limits.inbound_bytes_in_flight` when the config leaves it out.
const DEFAULT_BUDGET: usize = 256 * MIB;
/// Sockets over the budget, beside the ones it admits.
const REFUSED: usize = 3;
const BUSY: &str = "server busy: too many large messages in flight; send it again shortly";
/// RSS is noisy (allocator arenas, page granularity, the runtime's own
/// buffers): the peak may pass the bound by this much.
const SLACK: usize = 24 * MIB;

/// `VmRSS` and `VmHWM` (the peak) of process `pid`, in bytes.
fn memory(pid: u32) -> (usize, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .map(|kb| kb.trim().parse::<usize>().unwrap() * 1024)
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

async fn omnia(address: &str) -> Client {
    let request = format!("ws://{address}/ws?agent=test-agent")
        .into_client_request()
        .unwrap();
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut client = Client::new(ws, Dialect::Omnia);
    let connected = client.recv().await;
    assert_eq!(connected["type"], "connected", "{connected}");
    client
}

async fn gnosari(address: &str) -> Client {
    let request = format!("ws://{address}/ws/agent/test-agent")
        .into_client_request()
        .unwrap();
    let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    Client::new(ws, Dialect::Gnosari)
}

async fn in_flight(address: SocketAddr) -> usize {
    let (_, metrics) = http_get(address, "/metrics").await;
    metric(&metrics, "agentwire_inbound_bytes_in_flight") as usize
}

/// The test handler's `slow` script holds the turn, and its message's
/// bytes, for 2 s, then answers `done: <content>`.
fn slow(content: &str) -> Value {
    json!({"type": "message", "content": content, "metadata": {"mock_scenario": "slow"}})
}

/// A server on SQLite with the test agent at the default limits; its
/// process, its address, and the address parsed for HTTP.
async fn default_server(dir: &std::path::Path) -> (tokio::process::Child, String, SocketAddr) {
    let config = dir.join("agentwire.yaml");
    let db = dir.join("agentwire.db");
    std::fs::write(
        &config,
        format!(
            "server:\n  listen: 127.0.0.1:0\nstorage:\n  sessions: sqlite://{}\nagents:\n  - name: test-agent\n    handler: test\n",
            db.display()
        ),
    )
    .unwrap();
    let (child, address, mut log) = start_child(agentwire_serve(&config)).await;
    tokio::spawn(async move { while let Ok(Some(_)) = log.next_line().await {} });
    let http: SocketAddr = address.parse().unwrap();
    (child, address, http)
}

/// `admitted` Omnia clients whose large messages fit the budget, and
/// [`REFUSED`] more (the last on the Gnosari endpoint: the same budget),
/// each having run one small turn, so what a first turn builds is built.
async fn warmed_clients(address: &str, admitted: usize) -> (Vec<Client>, Vec<Client>) {
    let mut taken = Vec::new();
    for _ in 0..admitted {
        taken.push(omnia(address).await);
    }
    let mut over = Vec::new();
    for i in 0..REFUSED {
        over.push(match i + 1 == REFUSED {
            true => gnosari(address).await,
            false => omnia(address).await,
        });
    }
    taken[0].say("warm").await;
    assert_eq!(taken[0].recv().await["type"], "done");
    over[REFUSED - 1]
        .send_json(json!({"message": "warm"}))
        .await;
    over[REFUSED - 1].recv_gnosari_turn().await;
    (taken, over)
}

/// Sends the large message on every admitted client and waits until they
/// hold their turns (2 s): everything sent from then on is over the budget.
async fn send_admitted(http: SocketAddr, taken: &mut [Client], frame: &str) {
    futures_util::future::join_all(taken.iter_mut().map(|c| c.send_text(frame))).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while in_flight(http).await < taken.len() * SIZE {
        assert!(tokio::time::Instant::now() < deadline, "never in flight");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends the large message on every client over the budget (the Gnosari
/// one in its own form); each is refused busy.
async fn send_refused(over: &mut [Client], omnia_frame: &str, large: &str) {
    let gnosari_frame =
        json!({"message": large, "metadata": {"mock_scenario": "slow"}}).to_string();
    futures_util::future::join_all(over.iter_mut().enumerate().map(|(i, c)| {
        let frame = if i + 1 == REFUSED {
            &gnosari_frame
        } else {
            omnia_frame
        };
        c.send_text(frame)
    }))
    .await;
    for client in &mut over[..REFUSED - 1] {
        let refused = client.recv().await;
        assert_error(&refused, "RATE_LIMITED", BUSY);
    }
    let refused = over[REFUSED - 1].recv_event().await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["error"], BUSY, "{refused}");
}

/// Every refused socket still takes a small message.
async fn assert_refused_sockets_usable(over: &mut [Client]) {
    for client in &mut over[..REFUSED - 1] {
        client.say("small").await;
        let done = client.recv().await;
        assert_eq!(done["content"], "echo: small", "{done}");
    }
    over[REFUSED - 1]
        .send_json(json!({"message": "small"}))
        .await;
    let events = over[REFUSED - 1].recv_gnosari_turn().await;
    let completed = events.last().unwrap();
    assert_eq!(completed["type"], "agent_completed", "{events:?}");
    assert_eq!(completed["full_response"], "echo: small");
}

#[tokio::test]
async fn large_messages_at_once_stay_within_the_default_budget_and_the_rest_are_told_busy() {
    let dir = tempfile::tempdir().unwrap();
    let (child, address, http) = default_server(dir.path()).await;
    let pid = child.id().unwrap();
    let admitted = DEFAULT_BUDGET / (SIZE * InboundBudget::COST_PER_BYTE);
    assert!(admitted >= 1, "the default budget takes a 15 MiB message");
    let (mut taken, mut over) = warmed_clients(&address, admitted).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (before, _) = memory(pid);

    let large = "a".repeat(SIZE);
    let frame = slow(&large).to_string();
    send_admitted(http, &mut taken, &frame).await;
    send_refused(&mut over, &frame, &large).await;
    for client in &mut taken {
        let done = client.recv().await;
        assert_eq!(done["type"], "done", "{}", done["type"]);
        assert_eq!(done["content"].as_str().map(str::len), Some(SIZE + 6));
    }
    let (_, peak) = memory(pid);
    let growth = peak.saturating_sub(before);
    let bound = admitted * SIZE * InboundBudget::COST_PER_BYTE + REFUSED * SIZE;
    assert!(
        growth <= bound + SLACK,
        "peak RSS grew {} MiB, over the {} MiB the budget counts (+{} MiB slack)",
        growth / MIB,
        bound / MIB,
        SLACK / MIB
    );

    assert_refused_sockets_usable(&mut over).await;
    let (_, metrics) = http_get(http, "/metrics").await;
    assert_eq!(
        metric(&metrics, "agentwire_inbound_refused_total"),
        REFUSED as f64
    );
    assert_eq!(in_flight(http).await, 0, "every permit given back");
    drop(child);
}
