//! Agent memory in the SQLite store: the commands its thread runs, and the
//! [`AgentMemory`] port on [`SqliteStore`]. Recall searches the FTS5 index
//! (`memories_text`) for the scope's token and any of the words, ranked by
//! bm25, and, with a vector, compares the scopes' stored vectors exactly
//! (the most recently written [`VECTOR_CANDIDATES`]); the lists are fused
//! with recency ([`fuse`]).

use agentwire_core::memory::vectors::{VECTOR_CANDIDATES, likeness, nearest, vector_from_bytes};
use agentwire_core::memory::{Listing, MAX_READ, Owned, fuse, search_words};
use agentwire_core::{
    AgentMemory, Likeness, Memory, MemoryError, MemoryScope, MemoryTier, NewMemory, Recall,
    Remembered, TierCounts,
};
use rusqlite::types::Value;

use super::*;
use crate::agent_memory::{MEMORY_COLUMNS, MemoryRow, any_of, scope_token};

/// Candidates a recall takes from the index per memory it returns: the
/// recency fusion reorders them.
const CANDIDATES_PER_RESULT: usize = 4;

/// What the SQLite thread does for agent memory.
pub(in crate::sqlite) enum MemoryCommand {
    Remember {
        row: Box<MemoryRow>,
        reply: Reply<Remembered>,
    },
    Search {
        query: Search,
        reply: Reply<Vec<MemoryRow>>,
    },
    Forget {
        scope: MemoryScope,
        id: String,
        now: i64,
        reply: Reply<bool>,
    },
    Purge {
        before: i64,
        reply: Reply<u64>,
    },
    DeleteOwned {
        owner: String,
        id: String,
        reply: Reply<bool>,
    },
    DeleteAllOwned {
        owner: String,
        now: i64,
        reply: Reply<u64>,
    },
    CountByTier {
        now: i64,
        reply: Reply<TierCounts>,
    },
}

/// Whose memories a read sees.
pub(in crate::sqlite) enum Whose {
    Scopes(Vec<MemoryScope>),
    /// Every caller tier `owner` owns, perhaps of one agent or facet.
    Owner {
        owner: String,
        agent: Option<String>,
        facet: Option<String>,
    },
}

/// How a read orders what it finds.
pub(in crate::sqlite) enum Order {
    Newest,
    /// By the index query (with the scopes' tokens), best first.
    Text(String),
    /// By similarity to the vector, best first.
    Nearest(Vec<f32>),
}

impl Whose {
    /// Each scope as a read of its own; an owner's memories as one.
    fn one_by_one(&self) -> Vec<Whose> {
        match self {
            Whose::Scopes(scopes) => scopes
                .iter()
                .map(|scope| Whose::Scopes(vec![scope.clone()]))
                .collect(),
            Whose::Owner {
                owner,
                agent,
                facet,
            } => vec![Whose::Owner {
                owner: owner.clone(),
                agent: agent.clone(),
                facet: facet.clone(),
            }],
        }
    }
}

/// A read of some scopes' live memories.
pub(in crate::sqlite) struct Search {
    whose: Whose,
    order: Order,
    id: Option<String>,
    kinds: Vec<String>,
    min_confidence: f64,
    now: i64,
    limit: usize,
    offset: usize,
}

impl MemoryCommand {
    /// Answers without running: the batch failed before reaching it.
    pub(in crate::sqlite) fn skipped(self, reason: &str) -> worker::Outcome {
        match self {
            MemoryCommand::Remember { reply, .. } => worker::fail(reply, reason),
            MemoryCommand::Search { reply, .. } => worker::fail(reply, reason),
            MemoryCommand::Forget { reply, .. } => worker::fail(reply, reason),
            MemoryCommand::Purge { reply, .. } => worker::fail(reply, reason),
            MemoryCommand::DeleteOwned { reply, .. } => worker::fail(reply, reason),
            MemoryCommand::DeleteAllOwned { reply, .. } => worker::fail(reply, reason),
            MemoryCommand::CountByTier { reply, .. } => worker::fail(reply, reason),
        }
    }
}

