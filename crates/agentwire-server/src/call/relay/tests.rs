//! The relay between a client (channels, as the dialects' tests drive a
//! connection) and a holder on a real local socket.

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tungstenite::protocol::CloseFrame;
use tungstenite::protocol::frame::coding::CloseCode;

use super::run;
use crate::connection::testing::{Harness, TestClient};
use crate::websocket::Message;

/// The holder's end of a hop, and the client relayed to it.
async fn relayed() -> (WebSocketStream<TcpStream>, TestClient) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let accepting = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        tokio_tungstenite::accept_async(stream).await.unwrap()
    });
    let stream = TcpStream::connect(address).await.unwrap();
    let (hop, _) = tokio_tungstenite::client_async(format!("ws://{address}/"), stream)
        .await
        .unwrap();
    let holder = accepting.await.unwrap();
    let harness = Harness::new(|_| {});
    let slot = harness.slot();
    let client = TestClient::connect(|socket| run(socket, slot, hop));
    (holder, client)
}

/// The holder's next data or close frame.
async fn from_client(holder: &mut WebSocketStream<TcpStream>) -> Option<Message> {
    loop {
        match holder.next().await {
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(message)) => return Some(message),
            Some(Err(_)) | None => return None,
        }
    }
}

#[tokio::test]
async fn frames_pass_both_ways_untouched_and_the_holders_close_reaches_the_client() {
    let (mut holder, mut client) = relayed().await;
    // Audio in: the same bytes, as one binary frame.
    let audio: Vec<u8> = (0..=255).cycle().take(640).collect();
    client.send_binary(audio.clone());
    client.send_text(r#"{"type":"hangup"}"#);
    assert_eq!(
        from_client(&mut holder).await,
        Some(Message::Binary(audio.clone().into()))
    );
    assert_eq!(
        from_client(&mut holder).await,
        Some(Message::Text(r#"{"type":"hangup"}"#.into()))
    );
    // And out.
    holder
        .send(Message::Text(r#"{"type":"connected"}"#.into()))
        .await
        .unwrap();
    holder
        .send(Message::Binary(audio.clone().into()))
        .await
        .unwrap();
    assert_eq!(
        client.next_frame().await,
        Message::Text(r#"{"type":"connected"}"#.into())
    );
    assert_eq!(client.next_frame().await, Message::Binary(audio.into()));
    // The holder's close, code and words, closes the client.
    let close = CloseFrame {
        code: CloseCode::from(4401),
        reason: "credential expired".into(),
    };
    holder.close(Some(close)).await.unwrap();
    assert_eq!(
        client.recv_close().await,
        (4401, "credential expired".to_owned())
    );
}

#[tokio::test]
async fn a_client_that_closes_has_its_close_passed_on() {
    let (mut holder, client) = relayed().await;
    client.close().await;
    match from_client(&mut holder).await {
        Some(Message::Close(Some(frame))) => assert_eq!(frame.code, CloseCode::Normal),
        other => panic!("expected the client's close, got {other:?}"),
    }
}

#[tokio::test]
async fn a_lost_client_leaves_the_hop_dropped_as_a_lost_socket_would_be() {
    let (mut holder, client) = relayed().await;
    // The client's socket breaks: no close frame reaches the holder.
    drop(client);
    assert_eq!(from_client(&mut holder).await, None);
}

#[tokio::test]
async fn a_holder_gone_without_a_close_ends_the_client_with_going_away() {
    let (holder, client) = relayed().await;
    drop(holder);
    assert_eq!(
        client.recv_close().await,
        (1001, "call holder gone".to_owned())
    );
}
