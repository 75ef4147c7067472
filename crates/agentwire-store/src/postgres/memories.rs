//! Agent memory in the PostgreSQL store: the [`AgentMemory`] port on
//! [`PgStore`]. A read names its scopes as four arrays (one element per
//! scope), so every read is one prepared statement; recall matches the
//! words' `tsquery` against the row's `words`, ranked by `ts_rank`, and,
//! with a vector, compares the scopes' stored vectors exactly (the most
//! recently written [`VECTOR_CANDIDATES`]); the lists are fused with
//! recency ([`fuse`]).

use agentwire_core::memory::vectors::{VECTOR_CANDIDATES, likeness, nearest, vector_from_bytes};
use agentwire_core::memory::{Listing, MAX_READ, Owned, fuse, search_words};
use agentwire_core::{
    AgentMemory, Likeness, Memory, MemoryError, MemoryScope, NewMemory, Recall, Remembered,
    TierCounts,
};

use super::*;
use crate::agent_memory::{MEMORY_COLUMNS, MemoryRow, tier_name};

/// Candidates a recall takes per memory it returns: the recency fusion
/// reorders them.
const CANDIDATES_PER_RESULT: usize = 4;

/// Live, unexpired memories of the scopes in `$1`..`$4` (owner, agent,
/// facet, tier arrays), of the kinds in `$5` (none: any), at least `$6`
/// confident, at `$7`.
const READABLE: &str = "m.forgotten_at IS NULL
    AND (m.expires_at IS NULL OR m.expires_at > $7)
    AND m.confidence >= $6
    AND (cardinality($5::text[]) = 0 OR m.kind = ANY($5::text[]))
    AND (m.owner, m.agent, m.facet, m.tier) IN (
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]))";

fn select(filter: &str, order: &str) -> String {
    let columns: Vec<String> = MEMORY_COLUMNS
        .split(", ")
        .map(|c| format!("m.{c}"))
        .collect();
    format!(
        "SELECT {} FROM memories m WHERE {READABLE} AND {filter} ORDER BY {order}",
        columns.join(", ")
    )
}

/// The scopes as the four arrays the reads take.
struct ScopeArrays {
    owner: Vec<String>,
    agent: Vec<String>,
    facet: Vec<String>,
    tier: Vec<String>,
}

impl ScopeArrays {
    fn of(scopes: &[MemoryScope]) -> ScopeArrays {
        let part = |f: fn(&MemoryScope) -> &str| scopes.iter().map(|s| f(s).to_owned()).collect();
        ScopeArrays {
            owner: part(MemoryScope::owner),
            agent: part(MemoryScope::agent),
            facet: part(MemoryScope::facet),
            tier: scopes
                .iter()
                .map(|s| s.tier().as_str().to_owned())
                .collect(),
        }
    }
}

fn failed(e: StoreError) -> MemoryError {
    MemoryError(e.to_string())
}

fn row_of(row: &Row) -> Result<MemoryRow, StoreError> {
    let what = "a memory";
    let tier: String = get(row, 1, &what)?;
    Ok(MemoryRow {
        id: get(row, 0, &what)?,
        tier: tier_name(&tier).unwrap_or("unknown"),
        owner: get(row, 2, &what)?,
        agent: get(row, 3, &what)?,
        facet: get(row, 4, &what)?,
        scope_token: get(row, 5, &what)?,
        kind: get(row, 6, &what)?,
        content: get(row, 7, &what)?,
        metadata: get(row, 8, &what)?,
        confidence: get(row, 9, &what)?,
        category: get(row, 10, &what)?,
        about_kind: get(row, 11, &what)?,
        about_key: get(row, 12, &what)?,
        purpose: get(row, 13, &what)?,
        title: get(row, 14, &what)?,
        summary: get(row, 15, &what)?,
        session_id: get(row, 16, &what)?,
        created_at: get(row, 17, &what)?,
        updated_at: get(row, 18, &what)?,
        expires_at: get(row, 19, &what)?,
        vector: None,
    })
}