pub(in crate::sqlite) fn execute(
    tx: &mut Transaction<'_>,
    command: MemoryCommand,
    broken: &mut Option<String>,
) -> worker::Outcome {
    match command {
        MemoryCommand::Remember { row, reply } => worker::Outcome::new(
            reply,
            worker::write(tx, broken, |conn| remember(conn, &row)),
        ),
        MemoryCommand::Search { query, reply } => worker::Outcome::new(reply, search(tx, &query)),
        MemoryCommand::Forget {
            scope,
            id,
            now,
            reply,
        } => {
            let forgot = worker::write(tx, broken, |conn| forget(conn, &scope, &id, now));
            worker::Outcome::new(reply, forgot)
        }
        MemoryCommand::Purge { before, reply } => {
            worker::Outcome::new(reply, worker::write(tx, broken, |conn| purge(conn, before)))
        }
        MemoryCommand::DeleteOwned { owner, id, reply } => {
            let deleted = worker::write(tx, broken, |conn| delete_owned(conn, &owner, &id));
            worker::Outcome::new(reply, deleted)
        }
        MemoryCommand::DeleteAllOwned { owner, now, reply } => {
            let deleted = worker::write(tx, broken, |conn| delete_all_owned(conn, &owner, now));
            worker::Outcome::new(reply, deleted)
        }
        MemoryCommand::CountByTier { now, reply } => {
            worker::Outcome::new(reply, count_by_tier(tx, now))
        }
    }
}

fn failed(e: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(format!("memory: {e}"))
}

/// Inserts `row`, or replaces the live memory of its scope about the same
/// subject: that memory keeps its id and creation time, its old version
/// goes to `memory_history`.
fn remember(conn: &Connection, row: &MemoryRow) -> Result<Remembered, StoreError> {
    let existing = match (&row.about_kind, &row.about_key) {
        (Some(kind), Some(key)) => conn
            .prepare_cached(
                "SELECT id FROM memories WHERE owner = ?1 AND agent = ?2 AND facet = ?3
                 AND tier = ?4 AND about_kind = ?5 AND about_key = ?6 AND forgotten_at IS NULL",
            )
            .and_then(|mut s| {
                let keys = (&row.owner, &row.agent, &row.facet, row.tier, kind, key);
                s.query_row(keys, |r| r.get::<_, String>(0)).optional()
            })
            .map_err(failed)?,
        _ => None,
    };
    if let Some(id) = existing {
        replace(conn, &id, row)?;
        return Ok(Remembered::Replaced { id });
    }
    let judged = match (&row.about_kind, &row.vector) {
        (None, Some(vector)) => likeness(nearest(
            &vector_from_bytes(vector).unwrap_or_default(),
            alike_candidates(conn, row)?,
            MAX_READ,
        )),
        _ => Likeness::New,
    };
    match &judged {
        Likeness::Supersedes(id, _) => replace(conn, id, row)?,
        _ => insert(conn, row)?,
    }
    Ok(Remembered::judged(row.id.clone(), judged))
}

/// The live memories without a subject of `row`'s scope that have a
/// vector, the most recently written first: what a write without a
/// subject may supersede.
fn alike_candidates(
    conn: &Connection,
    row: &MemoryRow,
) -> Result<Vec<(String, Vec<f32>)>, StoreError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT id, vector FROM memories WHERE owner = ?1 AND agent = ?2 AND facet = ?3
             AND tier = ?4 AND forgotten_at IS NULL AND (expires_at IS NULL OR expires_at > ?5)
             AND about_kind IS NULL AND vector IS NOT NULL
             ORDER BY updated_at DESC LIMIT ?6",
        )
        .map_err(failed)?;
    let keys = rusqlite::params![
        row.owner,
        row.agent,
        row.facet,
        row.tier,
        row.updated_at,
        VECTOR_CANDIDATES as i64
    ];
    let rows = statement
        .query_map(keys, |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })
        .map_err(failed)?;
    let mut found = Vec::new();
    for row in rows {
        let (id, bytes) = row.map_err(failed)?;
        if let Some(vector) = vector_from_bytes(&bytes) {
            found.push((id, vector));
        }
    }
    Ok(found)
}

