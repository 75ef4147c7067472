//! The control bus: what a replica tells the one running a session's turn
//! (a cancel, a client tool's answer), delivered at least once to the
//! replica holding the lease, even across a cut in its link to Redis.
//!
//! A control is pushed onto the session's mailbox (`{…}:ctl`, a short list
//! beside the lease, in its Cluster slot) and the holder is woken on its
//! channel (`{prefix}ctl:<replica>`, one subscription per replica, whatever
//! the number of sessions). Whoever reads the mailbox delivers what it
//! held: the woken listener, or the holder's next lease renewal, which
//! reads it in the same script. So a control sent while the holder is cut
//! off from Redis waits in the mailbox and reaches the turn with the first
//! renewal after the link heals; if the link stays down for a whole lease,
//! the turn stops anyway (its lease is lost).
//!
//! A control leaves the mailbox only once delivered: the read does not
//! remove it, an acknowledgement after the delivery does. A read whose
//! reply is lost (Redis ran it, the link timed out before the answer came
//! back: a slow link, not a cut) leaves it for the next read, where a
//! destructive read lost it. Delivery is so at least once; both kinds are
//! idempotent where they land (a cancel names its turn, an answer its
//! call), so a control delivered twice, or left from an earlier turn, is
//! harmless.

use std::time::Duration;

use agentwire_core::live::Control;
use agentwire_core::{LiveError, SessionId};
use futures_util::StreamExt;
use redis::Script;
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

use super::{RedisLive, session_key, unavailable};
use crate::codec::{decode_control, encode_control};

/// Controls waiting for the engine; beyond, new ones are dropped (and
/// logged): a client repeating a cancel cannot grow a replica's memory.
pub(crate) const CONTROL_QUEUE: usize = 1024;

/// How long the listener waits before subscribing again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(100);

/// The most controls a session's mailbox keeps (the newest).
const MAILBOX_KEPT: u64 = 64;

/// How long a mailbox outlives its last control: longer than any lease.
const MAILBOX_TTL: Duration = Duration::from_secs(60);

/// Pushes ARGV[2] onto the mailbox KEYS[2] and wakes the replica holding
/// the lease KEYS[1] with the session's id ARGV[5]; returns 0 (nothing
/// pushed) when nobody holds it.
const SEND: &str = r"
local holder = redis.call('GET', KEYS[1])
if not holder then
  return 0
end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)
redis.call('PEXPIRE', KEYS[2], ARGV[4])
local replica = string.match(holder, '^(.*):%d+$')
redis.call('PUBLISH', ARGV[1] .. 'ctl:' .. replica, ARGV[5])
return 1
";

/// Extends the lease if it is still the one named (`replica:fence`), and
/// reads the session's mailbox for its holder: `{1, controls}`, or
/// `{0, {}}` when the lease is not held with that fence. The controls stay
/// until [`ACK`].
pub(crate) const RENEW: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0, {}}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, redis.call('LRANGE', KEYS[2], 0, -1)}
";

/// Takes the delivered controls ARGV out of the mailbox KEYS[1], one
/// occurrence each: what was sent since the read stays.
const ACK: &str = r"
for _, control in ipairs(ARGV) do
  redis.call('LREM', KEYS[1], 1, control)
end
return 0
";

/// The scripts and the engine's queue, shared by the listener and the
/// lease renewals.
#[derive(Clone)]
pub(crate) struct Mailboxes {
    send: Script,
    ack: Script,
    engine: mpsc::Sender<(SessionId, Control)>,
}

impl Mailboxes {
    pub(crate) fn new(engine: mpsc::Sender<(SessionId, Control)>) -> Mailboxes {
        Mailboxes {
            send: Script::new(SEND),
            ack: Script::new(ACK),
            engine,
        }
    }