/// A read: `filter` and `order` on the readable memories, with its own
/// parameters from `$8` on.
#[derive(Clone, Copy)]
struct Read<'a> {
    scopes: &'a [MemoryScope],
    kinds: &'a [String],
    min_confidence: f64,
    now: Timestamp,
    filter: &'a str,
    order: &'a str,
    extra: &'a [&'a (dyn ToSql + Sync)],
}

impl PgStore {
    async fn read(&self, read: Read<'_>) -> Result<Vec<Memory>, MemoryError> {
        if read.scopes.is_empty() {
            return Ok(Vec::new());
        }
        let arrays = ScopeArrays::of(read.scopes);
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![
            &arrays.owner,
            &arrays.agent,
            &arrays.facet,
            &arrays.tier,
            &read.kinds,
            &read.min_confidence,
            &read.now.0,
        ];
        params.extend_from_slice(read.extra);
        let sql = select(read.filter, read.order);
        let rows = self
            .query("memories", &sql, &params)
            .await
            .map_err(failed)?;
        rows.iter()
            .map(|row| row_of(row).map_err(failed)?.decode())
            .collect()
    }

    /// The memories `read` finds (its filter and order aside) nearest to
    /// `vector`, best first: at most `limit`, none at a similarity of 0 or
    /// less.
    async fn nearest(
        &self,
        read: Read<'_>,
        vector: &[f32],
        limit: i64,
    ) -> Result<Vec<Memory>, MemoryError> {
        if read.scopes.is_empty() {
            return Ok(Vec::new());
        }
        let arrays = ScopeArrays::of(read.scopes);
        let params: [&(dyn ToSql + Sync); 7] = [
            &arrays.owner,
            &arrays.agent,
            &arrays.facet,
            &arrays.tier,
            &read.kinds,
            &read.min_confidence,
            &read.now.0,
        ];
        let sql = format!(
            "SELECT m.id, m.vector FROM memories m WHERE {READABLE} AND m.vector IS NOT NULL
             ORDER BY m.updated_at DESC LIMIT {VECTOR_CANDIDATES}"
        );
        let rows = self
            .query("memories", &sql, &params)
            .await
            .map_err(failed)?;
        let candidates = rows.iter().filter_map(|r| {
            let bytes: &[u8] = r.get(1);
            Some((r.get::<_, String>(0), vector_from_bytes(bytes)?))
        });
        let limit = usize::try_from(limit).unwrap_or(MAX_READ);
        let ids: Vec<String> = nearest(vector, candidates, limit)
            .into_iter()
            .filter(|(_, similarity)| *similarity > 0.0)
            .map(|(id, _)| id)
            .collect();
        let mut found = self
            .read(Read {
                filter: "m.id = ANY($8)",
                order: "m.id",
                extra: &[&ids],
                ..read
            })
            .await?;
        found.sort_by_key(|m| ids.iter().position(|id| *id == m.id));
        Ok(found)
    }

    /// The live memory of `row`'s scope about its subject, locked for
    /// the transaction.
    async fn about_locked(
        tx: &deadpool_postgres::Transaction<'_>,
        row: &MemoryRow,
    ) -> Result<Option<String>, StoreError> {
        let sql = "SELECT id FROM memories WHERE owner = $1 AND agent = $2 AND facet = $3
            AND tier = $4 AND about_kind = $5 AND about_key = $6 AND forgotten_at IS NULL
            FOR UPDATE";
        let found = tx
            .query_opt(
                sql,
                &[
                    &row.owner,
                    &row.agent,
                    &row.facet,
                    &row.tier,
                    &row.about_kind,
                    &row.about_key,
                ],
            )
            .await
            .map_err(|e| db_error(&e, "a memory"))?;
        Ok(found.map(|r| r.get(0)))
    }

