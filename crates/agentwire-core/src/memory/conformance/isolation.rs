//! The isolation property: random remember, recall, list, open, forget,
//! delete and delete-all operations over many callers, facets and agents,
//! checked against a model of what each scope holds. Every read must
//! return only memories of the scopes it names, never a forgotten or
//! deleted one, and exactly what the model holds where the model can tell.
//!
//! Most writes and half the recalls carry a vector, one of a few
//! orthogonal directions: a write without a subject in the direction of a
//! live memory without one of its own scope must supersede exactly that
//! memory (and never one of another scope), and a recall must find the
//! memories of its direction besides those of its word.

use std::collections::{HashMap, HashSet};

use super::*;

/// A small deterministic generator (xorshift64*): the same seed, the same
/// operations, so a failure is reproduced by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// How many of each the operations range over.
#[derive(Debug, Clone, Copy)]
pub struct Universe {
    pub callers: usize,
    pub facets: usize,
    pub agents: usize,
}

impl Universe {
    /// The issue's: 200 callers, 5 facets (one of them none), 3 agents.
    pub const FULL: Universe = Universe {
        callers: 200,
        facets: 5,
        agents: 3,
    };
}

/// The orthogonal directions vectors take: equal ones are the same fact
/// (similarity 1), others unrelated (0).
const DIRECTIONS: usize = 4;

fn direction(d: usize) -> Vec<f32> {
    (0..DIRECTIONS)
        .map(|i| if i == d { 1.0 } else { 0.0 })
        .collect()
}

/// What the model knows of one memory.
struct Known {
    scope: MemoryScope,
    content: String,
    about: Option<About>,
    /// Its vector's direction, if it has one.
    direction: Option<usize>,
    live: bool,
}

/// The model: every memory not deleted for good, by id, indexed by scope
/// (the live ones) and by owner (all).
#[derive(Default)]
struct Model {
    memories: HashMap<String, Known>,
    /// The live memory of each (scope, subject).
    subjects: HashMap<(MemoryScope, About), String>,
    live: HashMap<MemoryScope, HashSet<String>>,
    by_owner: HashMap<String, HashSet<String>>,
    /// The live memory without a subject of each (scope, direction): what
    /// a write of that direction supersedes.
    alike: HashMap<(MemoryScope, usize), String>,
}

impl Model {
    fn live_in(&self, scopes: &[MemoryScope]) -> HashSet<&str> {
        scopes
            .iter()
            .filter_map(|scope| self.live.get(scope))
            .flatten()
            .map(String::as_str)
            .collect()
    }

    fn insert(&mut self, id: String, known: Known) {
        if let Some(about) = &known.about {
            self.subjects
                .insert((known.scope.clone(), about.clone()), id.clone());
        }
        if let (None, Some(d)) = (&known.about, known.direction) {
            self.alike.insert((known.scope.clone(), d), id.clone());
        }
        self.live
            .entry(known.scope.clone())
            .or_default()
            .insert(id.clone());
        let owner = known.scope.owner().to_owned();
        self.by_owner.entry(owner).or_default().insert(id.clone());
        self.memories.insert(id, known);
    }

    /// `id` is no longer live (forgotten, or deleted).
    fn kill(&mut self, id: &str) {
        let Some(known) = self.memories.get_mut(id) else {
            return;
        };
        known.live = false;
        // Only where it is this memory: a dead one's place may be a later
        // memory's now.
        if let Some(about) = known.about.clone() {
            let key = (known.scope.clone(), about);
            if self.subjects.get(&key).is_some_and(|held| held == id) {
                self.subjects.remove(&key);
            }
        }
        if let (None, Some(d)) = (&known.about, known.direction) {
            let key = (known.scope.clone(), d);
            if self.alike.get(&key).is_some_and(|held| held == id) {
                self.alike.remove(&key);
            }
        }
        if let Some(live) = self.live.get_mut(&known.scope) {
            live.remove(id);
        }
    }

    fn delete(&mut self, id: &str) {
        self.kill(id);
        if let Some(known) = self.memories.remove(id)
            && let Some(owned) = self.by_owner.get_mut(known.scope.owner())
        {
            owned.remove(id);
        }
    }

    fn live_of_owner(&self, owner: &str) -> usize {
        let ids = self.by_owner.get(owner).into_iter().flatten();
        ids.filter(|id| self.memories[*id].live).count()
    }
}