    /// Hands controls taken out of a mailbox to the engine.
    pub(crate) fn deliver(&self, taken: &[Vec<u8>]) {
        for data in taken {
            match decode_control(data) {
                Ok(control) => {
                    if self.engine.try_send(control).is_err() {
                        tracing::warn!("dropping a control: the engine is behind");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "ignoring a control"),
            }
        }
    }

    /// Reads the mailbox, delivers what it holds and acknowledges it.
    async fn take(
        &self,
        connection: &mut ConnectionManager,
        mailbox: String,
    ) -> Result<(), LiveError> {
        let taken: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(&mailbox)
            .arg(0)
            .arg(-1)
            .query_async(connection)
            .await
            .map_err(unavailable)?;
        self.deliver(&taken);
        self.acknowledge(connection, mailbox, &taken).await
    }

    /// Takes `delivered` out of `mailbox`. A failure leaves them for the
    /// next read, which delivers them again.
    pub(crate) async fn acknowledge(
        &self,
        connection: &mut ConnectionManager,
        mailbox: String,
        delivered: &[Vec<u8>],
    ) -> Result<(), LiveError> {
        if delivered.is_empty() {
            return Ok(());
        }
        let mut ack = self.ack.key(mailbox);
        for control in delivered {
            ack.arg(control.as_slice());
        }
        ack.invoke_async(connection).await.map_err(unavailable)
    }
}

impl RedisLive {
    pub(crate) fn mailbox(&self, session: &SessionId) -> String {
        self.key(session, "ctl")
    }

    /// Puts `control` in the session's mailbox and wakes its lease holder;
    /// `false` when nobody holds the lease.
    pub(crate) async fn send_control(
        &self,
        session: &SessionId,
        control: &Control,
    ) -> Result<bool, LiveError> {
        let sent: u8 = self
            .mailboxes
            .send
            .key(self.key(session, "turn"))
            .key(self.mailbox(session))
            .arg(&self.settings.key_prefix)
            .arg(encode_control(session, control))
            .arg(MAILBOX_KEPT)
            .arg(Self::millis(MAILBOX_TTL))
            .arg(session.as_str())
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(sent == 1)
    }

    /// Empties the mailboxes this replica is woken for, for as long as the
    /// engine takes controls, subscribing again after a lost connection.
    pub(crate) fn spawn_control_listener(&self) {
        let client = self.client.clone();
        let connection = self.connection.clone();
        let mailboxes = self.mailboxes.clone();
        let prefix = self.settings.key_prefix.clone();
        let channel = format!("{prefix}ctl:{}", self.settings.replica_id);
        let timeout = self.settings.timeout;
        tokio::spawn(async move {
            let mut woken = Woken {
                connection,
                mailboxes,
                prefix,
            };
            while !woken.mailboxes.engine.is_closed() {
                if let Err(e) = listen(&client, &channel, timeout, &mut woken).await {
                    tracing::warn!(error = %e, "the control bus subscription dropped");
                }
                // Soon: while this replica has no subscription, another
                // may take its leases as a dead replica's (`ACQUIRE`).
                tokio::time::sleep(RESUBSCRIBE_AFTER).await;
            }
        });
    }
}

/// What the listener needs to empty a mailbox it is woken for.
struct Woken {
    connection: ConnectionManager,
    mailboxes: Mailboxes,
    prefix: String,
}

async fn listen(
    client: &redis::Client,
    channel: &str,
    timeout: Duration,
    woken: &mut Woken,
) -> Result<(), LiveError> {
    let connect = async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok::<_, redis::RedisError>(pubsub)
    };
    let mut pubsub = tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| LiveError::Unavailable("redis: timed out".to_owned()))?
        .map_err(unavailable)?;
    let mut messages = pubsub.on_message();
    loop {
        let message = tokio::select! {
            message = messages.next() => message,
            () = woken.mailboxes.engine.closed() => return Ok(()),
        };
        let Some(message) = message else {
            return Err(LiveError::Unavailable("redis: connection lost".to_owned()));
        };
        let payload = message.get_payload_bytes();
        // A replica of the previous release publishes the control itself.
        if payload.starts_with(b"{") {
            woken.mailboxes.deliver(&[payload.to_vec()]);
            continue;
        }
        let session = std::str::from_utf8(payload)
            .ok()
            .and_then(|text| SessionId::parse(text).ok());
        let Some(session) = session else {
            tracing::warn!("ignoring a wake-up that names no session");
            continue;
        };
        let mailbox = session_key(&woken.prefix, &session, "ctl");
        // A failed read or acknowledgement leaves the controls for the
        // lease's next renewal.
        if let Err(e) = woken.mailboxes.take(&mut woken.connection, mailbox).await {
            tracing::warn!(error = %e, "reading a control mailbox failed");
        }
    }
}