    /// Replaces memory `id` by `row`'s fact, its old version to history.
    async fn replace(
        tx: &deadpool_postgres::Transaction<'_>,
        id: &str,
        row: &MemoryRow,
    ) -> Result<(), StoreError> {
        let history = "INSERT INTO memory_history (memory_id, kind, content, metadata,
                confidence, category, purpose, title, summary, session_id, valid_from,
                valid_until)
            SELECT id, kind, content, metadata, confidence, category, purpose, title, summary,
                session_id, updated_at, $2
            FROM memories WHERE id = $1";
        tx.execute(history, &[&id, &row.updated_at])
            .await
            .map_err(|e| db_error(&e, "a memory's history"))?;
        let update = "UPDATE memories SET kind = $2, content = $3, metadata = $4,
                confidence = $5, category = $6, purpose = $7, title = $8, summary = $9,
                session_id = $10, updated_at = $11, expires_at = $12, vector = $13
            WHERE id = $1";
        let params: [&(dyn ToSql + Sync); 13] = [
            &id,
            &row.kind,
            &row.content,
            &row.metadata,
            &row.confidence,
            &row.category,
            &row.purpose,
            &row.title,
            &row.summary,
            &row.session_id,
            &row.updated_at,
            &row.expires_at,
            &row.vector,
        ];
        tx.execute(update, &params)
            .await
            .map(drop)
            .map_err(|e| db_error(&e, "a memory"))
    }

    /// How a write without a subject compares, by vector, with the live
    /// memories without one of its scope (the most recently written
    /// [`VECTOR_CANDIDATES`]).
    async fn likeness(
        tx: &deadpool_postgres::Transaction<'_>,
        row: &MemoryRow,
    ) -> Result<Likeness<String>, StoreError> {
        let (None, Some(vector)) = (&row.about_kind, &row.vector) else {
            return Ok(Likeness::New);
        };
        let sql = "SELECT id, vector FROM memories WHERE owner = $1 AND agent = $2
            AND facet = $3 AND tier = $4 AND forgotten_at IS NULL
            AND (expires_at IS NULL OR expires_at > $5) AND about_kind IS NULL
            AND vector IS NOT NULL ORDER BY updated_at DESC LIMIT $6";
        let limit = VECTOR_CANDIDATES as i64;
        let params: [&(dyn ToSql + Sync); 6] = [
            &row.owner,
            &row.agent,
            &row.facet,
            &row.tier,
            &row.updated_at,
            &limit,
        ];
        let rows = tx
            .query(sql, &params)
            .await
            .map_err(|e| db_error(&e, "a memory"))?;
        let candidates = rows.iter().filter_map(|r| {
            let bytes: &[u8] = r.get(1);
            Some((r.get::<_, String>(0), vector_from_bytes(bytes)?))
        });
        let query = vector_from_bytes(vector).unwrap_or_default();
        Ok(likeness(nearest(&query, candidates, MAX_READ)))
    }

    /// Inserts `row` unless its scope has a live memory about its subject
    /// (then `false`: another writer got there first).
    async fn insert(
        tx: &deadpool_postgres::Transaction<'_>,
        row: &MemoryRow,
    ) -> Result<bool, StoreError> {
        let sql = format!(
            "INSERT INTO memories ({MEMORY_COLUMNS}, vector)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                     $17, $18, $19, $20, $21)
             ON CONFLICT (owner, agent, facet, tier, about_kind, about_key)
                 WHERE about_kind IS NOT NULL AND forgotten_at IS NULL DO NOTHING"
        );
        let params: [&(dyn ToSql + Sync); 21] = [
            &row.id,
            &row.tier,
            &row.owner,
            &row.agent,
            &row.facet,
            &row.scope_token,
            &row.kind,
            &row.content,
            &row.metadata,
            &row.confidence,
            &row.category,
            &row.about_kind,
            &row.about_key,
            &row.purpose,
            &row.title,
            &row.summary,
            &row.session_id,
            &row.created_at,
            &row.updated_at,
            &row.expires_at,
            &row.vector,
        ];
        let inserted = tx
            .execute(&sql, &params)
            .await
            .map_err(|e| db_error(&e, "a memory"))?;
        Ok(inserted == 1)
    }

    /// One attempt at a write, in a transaction: `None` when a concurrent
    /// writer created the subject's memory meanwhile (try again: it is
    /// replaced then).
    async fn try_remember(&self, row: &MemoryRow) -> Result<Option<Remembered>, StoreError> {
        let mut client = self.client("a memory").await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| db_error(&e, "a memory"))?;
        let outcome = match Self::about_locked(&tx, row).await? {
            Some(id) => {
                Self::replace(&tx, &id, row).await?;
                Some(Remembered::Replaced { id })
            }
            None => {
                let judged = Self::likeness(&tx, row).await?;
                match &judged {
                    Likeness::Supersedes(id, _) => Self::replace(&tx, id, row).await?,
                    _ if !Self::insert(&tx, row).await? => return Ok(None),
                    _ => {}
                }
                Some(Remembered::judged(row.id.clone(), judged))
            }
        };
        tx.commit().await.map_err(|e| db_error(&e, "a memory"))?;
        Ok(outcome)
    }
}

