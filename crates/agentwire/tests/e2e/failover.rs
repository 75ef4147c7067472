//! A replica that dies or is cut off from Redis mid-turn, at the default
//! lease settings: the turn's clients on the survivor get its one terminal
//! within 3 s of the kill; a turn whose end was stored before its replica
//! died ends with that end, never also "turn interrupted"; and a cancel sent
//! while the turn's replica is cut off from Redis reaches the turn once the
//! link heals.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::replica_turns::{child_replica, connect_child, connect_child_at, owners};
use crate::replicas::{servers, unique_prefix};
use crate::support::{Client, CutLink, TestServer};
use crate::turn_log::{ALICE, POSITIONED, connect_as, rejoin_query};

/// Every replica's config at the lease defaults (10 s, renewed every third
/// of it), over `redis` (a URL).
pub(crate) fn defaults(postgres: &str, redis: &str, prefix: &str) -> String {
    format!(
        "{}storage:\n  sessions: \"{postgres}\"\nlive: \"{redis}\"\nredis:\n  key_prefix: \"{prefix}\"\n",
        owners()
    )
}

/// The test Redis's Unix socket, from its `redis+unix://` URL.
fn socket_of(redis: &str) -> PathBuf {
    PathBuf::from(
        redis
            .strip_prefix("redis+unix://")
            .expect("scripts/redis.sh serves Redis on a Unix socket"),
    )
}

/// The session's stored messages as `seq|role|content` lines (a
/// multi-line content spans several).
pub(crate) fn stored(postgres: &str, session: &str) -> Vec<String> {
    psql_rows(
        postgres,
        &format!(
            "SELECT m.seq, m.role, m.content FROM messages m JOIN sessions s ON s.key = m.session_key \
             WHERE s.id = '{session}' ORDER BY m.seq"
        ),
    )
}