fn insert(conn: &Connection, row: &MemoryRow) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO memories ({MEMORY_COLUMNS}, vector)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                 ?18, ?19, ?20, ?21)"
    );
    let mut statement = conn.prepare_cached(&sql).map_err(failed)?;
    statement
        .execute(rusqlite::params![
            row.id,
            row.tier,
            row.owner,
            row.agent,
            row.facet,
            row.scope_token,
            row.kind,
            row.content,
            row.metadata,
            row.confidence,
            row.category,
            row.about_kind,
            row.about_key,
            row.purpose,
            row.title,
            row.summary,
            row.session_id,
            row.created_at,
            row.updated_at,
            row.expires_at,
            row.vector,
        ])
        .map(drop)
        .map_err(failed)
}

fn replace(conn: &Connection, id: &str, row: &MemoryRow) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO memory_history (memory_id, kind, content, metadata, confidence, category,
             purpose, title, summary, session_id, valid_from, valid_until)
         SELECT id, kind, content, metadata, confidence, category, purpose, title, summary,
             session_id, updated_at, ?2
         FROM memories WHERE id = ?1",
    )
    .and_then(|mut s| s.execute((id, row.updated_at)))
    .map_err(failed)?;
    conn.prepare_cached(
        "UPDATE memories SET kind = ?2, content = ?3, metadata = ?4, confidence = ?5,
             category = ?6, purpose = ?7, title = ?8, summary = ?9, session_id = ?10,
             updated_at = ?11, expires_at = ?12, vector = ?13, about_kind = ?14, about_key = ?15
         WHERE id = ?1",
    )
    .and_then(|mut s| {
        s.execute(rusqlite::params![
            id,
            row.kind,
            row.content,
            row.metadata,
            row.confidence,
            row.category,
            row.purpose,
            row.title,
            row.summary,
            row.session_id,
            row.updated_at,
            row.expires_at,
            row.vector,
            row.about_kind,
            row.about_key,
        ])
    })
    .map(drop)
    .map_err(failed)
}

/// The live memories `query` asks for, in its order.
fn search(conn: &Connection, query: &Search) -> Result<Vec<MemoryRow>, StoreError> {
    let mut params: Vec<Value> = Vec::new();
    let mut param = |value: Value| {
        params.push(value);
        format!("?{}", params.len())
    };
    let conditions = conditions(query, &query.whose, &mut param);
    let columns = prefixed_columns();
    let sql = match &query.order {
        Order::Text(text) => format!(
            "SELECT {columns} FROM memories_text JOIN memories m ON m.key = memories_text.rowid
             WHERE memories_text MATCH {} AND {conditions}
             ORDER BY bm25(memories_text), m.updated_at DESC, m.id LIMIT {} OFFSET {}",
            param(text.clone().into()),
            param((query.limit as i64).into()),
            param((query.offset as i64).into()),
        ),
        Order::Newest => format!(
            "SELECT {columns} FROM memories m WHERE {conditions}
             ORDER BY m.updated_at DESC, m.id LIMIT {} OFFSET {}",
            param((query.limit as i64).into()),
            param((query.offset as i64).into()),
        ),
        Order::Nearest(vector) => return nearest_rows(conn, query, vector),
    };
    let mut statement = conn.prepare_cached(&sql).map_err(failed)?;
    let rows = statement
        .query_map(rusqlite::params_from_iter(params), read_row)
        .map_err(failed)?;
    rows.collect::<Result<_, _>>().map_err(failed)
}