#[async_trait]
impl AgentMemory for PgStore {
    async fn remember(&self, memory: NewMemory) -> Result<Remembered, MemoryError> {
        let row = MemoryRow::encode(memory);
        for _ in 0..2 {
            if let Some(done) = self.try_remember(&row).await.map_err(failed)? {
                return Ok(done);
            }
        }
        Err(MemoryError(format!(
            "memory {}: its subject keeps changing",
            row.id
        )))
    }

    async fn recall(
        &self,
        scopes: &[MemoryScope],
        query: &Recall<'_>,
    ) -> Result<Vec<Memory>, MemoryError> {
        let words = search_words(query.text);
        let limit = query.limit.min(MAX_READ);
        let candidates = (limit * CANDIDATES_PER_RESULT) as i64;
        let read = Read {
            scopes,
            kinds: query.kinds,
            min_confidence: query.min_confidence,
            now: query.now,
            filter: "TRUE",
            order: "m.updated_at DESC, m.id LIMIT $8",
            extra: &[],
        };
        let by_text = if words.is_empty() {
            self.read(Read {
                extra: &[&candidates],
                ..read
            })
            .await?
        } else {
            // Whole words only: `search_words` keeps letters and digits.
            let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
            let any = quoted.join(" | ");
            self.read(Read {
                filter: "m.words @@ to_tsquery('simple', $9)",
                order: "ts_rank(m.words, to_tsquery('simple', $9)) DESC, m.updated_at DESC, \
                        m.id LIMIT $8",
                extra: &[&candidates, &any],
                ..read
            })
            .await?
        };
        let mut lists = vec![by_text];
        if let Some(vector) = query.vector {
            lists.push(self.nearest(read, vector, candidates).await?);
        }
        Ok(fuse(lists, query.now, limit))
    }