struct Run<'a> {
    store: &'a dyn AgentMemory,
    universe: Universe,
    prefix: &'a str,
    rng: Rng,
    model: Model,
    now: i64,
    ids: Vec<String>,
}

impl Run<'_> {
    fn owner(&mut self) -> String {
        format!("{}-c{}", self.prefix, self.rng.below(self.universe.callers))
    }

    fn caller(&mut self) -> TurnCaller {
        let facet = self.rng.below(self.universe.facets);
        TurnCaller {
            owner: Some(self.owner()),
            memory_facet: (facet > 0).then(|| format!("f{facet}")),
        }
    }

    fn agent(&mut self) -> String {
        format!("a{}", self.rng.below(self.universe.agents))
    }

    /// A scope as the runtime builds one, and what its reads see.
    fn scopes(&mut self) -> (MemoryScope, Vec<MemoryScope>) {
        let caller = self.caller();
        let agent = self.agent();
        // The agent's own tier is written by operators, rarely: a few in a
        // thousand, so its scopes (one per agent) stay within one read.
        let tier = match self.rng.below(1000) {
            0..3 => MemoryTier::Agent,
            3..350 => MemoryTier::Caller,
            _ => MemoryTier::CallerWithAgent,
        };
        let own = MemoryScope::new(tier, &caller, &agent).unwrap();
        let agents = MemoryScope::new(MemoryTier::Agent, &caller, &agent).unwrap();
        let mut readable = vec![own.clone()];
        if tier != MemoryTier::Agent {
            readable.push(agents);
        }
        (own, readable)
    }

    /// Any id ever written, or one never written.
    fn some_id(&mut self) -> String {
        match self.ids.is_empty() || self.rng.below(10) == 0 {
            true => format!("{}-never", self.prefix),
            false => self.ids[self.rng.below(self.ids.len())].clone(),
        }
    }

    async fn remember(&mut self) {
        let (scope, _) = self.scopes();
        let n = self.ids.len();
        let id = format!("{}-m{n}", self.prefix);
        let about = (self.rng.below(3) == 0).then(|| About {
            kind: "k".to_owned(),
            key: format!("s{}", self.rng.below(3)),
        });
        let toward = (self.rng.below(4) > 0).then(|| self.rng.below(DIRECTIONS));
        let content = format!("word{} token{n}", self.rng.below(20));
        let fact = Fact {
            about: about.clone(),
            ..fact(&content)
        };
        let memory = NewMemory {
            vector: toward.map(direction),
            ..new(&id, &scope, fact, self.now)
        };
        let written = self.store.remember(memory).await.unwrap();
        let replaced = match (&about, toward) {
            (Some(a), _) => self.model.subjects.get(&(scope.clone(), a.clone())),
            (None, Some(d)) => self.model.alike.get(&(scope.clone(), d)),
            (None, None) => None,
        };
        match (&written, replaced.cloned()) {
            (
                Remembered::Replaced { id: old } | Remembered::Superseded { id: old, .. },
                Some(expected),
            ) => {
                assert_eq!(old, &expected, "replaced the scope's memory about it");
                let known = self.model.memories.get_mut(old).unwrap();
                known.content = content;
                known.direction = toward;
            }
            (Remembered::Created { id: new_id }, None) => {
                assert_eq!(new_id, &id);
                let known = Known {
                    scope,
                    content,
                    about,
                    direction: toward,
                    live: true,
                };
                self.model.insert(id.clone(), known);
                self.ids.push(id);
            }
            (written, expected) => panic!("{written:?}, the model expected {expected:?}"),
        }
    }

    async fn read(&mut self) {
        let (_, readable) = self.scopes();
        let word = format!("word{}", self.rng.below(20));
        let toward = (self.rng.below(2) == 0).then(|| self.rng.below(DIRECTIONS));
        let vector = toward.map(direction);
        let id = self.some_id();
        let live = self.model.live_in(&readable);
        let query = Recall {
            text: &word,
            vector: vector.as_deref(),
            kinds: &[],
            limit: 100,
            min_confidence: 0.0,
            now: Timestamp(self.now),
        };
        let recalled = self.store.recall(&readable, &query).await.unwrap();
        let expected: HashSet<&str> = live
            .iter()
            .copied()
            .filter(|id| {
                let known = &self.model.memories[*id];
                let worded = known.content.split(' ').any(|w| w == word);
                worded || (toward.is_some() && known.direction == toward)
            })
            .collect();
        check_read("recall", &recalled, &readable, &expected);
        let page = Listing {
            limit: 100,
            ..listing(self.now)
        };
        let listed = self.store.list(&readable, &page).await.unwrap();
        check_read("list", &listed, &readable, &live);
        let opened = self
            .store
            .open(&readable, &id, Timestamp(self.now))
            .await
            .unwrap();
        assert_eq!(
            opened.is_some(),
            live.contains(id.as_str()),
            "open {id} in {readable:?}"
        );
    }

    async fn forget(&mut self) {
        let (own, _) = self.scopes();
        let id = match self.rng.below(2) {
            0 => {
                let mine: Vec<&str> = self
                    .model
                    .live_in(std::slice::from_ref(&own))
                    .into_iter()
                    .collect();
                match mine.is_empty() {
                    true => self.some_id(),
                    false => mine[self.rng.below(mine.len())].to_owned(),
                }
            }
            _ => self.some_id(),
        };
        let forgot = self
            .store
            .forget(&own, &id, Timestamp(self.now))
            .await
            .unwrap();
        let live_here = self
            .model
            .memories
            .get(&id)
            .is_some_and(|k| k.live && k.scope == own);
        assert_eq!(forgot, live_here, "forget {id} in {own:?}");
        if forgot {
            self.model.kill(&id);
        }
    }

    async fn delete(&mut self) {
        let owner = self.owner();
        let id = self.some_id();
        let deleted = self.store.delete_owned(&owner, &id).await.unwrap();
        let owned = self
            .model
            .memories
            .get(&id)
            .is_some_and(|k| k.scope.owner() == owner);
        assert_eq!(deleted, owned, "delete {id} of {owner}");
        if deleted {
            self.model.delete(&id);
        }
    }

    async fn delete_all(&mut self) {
        let owner = self.owner();
        let theirs: Vec<String> = self
            .model
            .by_owner
            .get(&owner)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        let deleted = self
            .store
            .delete_all_owned(&owner, Timestamp(self.now))
            .await
            .unwrap();
        assert_eq!(deleted, theirs.len() as u64, "delete all of {owner}");
        for id in theirs {
            self.model.delete(&id);
        }
    }

    async fn owned(&mut self) {
        let owner = self.owner();
        let mut page = owned_by(&owner);
        page.limit = 100;
        page.now = Timestamp(self.now);
        let found = self.store.owned(&page).await.unwrap();
        for memory in &found {
            assert_eq!(
                memory.scope.owner(),
                owner,
                "owned by another: {}",
                memory.id
            );
            assert!(
                self.model.memories.get(&memory.id).is_some_and(|k| k.live),
                "{}",
                memory.id
            );
        }
        let expected = self.model.live_of_owner(&owner);
        assert_eq!(found.len(), expected.min(100), "owned by {owner}");
    }
}