/// What keeps a row in `query`'s reads: live, confident enough, of its
/// scopes and kinds, its id.
fn conditions(query: &Search, whose: &Whose, param: &mut impl FnMut(Value) -> String) -> String {
    let mut conditions = vec![
        "m.forgotten_at IS NULL".to_owned(),
        format!(
            "(m.expires_at IS NULL OR m.expires_at > {})",
            param(query.now.into())
        ),
        format!("m.confidence >= {}", param(query.min_confidence.into())),
    ];
    conditions.push(self::whose(whose, param));
    if !query.kinds.is_empty() {
        let kinds: Vec<String> = query
            .kinds
            .iter()
            .map(|k| param(k.clone().into()))
            .collect();
        conditions.push(format!("m.kind IN ({})", kinds.join(", ")));
    }
    if let Some(id) = &query.id {
        conditions.push(format!("m.id = {}", param(id.clone().into())));
    }
    conditions.join(" AND ")
}

/// The `query.limit` rows `query` finds most similar to `vector`, best
/// first; none with a similarity of 0 or less. Each scope's candidates are
/// read apart, newest first through `memories_by_scope`: one query for
/// several scopes would have SQLite walk every row by time.
fn nearest_rows(
    conn: &Connection,
    query: &Search,
    vector: &[f32],
) -> Result<Vec<MemoryRow>, StoreError> {
    let mut keyed = Vec::new();
    for whose in query.whose.one_by_one() {
        let mut params: Vec<Value> = Vec::new();
        let mut param = |value: Value| {
            params.push(value);
            format!("?{}", params.len())
        };
        let conditions = conditions(query, &whose, &mut param);
        let sql = format!(
            "SELECT m.key, m.vector FROM memories m WHERE {conditions}
             AND m.vector IS NOT NULL ORDER BY m.updated_at DESC LIMIT {VECTOR_CANDIDATES}"
        );
        let mut statement = conn.prepare_cached(&sql).map_err(failed)?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(params), |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .map_err(failed)?;
        for row in rows {
            let (key, bytes) = row.map_err(failed)?;
            keyed.extend(vector_from_bytes(&bytes).map(|v| (key, v)));
        }
    }
    let sql = format!(
        "SELECT {} FROM memories m WHERE m.key = ?1",
        prefixed_columns()
    );
    let mut by_key = conn.prepare_cached(&sql).map_err(failed)?;
    let mut found = Vec::new();
    for (key, similarity) in nearest(vector, keyed, query.limit) {
        if similarity > 0.0 {
            found.push(by_key.query_row([key], read_row).map_err(failed)?);
        }
    }
    Ok(found)
}

/// The condition that keeps `whose` memories.
fn whose(whose: &Whose, param: &mut impl FnMut(Value) -> String) -> String {
    match whose {
        Whose::Scopes(scopes) => {
            let scopes: Vec<String> = scopes
                .iter()
                .map(|scope| {
                    format!(
                        "(m.owner = {} AND m.agent = {} AND m.facet = {} AND m.tier = {})",
                        param(scope.owner().to_owned().into()),
                        param(scope.agent().to_owned().into()),
                        param(scope.facet().to_owned().into()),
                        param(scope.tier().as_str().to_owned().into()),
                    )
                })
                .collect();
            format!("({})", scopes.join(" OR "))
        }
        Whose::Owner {
            owner,
            agent,
            facet,
        } => {
            let mut owned = format!(
                "m.owner = {} AND m.owner <> ''",
                param(owner.clone().into())
            );
            if let Some(agent) = agent {
                owned.push_str(&format!(" AND m.agent = {}", param(agent.clone().into())));
            }
            if let Some(facet) = facet {
                owned.push_str(&format!(" AND m.facet = {}", param(facet.clone().into())));
            }
            owned
        }
    }
}