    async fn list(
        &self,
        scopes: &[MemoryScope],
        page: &Listing<'_>,
    ) -> Result<Vec<Memory>, MemoryError> {
        let limit = page.limit.min(MAX_READ) as i64;
        let offset = i64::try_from(page.offset).unwrap_or(i64::MAX);
        self.read(Read {
            scopes,
            kinds: page.kinds,
            min_confidence: f64::NEG_INFINITY,
            now: page.now,
            filter: "TRUE",
            order: "m.updated_at DESC, m.id LIMIT $8 OFFSET $9",
            extra: &[&limit, &offset],
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
            .read(Read {
                scopes,
                kinds: &[],
                min_confidence: f64::NEG_INFINITY,
                now,
                filter: "m.id = $8",
                order: "m.id",
                extra: &[&id],
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
        let sql = "UPDATE memories SET forgotten_at = $6
            WHERE id = $1 AND owner = $2 AND agent = $3 AND facet = $4 AND tier = $5
            AND forgotten_at IS NULL AND (expires_at IS NULL OR expires_at > $6)";
        let params: [&(dyn ToSql + Sync); 6] = [
            &id,
            &scope.owner(),
            &scope.agent(),
            &scope.facet(),
            &scope.tier().as_str(),
            &now.0,
        ];
        let changed = self
            .execute("a memory", sql, &params)
            .await
            .map_err(failed)?;
        Ok(changed == 1)
    }

    async fn owned(&self, page: &Owned<'_>) -> Result<Vec<Memory>, MemoryError> {
        let columns: Vec<String> = MEMORY_COLUMNS
            .split(", ")
            .map(|c| format!("m.{c}"))
            .collect();
        let sql = format!(
            "SELECT {} FROM memories m
             WHERE m.owner = $1 AND m.owner <> '' AND m.forgotten_at IS NULL
             AND (m.expires_at IS NULL OR m.expires_at > $2)
             AND ($3::text IS NULL OR m.agent = $3) AND ($4::text IS NULL OR m.facet = $4)
             AND ($7::text IS NULL OR m.id = $7)
             ORDER BY m.updated_at DESC, m.id LIMIT $5 OFFSET $6",
            columns.join(", ")
        );
        let limit = page.limit.min(MAX_READ) as i64;
        let offset = i64::try_from(page.offset).unwrap_or(i64::MAX);
        let params: [&(dyn ToSql + Sync); 7] = [
            &page.owner,
            &page.now.0,
            &page.agent,
            &page.facet,
            &limit,
            &offset,
            &page.id,
        ];
        let rows = self
            .query("memories", &sql, &params)
            .await
            .map_err(failed)?;
        rows.iter()
            .map(|row| row_of(row).map_err(failed)?.decode())
            .collect()
    }

    async fn delete_owned(&self, owner: &str, id: &str) -> Result<bool, MemoryError> {
        let sql = "WITH gone AS (
                DELETE FROM memories WHERE id = $1 AND owner = $2 AND owner <> '' RETURNING id),
            history AS (
                DELETE FROM memory_history WHERE memory_id IN (SELECT id FROM gone))
            SELECT count(*) FROM gone";
        let rows = self
            .query("a memory", sql, &[&id, &owner])
            .await
            .map_err(failed)?;
        let count: i64 = rows.first().map_or(0, |row| row.get(0));
        Ok(count == 1)
    }

    async fn delete_all_owned(&self, owner: &str, now: Timestamp) -> Result<u64, MemoryError> {
        // One statement: the rows, their history and the audit row go
        // together or not at all.
        let sql = "WITH gone AS (
                DELETE FROM memories WHERE owner = $1 AND owner <> '' RETURNING id),
            history AS (
                DELETE FROM memory_history WHERE memory_id IN (SELECT id FROM gone)),
            audit AS (
                INSERT INTO memory_audit (at, owner, action, memories)
                SELECT $2, $1, 'delete_all', count(*) FROM gone WHERE $1 <> '')
            SELECT count(*) FROM gone";
        let rows = self
            .query("an owner's memories", sql, &[&owner, &now.0])
            .await
            .map_err(failed)?;
        let count: i64 = rows.first().map_or(0, |row| row.get(0));
        Ok(count as u64)
    }

    async fn count_by_tier(&self, now: Timestamp) -> Result<TierCounts, MemoryError> {
        let sql = "SELECT tier, count(*) FROM memories
            WHERE forgotten_at IS NULL AND (expires_at IS NULL OR expires_at > $1)
            GROUP BY tier";
        let rows = self
            .query("memories by tier", sql, &[&now.0])
            .await
            .map_err(failed)?;
        let mut counts = TierCounts::default();
        for row in &rows {
            let (tier, n): (String, i64) = (row.get(0), row.get(1));
            if let Some(tier) = agentwire_core::MemoryTier::parse(&tier) {
                counts.add(tier, n as u64);
            }
        }
        Ok(counts)
    }

    async fn purge_forgotten(&self, before: Timestamp) -> Result<u64, MemoryError> {
        let sql = "WITH gone AS (
                DELETE FROM memories WHERE forgotten_at < $1 OR expires_at < $1 RETURNING id),
            history AS (
                DELETE FROM memory_history WHERE memory_id IN (SELECT id FROM gone))
            SELECT count(*) FROM gone";
        let rows = self
            .query("forgotten memories", sql, &[&before.0])
            .await
            .map_err(failed)?;
        let count: i64 = rows.first().map_or(0, |row| row.get(0));
        Ok(count as u64)
    }
}