/// The rows of `query` as `|`-separated lines, read with `psql`.
pub(crate) fn psql_rows(postgres: &str, query: &str) -> Vec<String> {
    let output = std::process::Command::new("psql")
        .arg(postgres)
        .args(["-At", "-F", "|", "-c", query])
        .output()
        .expect("psql runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

async fn wait_until_stored(postgres: &str, session: &str, row: &str) {
    for _ in 0..100 {
        if stored(postgres, session).iter().any(|r| r.ends_with(row)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never stored: {row}: {:?}", stored(postgres, session));
}

/// Starts `scenario` on a client of the child replica; its `turn_started`.
pub(crate) async fn start_turn(client: &mut Client, scenario: &str) -> Value {
    assert_eq!(client.recv().await["type"], "connected");
    client.script(scenario, "go").await;
    let started = client.recv().await;
    assert_eq!(started["type"], "turn_started", "{started}");
    started
}

#[tokio::test]
async fn a_reply_stored_before_its_replica_died_is_the_turns_one_end() {
    let Some(mut cut) = RedisCut::start("stored-end", defaults).await else {
        return;
    };
    let mut doomed = connect_child(&cut.address).await;
    let started = start_turn(&mut doomed, "paced").await;
    let survivor = cut.other_replica().await;
    let (mut follower, _) = connect_as(&survivor, &rejoin_query(&started, &started), ALICE).await;
    // The dying replica finishes the turn and stores its reply, but cannot
    // tell Redis: its terminal and the lease's release never get there.
    cut.link.stall();
    let session = started["session_id"].as_str().unwrap();
    wait_until_stored(&cut.postgres, session, "|assistant|one two three four five").await;
    cut.kill_child().await;
    let killed_at = tokio::time::Instant::now();
    let frames = follower.recv_turn().await;
    let ended = killed_at.elapsed();
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done", "{frames:?}");
    assert_eq!(done["content"], "one two three four five", "{done}");
    assert!(frames.iter().all(|f| f["type"] != "error"), "{frames:?}");
    assert!(
        ended < Duration::from_secs(3),
        "ended {ended:?} after the kill"
    );
    // One end stored for the turn: the reply, no interruption beside it.
    let rows = stored(&cut.postgres, session);
    assert_eq!(
        rows.iter().filter(|r| r.contains("|assistant|")).count(),
        1,
        "{rows:?}"
    );
    assert!(rows.iter().all(|r| !r.contains("|error|")), "{rows:?}");
    survivor.stop().await;
}

#[tokio::test]
async fn a_cancel_sent_while_the_turns_replica_is_cut_off_from_redis_reaches_it_after() {
    let Some(mut cut) = RedisCut::start("cut-cancel", defaults).await else {
        return;
    };
    let mut runner = connect_child(&cut.address).await;
    let started = start_turn(&mut runner, "hold").await;
    let held = runner.recv().await;
    assert_eq!(held["type"], "chunk", "{held}");
    let survivor = cut.other_replica().await;
    let (mut other, _) = connect_as(&survivor, &rejoin_query(&started, &started), ALICE).await;
    cut.link.stall();
    other.send_json(json!({"type": "cancel"})).await;
    // Shorter than the lease: the running replica keeps its turn, and
    // learns of the cancel once it reaches Redis again.
    tokio::time::sleep(Duration::from_millis(600)).await;
    cut.link.heal();
    for frames in [runner.recv_turn().await, other.recv_turn().await] {
        let done = frames.last().unwrap();
        assert_eq!(done["type"], "done", "{frames:?}");
        assert_eq!(done["cancelled"], true, "{done}");
        assert_eq!(done["content"], "held", "{done}");
    }
    cut.kill_child().await;
    survivor.stop().await;
}

/// A rejoin through a replica that cannot reach Redis is closed 1013 "try
/// again later": not answered with a fresh session, which would tell the
/// client its conversation was gone (and take the cancel it sends next to
/// a session it is not on). Once the link is back the same rejoin works,
/// and its cancel reaches the turn running on the other replica.
#[tokio::test]
async fn a_rejoin_through_a_replica_cut_off_from_redis_is_closed_try_again_later() {
    let Some(mut cut) = RedisCut::start("cut-rejoin", defaults).await else {
        return;
    };
    let runner_side = cut.other_replica().await;
    let (mut runner, _) = connect_as(&runner_side, POSITIONED, ALICE).await;
    runner.script("hold", "go").await;
    let started = runner.recv().await;
    assert_eq!(started["type"], "turn_started", "{started}");
    let held = runner.recv().await;
    assert_eq!(held["type"], "chunk", "{held}");

    cut.link.take_down();
    let mut refused = connect_child_at(&cut.address, &rejoin_query(&started, &held)).await;
    let close = refused.expect_close(Duration::from_secs(15)).await;
    let close = close.expect("a close frame, before any connected");
    assert_eq!(u16::from(close.code), 1013, "{close:?}");
    assert_eq!(close.reason.as_str(), "session unavailable, try again");

    cut.link.heal();
    let mut side = connect_child_at(&cut.address, &rejoin_query(&started, &held)).await;
    let connected = side.recv().await;
    assert_eq!(connected["type"], "connected", "{connected}");
    assert_eq!(connected["connected"]["resumed"], true, "{connected}");
    side.send_json(json!({"type": "cancel"})).await;
    for frames in [runner.recv_turn().await, side.recv_turn().await] {
        let done = frames.last().unwrap();
        assert_eq!(done["type"], "done", "{frames:?}");
        assert_eq!(done["cancelled"], true, "{done}");
    }
    cut.kill_child().await;
    runner_side.stop().await;
}

/// Sessions per killed replica in [`a_killed_replicas_turns_end_for_their_clients_within_3s`].
const TURNS_PER_KILL: usize = 4;

#[tokio::test]
async fn a_killed_replicas_turns_end_for_their_clients_within_3s() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    // `AGENTWIRE_FAILOVER_KILLS=20` for the book's figures.
    let kills: usize = std::env::var("AGENTWIRE_FAILOVER_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2);
    let prefix = unique_prefix("kills");
    let shared = defaults(&postgres, &redis, &prefix);
    let survivor = TestServer::with_top_level(&shared).await;
    let mut waits = Vec::new();
    for _ in 0..kills {
        waits.extend(kill_mid_turns(&shared, &survivor).await);
    }
    waits.sort();
    let worst = *waits.last().unwrap();
    eprintln!(
        "failover: {} turns over {kills} kills: median {:?}, worst {worst:?}",
        waits.len(),
        waits[waits.len() / 2]
    );
    assert!(worst < Duration::from_secs(3), "{waits:?}");
    survivor.stop().await;
}

/// Starts [`TURNS_PER_KILL`] turns on a fresh replica, followed from
/// `survivor`, kills it, and gives how long each follower waited for its
/// turn's end.
async fn kill_mid_turns(shared: &str, survivor: &TestServer) -> Vec<Duration> {
    let (mut child, address, _dir) = child_replica(shared).await;
    let mut followers = Vec::new();
    let mut runners = Vec::new();
    for _ in 0..TURNS_PER_KILL {
        let mut runner = connect_child(&address).await;
        let started = start_turn(&mut runner, "hold").await;
        let (follower, _) = connect_as(survivor, &rejoin_query(&started, &started), ALICE).await;
        followers.push(follower);
        runners.push(runner);
    }
    // Somewhere in the lease's renewal period, as a crash would be.
    let jitter = rand_millis(700);
    tokio::time::sleep(Duration::from_millis(jitter)).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let killed_at = tokio::time::Instant::now();
    let mut waits = Vec::new();
    for follower in &mut followers {
        let frames = follower.recv_turn().await;
        waits.push(killed_at.elapsed());
        let error = frames.last().unwrap();
        assert_eq!(error["type"], "error", "{frames:?}");
        assert_eq!(error["error"]["message"], "turn interrupted", "{error}");
    }
    waits
}

fn rand_millis(below: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    u64::from(nanos) % below
}

#[tokio::test]
async fn an_event_recorded_while_cut_off_from_redis_is_stored_once_after_the_other_replicas_turn() {
    let Some(mut cut) = RedisCut::start("cut-event", defaults).await else {
        return;
    };
    let survivor = cut.other_replica().await;
    let (mut asker, connected) = connect_as(&survivor, POSITIONED, ALICE).await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    asker.script("echo", "first").await;
    asker.recv_turn().await;
    // The same session on the cut-off replica, live there before the cut.
    let (mut acker, _) = connect_as_child(&cut.address, &session).await;
    asker.script("paced", "second").await;
    assert_eq!(asker.recv().await["type"], "turn_started");
    cut.link.stall();
    acker.send_json(json!({"type": "disclosure_ack"})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    cut.link.heal();
    let done = asker.recv_turn().await.pop().unwrap();
    assert_eq!(done["content"], "one two three four five", "{done}");
    wait_until_stored(&cut.postgres, &session, "|event|ai.disclosure.displayed").await;
    // After the other replica's turn, under the lease: every seq once, in
    // order, the event after the reply it waited for.
    let rows = stored(&cut.postgres, &session);
    let seqs: Vec<u64> = rows
        .iter()
        .map(|r| r.split('|').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "{rows:?}");
    let last = rows.last().unwrap();
    assert!(last.ends_with("|event|ai.disclosure.displayed"), "{rows:?}");
    assert!(
        rows[rows.len() - 2].ends_with("|assistant|one two three four five"),
        "{rows:?}"
    );
    cut.kill_child().await;
    survivor.stop().await;
}

/// A turn whose replica is cut off from Redis (packets held, nothing
/// closed) for longer than its lease, and finishes meanwhile: its end is
/// stored, but neither published nor released. Once the link heals, a
/// client rejoining on another replica gets the turn's one terminal, the
/// reply as it was stored (the partition harness's seed-12 run lost it).
#[tokio::test]
async fn a_turn_that_ended_while_its_replica_was_cut_off_past_its_lease_ends_once_for_its_clients()
{
    let Some(mut cut) = RedisCut::start("cut-past-lease", short_leases).await else {
        return;
    };
    let survivor = cut.other_replica().await;
    let mut runner = connect_child(&cut.address).await;
    let started = start_turn(&mut runner, "paced").await;
    let first = runner.recv().await;
    assert_eq!(first["type"], "chunk", "{first}");
    cut.link.stall();
    let session = started["session_id"].as_str().unwrap();
    wait_until_stored(&cut.postgres, session, "|assistant|one two three four five").await;
    // Twice the lease: it runs out in Redis while the link holds the
    // replica's appends, renewals and release.
    tokio::time::sleep(Duration::from_secs(3)).await;
    cut.link.heal();
    let (mut rejoined, _) = connect_as(&survivor, &rejoin_query(&started, &first), ALICE).await;
    let frames = rejoined.recv_turn().await;
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done", "{frames:?}");
    assert_eq!(done["content"], "one two three four five", "{done}");
    // And a later rejoin from the start finds the same one end.
    let (mut again, _) = connect_as(&survivor, &rejoin_query(&started, &started), ALICE).await;
    let frames = again.recv_turn().await;
    assert_eq!(
        frames.iter().filter(|f| f["type"] == "done").count(),
        1,
        "{frames:?}"
    );
    let rows = stored(&cut.postgres, session);
    assert_eq!(
        rows.iter().filter(|r| r.contains("|assistant|")).count(),
        1,
        "{rows:?}"
    );
    assert!(rows.iter().all(|r| !r.contains("|error|")), "{rows:?}");
    cut.kill_child().await;
    survivor.stop().await;
}

/// [`defaults`] with leases of 1.5 s, so a lease runs out within a test.
fn short_leases(postgres: &str, redis: &str, prefix: &str) -> String {
    format!(
        "{}  lease_ttl: 1500ms\n  timeout: 300ms\n",
        defaults(postgres, redis, prefix)
    )
}

/// A child replica (a process of its own) whose link to Redis the test
/// can cut, and what a replica of the same deployment beside it, in this
/// process, needs.
struct RedisCut {
    postgres: String,
    redis: String,
    prefix: String,
    /// Both replicas' settings: [`defaults`] or [`short_leases`].
    config: fn(&str, &str, &str) -> String,
    link: CutLink,
    child: tokio::process::Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl RedisCut {
    /// `None` without the test servers.
    async fn start(test: &str, config: fn(&str, &str, &str) -> String) -> Option<RedisCut> {
        let (postgres, redis) = servers()?;
        let prefix = unique_prefix(test);
        let link = CutLink::to(&socket_of(&redis)).await;
        let through_link = format!("redis+unix://{}", link.socket().display());
        let (child, address, dir) = child_replica(&config(&postgres, &through_link, &prefix)).await;
        Some(RedisCut {
            postgres,
            redis,
            prefix,
            config,
            link,
            child,
            address,
            _dir: dir,
        })
    }

    /// Another replica of the deployment, in this process, reaching Redis
    /// directly.
    async fn other_replica(&self) -> TestServer {
        TestServer::with_top_level(&(self.config)(&self.postgres, &self.redis, &self.prefix)).await
    }

    async fn kill_child(&mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

/// A cuttable link to the test PostgreSQL for one replica: its URL
/// (`host=` a socket directory of its own, whose `.s.PGSQL.5432` is the
/// link's socket).
struct PostgresLink {
    link: CutLink,
    url: String,
    _dir: tempfile::TempDir,
}

impl PostgresLink {
    /// A link to the server `postgres` (a URL with `host=<socket directory>`).
    async fn to(postgres: &str) -> PostgresLink {
        let query = postgres.split_once('?').expect("a URL with a query").1;
        let host = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("host="))
            .expect("scripts/postgres.sh serves PostgreSQL on a Unix socket");
        let link = CutLink::to(&PathBuf::from(host).join(".s.PGSQL.5432")).await;
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(link.socket(), dir.path().join(".s.PGSQL.5432")).unwrap();
        let url = postgres.replace(
            &format!("host={host}"),
            &format!("host={}", dir.path().display()),
        );
        PostgresLink {
            link,
            url,
            _dir: dir,
        }
    }
}

#[tokio::test]
async fn a_cancel_through_a_replica_still_storing_a_turn_it_lost_reaches_the_turn_running_elsewhere()
 {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let prefix = unique_prefix("zombie-cancel");
    let pg = PostgresLink::to(&postgres).await;
    let (mut child, address, _dir) = child_replica(&short_leases(&pg.url, &redis, &prefix)).await;
    let survivor = TestServer::with_top_level(&short_leases(&postgres, &redis, &prefix)).await;
    let mut runner = connect_child(&address).await;
    let started = start_turn(&mut runner, "hold").await;
    assert_eq!(runner.recv().await["type"], "chunk");
    let session = started["session_id"].as_str().unwrap();
    wait_until_stored(&postgres, session, "|user|go").await;
    // The child's store goes silent: its turn, cancelled, waits to store
    // its end (up to the statement timeout, 30 s) while its lease, no
    // longer renewed, runs out.
    pg.link.stall();
    runner.send_json(json!({"type": "cancel"})).await;
    // The other replica ends that turn and runs the session's next one.
    let (mut other, _) = connect_as(&survivor, &rejoin_query(&started, &started), ALICE).await;
    let ended = other.recv_turn().await.pop().unwrap();
    assert_eq!(ended["type"], "error", "{ended}");
    other.script("hold", "again").await;
    let again = other.recv().await;
    assert_eq!(again["type"], "turn_started", "{again}");
    let held = other.recv().await;
    assert_eq!(held["type"], "chunk", "{held}");
    // A cancel sent through the child, still storing its own lost turn,
    // reaches the turn the other replica runs.
    let mut via = connect_child_at(&address, &rejoin_query(&again, &held)).await;
    assert_eq!(via.recv().await["type"], "connected");
    via.send_json(json!({"type": "cancel"})).await;
    let done = other.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["cancelled"], true, "{done}");
    pg.link.heal();
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    survivor.stop().await;
}

#[tokio::test]
async fn a_takeover_that_could_not_read_the_store_is_read_again_at_the_next_turn() {
    let Some((postgres, redis)) = servers() else {
        return;
    };
    let prefix = unique_prefix("failed-takeover");
    let pg = PostgresLink::to(&postgres).await;
    let (mut child, address, _dir) = child_replica(&defaults(&pg.url, &redis, &prefix)).await;
    let other = TestServer::with_top_level(&defaults(&postgres, &redis, &prefix)).await;
    let (mut there, connected) = connect_as(&other, POSITIONED, ALICE).await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    there.script("echo", "first").await;
    assert_eq!(there.recv_turn().await.pop().unwrap()["type"], "done");
    let (mut here, _) = connect_as_child(&address, &session).await;
    here.script("echo", "second").await;
    assert_eq!(here.recv_turn().await.pop().unwrap()["type"], "done");
    there.script("echo", "third").await;
    assert_eq!(there.recv_turn().await.pop().unwrap()["type"], "done");
    // The child takes the session back while its database is gone: the
    // takeover cannot read what the other replica wrote, and the turn is
    // refused; Redis now names the child the session's last holder.
    pg.link.take_down();
    here.script("echo", "refused").await;
    let refused = here.recv_turn().await.pop().unwrap();
    assert_eq!(refused["type"], "error", "{refused}");
    pg.link.heal();
    // Its next turn reads the window first: it sees the other replica's
    // turn and writes after it.
    here.script("history", "what is stored?").await;
    let done = here.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    let seen = done["content"].as_str().unwrap();
    assert!(seen.contains("user: third\n"), "{done}");
    // Every seq once, in order (a multi-line reply's later lines start
    // with no seq).
    let rows = stored(&postgres, &session);
    let seqs: Vec<u64> = rows
        .iter()
        .filter_map(|r| r.split('|').next().unwrap().parse().ok())
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "{rows:?}");
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    other.stop().await;
}

/// An ask for the lease that times out while the replica is cut off from
/// Redis still takes the lease when its bytes land, after the link heals,
/// though the replica heard no answer. That lease must not hold the
/// session (the replica calls its unanswered ask off), and since the
/// other replica wrote in between, the cut-off replica's next turn must
/// read that, not take the session for unchanged because the grant before
/// it was its own.
#[tokio::test]
async fn a_lease_granted_to_an_ask_answered_too_late_does_not_leave_a_stale_window() {
    let Some(mut cut) = RedisCut::start("late-ask", short_leases).await else {
        return;
    };
    let other = cut.other_replica().await;
    let (mut there, connected) = connect_as(&other, POSITIONED, ALICE).await;
    let session = connected["session_id"].as_str().unwrap().to_owned();
    there.script("echo", "first").await;
    assert_eq!(there.recv_turn().await.pop().unwrap()["type"], "done");
    let (mut here, _) = connect_as_child(&cut.address, &session).await;
    here.script("echo", "second").await;
    assert_eq!(here.recv_turn().await.pop().unwrap()["type"], "done");
    there.script("echo", "third").await;
    assert_eq!(there.recv_turn().await.pop().unwrap()["type"], "done");
    // Cut off, the child's ask for the lease times out; once the link
    // heals, the ask lands and grants the child a lease it never hears of,
    // and the call-off the child sent after it frees that lease.
    cut.link.stall();
    here.script("echo", "unanswered").await;
    let refused = here.recv_turn().await.pop().unwrap();
    assert_eq!(refused["type"], "error", "{refused}");
    cut.link.heal();
    // Well within the lease that ask was granted (1.5 s): the session is
    // free, and its next turn reads what the other replica wrote.
    tokio::time::sleep(Duration::from_millis(500)).await;
    here.script("history", "what is stored?").await;
    let done = here.recv_turn().await.pop().unwrap();
    assert_eq!(done["type"], "done", "{done}");
    assert!(
        done["content"].as_str().unwrap().contains("user: third\n"),
        "{done}"
    );
    let rows = stored(&cut.postgres, &session);
    let seqs: Vec<u64> = rows
        .iter()
        .filter_map(|r| r.split('|').next().unwrap().parse().ok())
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "{rows:?}");
    cut.kill_child().await;
    other.stop().await;
}

/// Alice's positioned socket on a child replica, on `session`.
async fn connect_as_child(address: &str, session: &str) -> (Client, Value) {
    let mut client = connect_child_at(address, &format!("{POSITIONED}&resume={session}")).await;
    let connected = client.recv().await;
    assert_eq!(connected["type"], "connected", "{connected}");
    (client, connected)
}