/// Deletes `id` if `owner` owns it, with its history.
fn delete_owned(conn: &Connection, owner: &str, id: &str) -> Result<bool, StoreError> {
    conn.prepare_cached(
        "DELETE FROM memory_history WHERE memory_id IN
            (SELECT id FROM memories WHERE id = ?1 AND owner = ?2 AND owner <> '')",
    )
    .and_then(|mut s| s.execute((id, owner)))
    .map_err(failed)?;
    let deleted = conn
        .prepare_cached("DELETE FROM memories WHERE id = ?1 AND owner = ?2 AND owner <> ''")
        .and_then(|mut s| s.execute((id, owner)))
        .map_err(failed)?;
    Ok(deleted == 1)
}

/// Deletes everything `owner` owns, with its history, and records it.
fn delete_all_owned(conn: &Connection, owner: &str, now: i64) -> Result<u64, StoreError> {
    if owner.is_empty() {
        return Ok(0);
    }
    conn.prepare_cached(
        "DELETE FROM memory_history WHERE memory_id IN
            (SELECT id FROM memories WHERE owner = ?1)",
    )
    .and_then(|mut s| s.execute([owner]))
    .map_err(failed)?;
    let deleted = conn
        .prepare_cached("DELETE FROM memories WHERE owner = ?1")
        .and_then(|mut s| s.execute([owner]))
        .map_err(failed)?;
    conn.prepare_cached(
        "INSERT INTO memory_audit (at, owner, action, memories) VALUES (?1, ?2, 'delete_all', ?3)",
    )
    .and_then(|mut s| s.execute((now, owner, deleted as i64)))
    .map_err(failed)?;
    Ok(deleted as u64)
}