/// Every memory of `found` is in `scopes` and live; and `found` is the
/// model's set when the model's set fits in one read.
fn check_read(what: &str, found: &[Memory], scopes: &[MemoryScope], expected: &HashSet<&str>) {
    for memory in found {
        assert!(
            scopes.contains(&memory.scope),
            "{what} crossed scopes: {memory:?} for {scopes:?}"
        );
        assert!(
            expected.contains(memory.id.as_str()),
            "{what} read {} it should not",
            memory.id
        );
    }
    if expected.len() <= 100 {
        let ids: HashSet<&str> = found.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(&ids, expected, "{what} in {scopes:?}");
    }
}

/// Runs `operations` random operations from `seed` on `store` (which must
/// hold no memory of `prefix`'s owners), checking each against the model.
pub async fn isolation_holds(
    store: &dyn AgentMemory,
    prefix: &str,
    universe: Universe,
    operations: usize,
    seed: u64,
) {
    let mut run = Run {
        store,
        universe,
        prefix,
        rng: Rng(seed | 1),
        model: Model::default(),
        now: 1_000,
        ids: Vec::new(),
    };
    for _ in 0..operations {
        run.now += 1;
        match run.rng.below(100) {
            0..35 => run.remember().await,
            35..75 => run.read().await,
            75..88 => run.forget().await,
            88..95 => run.delete().await,
            95..97 => run.owned().await,
            97..98 => run.delete_all().await,
            _ => run.owned().await,
        }
    }
}