fn prefixed_columns() -> String {
    MEMORY_COLUMNS
        .split(", ")
        .map(|c| format!("m.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryRow> {
    let tier: String = r.get(1)?;
    Ok(MemoryRow {
        id: r.get(0)?,
        tier: crate::agent_memory::tier_name(&tier).unwrap_or("unknown"),
        owner: r.get(2)?,
        agent: r.get(3)?,
        facet: r.get(4)?,
        scope_token: r.get(5)?,
        kind: r.get(6)?,
        content: r.get(7)?,
        metadata: r.get(8)?,
        confidence: r.get(9)?,
        category: r.get(10)?,
        about_kind: r.get(11)?,
        about_key: r.get(12)?,
        purpose: r.get(13)?,
        title: r.get(14)?,
        summary: r.get(15)?,
        session_id: r.get(16)?,
        created_at: r.get(17)?,
        updated_at: r.get(18)?,
        expires_at: r.get(19)?,
        vector: None,
    })
}

fn forget(conn: &Connection, scope: &MemoryScope, id: &str, now: i64) -> Result<bool, StoreError> {
    let changed = conn
        .prepare_cached(
            "UPDATE memories SET forgotten_at = ?6
             WHERE id = ?1 AND owner = ?2 AND agent = ?3 AND facet = ?4 AND tier = ?5
             AND forgotten_at IS NULL AND (expires_at IS NULL OR expires_at > ?6)",
        )
        .and_then(|mut s| {
            let keys = (id, scope.owner(), scope.agent(), scope.facet());
            s.execute((keys.0, keys.1, keys.2, keys.3, scope.tier().as_str(), now))
        })
        .map_err(failed)?;
    Ok(changed == 1)
}

/// The live memories of each tier, through `memories_by_scope` (which
/// holds the unforgotten rows alone).
fn count_by_tier(conn: &Connection, now: i64) -> Result<TierCounts, StoreError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT tier, count(*) FROM memories INDEXED BY memories_by_scope
             WHERE forgotten_at IS NULL AND (expires_at IS NULL OR expires_at > ?1)
             GROUP BY tier",
        )
        .map_err(failed)?;
    let rows = statement
        .query_map([now], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .map_err(failed)?;
    let mut counts = TierCounts::default();
    for row in rows {
        let (tier, n) = row.map_err(failed)?;
        if let Some(tier) = MemoryTier::parse(&tier) {
            counts.add(tier, n as u64);
        }
    }
    Ok(counts)
}

/// Deletes what was forgotten before `before`, with its history.
fn purge(conn: &Connection, before: i64) -> Result<u64, StoreError> {
    conn.prepare_cached(
        "DELETE FROM memory_history WHERE memory_id IN
            (SELECT id FROM memories WHERE forgotten_at < ?1 OR expires_at < ?1)",
    )
    .and_then(|mut s| s.execute([before]))
    .map_err(failed)?;
    let deleted = conn
        .prepare_cached("DELETE FROM memories WHERE forgotten_at < ?1 OR expires_at < ?1")
        .and_then(|mut s| s.execute([before]))
        .map_err(failed)?;
    Ok(deleted as u64)
}

impl SqliteStore {
    async fn search(&self, query: Search) -> Result<Vec<Memory>, MemoryError> {
        let nobody = match &query.whose {
            Whose::Scopes(scopes) => scopes.is_empty(),
            Whose::Owner { owner, .. } => owner.is_empty(),
        };
        if nobody {
            return Ok(Vec::new());
        }
        let rows = self
            .call(|reply| Command::Memory(Box::new(MemoryCommand::Search { query, reply })))
            .await
            .map_err(|e| MemoryError(e.to_string()))?;
        rows.into_iter().map(MemoryRow::decode).collect()
    }
}

/// The index query for `words` in `scopes`: any scope's token and any word,
/// the words searched in the text columns only.
fn text_query(scopes: &[MemoryScope], words: &[String]) -> String {
    let tokens: Vec<String> = scopes.iter().map(scope_token).collect();
    format!(
        "scope_token : ({}) AND {{content title summary}} : ({})",
        tokens.join(" OR "),
        any_of(words)
    )
}

fn store_failed(e: StoreError) -> MemoryError {
    MemoryError(e.to_string())
}

#[async_trait]
impl AgentMemory for SqliteStore {
    async fn remember(&self, memory: NewMemory) -> Result<Remembered, MemoryError> {
        let row = Box::new(MemoryRow::encode(memory));
        let command = |reply| Command::Memory(Box::new(MemoryCommand::Remember { row, reply }));
        self.call(command).await.map_err(store_failed)
    }

    async fn recall(
        &self,
        scopes: &[MemoryScope],
        query: &Recall<'_>,
    ) -> Result<Vec<Memory>, MemoryError> {
        let words = search_words(query.text);
        let limit = query.limit.min(MAX_READ);
        let search = Search {
            whose: Whose::Scopes(scopes.to_vec()),
            order: match words.is_empty() {
                true => Order::Newest,
                false => Order::Text(text_query(scopes, &words)),
            },
            id: None,
            kinds: query.kinds.to_vec(),
            min_confidence: query.min_confidence,
            now: query.now.0,
            limit: limit * CANDIDATES_PER_RESULT,
            offset: 0,
        };
        let by_vector = query.vector.map(|vector| Search {
            whose: Whose::Scopes(scopes.to_vec()),
            order: Order::Nearest(vector.to_vec()),
            id: None,
            kinds: query.kinds.to_vec(),
            min_confidence: query.min_confidence,
            now: query.now.0,
            limit: limit * CANDIDATES_PER_RESULT,
            offset: 0,
        });
        let mut lists = vec![self.search(search).await?];
        if let Some(by_vector) = by_vector {
            lists.push(self.search(by_vector).await?);
        }
        Ok(fuse(lists, query.now, limit))
    }

    async fn list(
        &self,
        scopes: &[MemoryScope],
        page: &Listing<'_>,
    ) -> Result<Vec<Memory>, MemoryError> {
        self.search(Search {
            whose: Whose::Scopes(scopes.to_vec()),
            order: Order::Newest,
            id: None,
            kinds: page.kinds.to_vec(),
            min_confidence: f64::NEG_INFINITY,
            now: page.now.0,
            limit: page.limit.min(MAX_READ),
            offset: page.offset,
        })
        .await
    }

    async fn open(
        &self,
        scopes: &[MemoryScope],
        id: &str,
        now: Timestamp,
    ) -> Result<Option<Memory>, MemoryError> {
        let found = self
            .search(Search {
                whose: Whose::Scopes(scopes.to_vec()),
                order: Order::Newest,
                id: Some(id.to_owned()),
                kinds: Vec::new(),
                min_confidence: f64::NEG_INFINITY,
                now: now.0,
                limit: 1,
                offset: 0,
            })
            .await?;
        Ok(found.into_iter().next())
    }

    async fn forget(
        &self,
        scope: &MemoryScope,
        id: &str,
        now: Timestamp,
    ) -> Result<bool, MemoryError> {
        let (scope, id) = (scope.clone(), id.to_owned());
        let command = |reply| {
            Command::Memory(Box::new(MemoryCommand::Forget {
                scope,
                id,
                now: now.0,
                reply,
            }))
        };
        self.call(command).await.map_err(store_failed)
    }

    async fn owned(&self, page: &Owned<'_>) -> Result<Vec<Memory>, MemoryError> {
        self.search(Search {
            whose: Whose::Owner {
                owner: page.owner.to_owned(),
                agent: page.agent.map(str::to_owned),
                facet: page.facet.map(str::to_owned),
            },
            order: Order::Newest,
            id: page.id.map(str::to_owned),
            kinds: Vec::new(),
            min_confidence: f64::NEG_INFINITY,
            now: page.now.0,
            limit: page.limit.min(MAX_READ),
            offset: page.offset,
        })
        .await
    }

    async fn delete_owned(&self, owner: &str, id: &str) -> Result<bool, MemoryError> {
        let (owner, id) = (owner.to_owned(), id.to_owned());
        let command =
            |reply| Command::Memory(Box::new(MemoryCommand::DeleteOwned { owner, id, reply }));
        self.call(command).await.map_err(store_failed)
    }

    async fn delete_all_owned(&self, owner: &str, now: Timestamp) -> Result<u64, MemoryError> {
        let owner = owner.to_owned();
        let command = |reply| {
            Command::Memory(Box::new(MemoryCommand::DeleteAllOwned {
                owner,
                now: now.0,
                reply,
            }))
        };
        self.call(command).await.map_err(store_failed)
    }

    async fn count_by_tier(&self, now: Timestamp) -> Result<TierCounts, MemoryError> {
        let command =
            |reply| Command::Memory(Box::new(MemoryCommand::CountByTier { now: now.0, reply }));
        self.call(command).await.map_err(store_failed)
    }

    async fn purge_forgotten(&self, before: Timestamp) -> Result<u64, MemoryError> {
        let command = |reply| {
            Command::Memory(Box::new(MemoryCommand::Purge {
                before: before.0,
                reply,
            }))
        };
        self.call(command).await.map_err(store_failed)
    }
}

#[cfg(test)]
mod tests {
    use agentwire_core::memory::conformance;

    #[tokio::test]
    async fn the_sqlite_store_passes_the_memory_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        let store = super::SqliteStore::open(&dir.path().join("m.db"))
            .await
            .unwrap();
        conformance::all(&store, "sqlite").await;
    }

    /// 100,000 random operations over 200 callers, 5 facets and 3 agents:
    /// no read crosses a scope, nothing forgotten or deleted is read.
    #[tokio::test]
    async fn no_scope_is_crossed_in_100000_random_operations() {
        let dir = tempfile::tempdir().unwrap();
        let store = super::SqliteStore::open(&dir.path().join("m.db"))
            .await
            .unwrap();
        let universe = conformance::Universe::FULL;
        conformance::isolation_holds(&store, "iso", universe, 100_000, 0x5eed).await;
    }
}
