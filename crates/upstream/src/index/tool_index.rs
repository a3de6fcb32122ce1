//! The index ([`ToolIndex`]): its schema and field boosts, replacing and removing a server's
//! tools, and BM25 search over them with the query text run through the fields' analyzers.

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Instant;

use tantivy::collector::TopDocs;
use tantivy::collector::sort_key::{SortBySimilarityScore, SortByString};
use tantivy::query::{AllQuery, BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{
    Index, IndexReader, IndexWriter, Order, ReloadPolicy, TantivyDocument, Term,
    indexer::{IndexWriterOptions, NoMergePolicy},
};

use super::analysis;
use super::by_ord::{OrdHit, SortByTermOrd, term, terms_of, top_by_score};

/// What the index needs to know about one tool.
#[derive(Clone, Copy, Debug)]
pub struct ToolDoc<'a> {
    /// Tool name as the upstream advertises it.
    pub name: &'a str,
    /// Tool description (may be empty).
    pub description: &'a str,
    /// Parameter names, from `inputSchema.properties` (see [`param_names`]).
    pub params: &'a [String],
}

/// One search result.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// Upstream server name.
    pub server: String,
    /// Tool name as the upstream advertises it.
    pub name: String,
    /// BM25 score (0.0 when listing for an empty query).
    pub score: f32,
}

/// Errors from the tool index. Searching can only fail on an internal
/// tantivy error, never because of the query text.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// tantivy failed while indexing, committing or searching.
    #[error("tool index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
}

pub(super) type Result<T, E = Error> = std::result::Result<T, E>;

/// Parameter names of a tool: the keys of `input_schema.properties`, sorted.
/// Empty when the schema has no `properties` object.
pub fn param_names(input_schema: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<String> = input_schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|props| props.keys().cloned().collect())
        .unwrap_or_default();
    names.sort();
    names
}

// Field boosts. The exact-name fields dominate so that a query naming a tool
// (`delete_repo`, `github:delete_repo`) puts that tool first.
const BOOST_QUALIFIED: f32 = 8.0;
const BOOST_NAME_EXACT: f32 = 5.0;
const BOOST_SERVER_EXACT: f32 = 2.0;
const BOOST_NAME: f32 = 3.0;
const BOOST_PARAMS: f32 = 1.5;
const BOOST_SERVER: f32 = 1.0;
const BOOST_DESCRIPTION: f32 = 1.0;

/// Upper bound on distinct terms taken from one query (per analyzer), so a
/// 10 KB query costs no more than a long sentence.
const MAX_QUERY_TERMS: usize = 64;

/// Indexing arena for the single writer thread (tantivy's minimum is 15 MB).
const WRITER_MEMORY_BYTES: usize = 20_000_000;

/// Every `replace_server` adds a segment; past this many, all segments are
/// merged into one, synchronously (see [`ToolIndex::update`]). One: a search breaks ties
/// by term ordinals, which order hits within one segment only (`by_ord`); an index of
/// several segments (a merge that failed) is searched the slower way.
const MAX_SEGMENTS: usize = 1;

// Raw (untokenized, fast) field names, used for deletion and ordering.
const F_SERVER: &str = "server";
const F_NAME: &str = "name";

#[derive(Clone, Copy)]
struct Fields {
    /// Raw server name: delete key and sort key.
    server: Field,
    /// Raw tool name: sort key.
    name: Field,
    /// Lowercased whole tool name.
    name_exact: Field,
    /// Lowercased `server:name`.
    qualified: Field,
    /// Lowercased whole server name.
    server_exact: Field,
    /// Tool name split into words.
    name_text: Field,
    /// Server name split into words.
    server_text: Field,
    description: Field,
    params: Field,
}

/// BM25 index over every upstream tool. `Send + Sync`; share it as
/// `Arc<ToolIndex>`. Searches are lock-free against the last committed
/// snapshot; updates are serialized by a mutex, and each opens a writer of
/// its own and closes it when committed: an idle writer would keep its
/// threads and a ~2.4 MB document queue (tantivy makes a new one at every
/// commit) for updates that come only when an upstream's tools change.
pub struct ToolIndex {
    fields: Fields,
    index: Index,
    reader: IndexReader,
    updates: Mutex<()>,
    ident: TextAnalyzer,
    prose: TextAnalyzer,
    exact: TextAnalyzer,
}

impl std::fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolIndex")
            .field("len", &self.len())
            .finish()
    }
}

fn text_options(analyzer: &str) -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(analyzer)
            .set_index_option(IndexRecordOption::WithFreqs),
    )
}

impl ToolIndex {
    /// Creates an empty index held in RAM.
    pub fn new() -> Result<Self> {
        let mut builder = Schema::builder();
        let fields = Fields {
            server: builder.add_text_field(F_SERVER, STRING | FAST),
            name: builder.add_text_field(F_NAME, STRING | FAST),
            name_exact: builder.add_text_field("name_exact", text_options(analysis::EXACT)),
            qualified: builder.add_text_field("qualified", text_options(analysis::EXACT)),
            server_exact: builder.add_text_field("server_exact", text_options(analysis::EXACT)),
            name_text: builder.add_text_field("name_text", text_options(analysis::IDENT)),
            server_text: builder.add_text_field("server_text", text_options(analysis::IDENT)),
            description: builder.add_text_field("description", text_options(analysis::PROSE)),
            params: builder.add_text_field("params", text_options(analysis::IDENT)),
        };
        let index = Index::create_in_ram(builder.build());
        let ident = analysis::ident_analyzer();
        let prose = analysis::prose_analyzer();
        let exact = analysis::exact_analyzer();
        index.tokenizers().register(analysis::IDENT, ident.clone());
        index.tokenizers().register(analysis::PROSE, prose.clone());
        index.tokenizers().register(analysis::EXACT, exact.clone());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Self {
            fields,
            index,
            reader,
            updates: Mutex::new(()),
            ident,
            prose,
            exact,
        })
    }

    /// Atomically replaces every tool of `server` with `tools` (one commit).
    /// When this returns, [`search`](Self::search) sees the new tools.
    /// Each tool's own `server` field is ignored in favour of `server`;
    /// duplicate tool names keep the first occurrence.
    pub fn replace_server(&self, server: &str, tools: &[ToolDoc<'_>]) -> Result<()> {
        self.replace_servers(&[(server, tools)])
    }

    /// Replaces the tools of several servers, as [`replace_server`](Self::replace_server)
    /// does for one, in one commit: a commit costs milliseconds whatever it holds, so the
    /// servers whose tools are known when mcpproxy starts are published together. A server
    /// named twice gets the tools of its last entry.
    pub fn replace_servers(&self, servers: &[(&str, &[ToolDoc<'_>])]) -> Result<()> {
        let started = Instant::now();
        let mut changes: Vec<(&str, Vec<TantivyDocument>)> = Vec::with_capacity(servers.len());
        for &(server, tools) in servers {
            let mut seen = HashSet::with_capacity(tools.len());
            let mut docs = Vec::with_capacity(tools.len());
            for tool in tools {
                if seen.insert(tool.name) {
                    docs.push(self.document(server, tool));
                } else {
                    tracing::warn!(
                        server,
                        tool = tool.name,
                        "duplicate tool name; keeping the first"
                    );
                }
            }
            changes.retain(|(earlier, _)| *earlier != server);
            changes.push((server, docs));
        }
        let count: usize = changes.iter().map(|(_, docs)| docs.len()).sum();
        self.update(changes)?;
        tracing::debug!(servers = servers.len(), tools = count, elapsed = ?started.elapsed(), "tool index: replaced servers");
        Ok(())
    }

    /// Removes every tool of `server`. Removing an unknown server is a no-op.
    pub fn remove_server(&self, server: &str) -> Result<()> {
        self.update(vec![(server, Vec::new())])?;
        tracing::debug!(server, "tool index: removed server");
        Ok(())
    }

    /// Ranks tools against free-text `query`, best first, at most `limit`.
    ///
    /// An empty or whitespace-only query (or one with nothing searchable,
    /// like `***`) lists all tools ordered by server then name, score 0.0.
    /// Equal scores are ordered by server, then name.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>> {
        let searcher = self.reader.searcher();
        let total = usize::try_from(searcher.num_docs()).unwrap_or(usize::MAX);
        let limit = limit.min(total);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let query = self.build_query(query);
        match searcher.segment_readers() {
            [segment] => Self::search_one_segment(&searcher, segment, query, limit),
            _ => Self::search_segments(&searcher, query, limit),
        }
    }

    /// [`search`](Self::search) over any number of segments, ties broken by the strings.
    fn search_segments(
        searcher: &tantivy::Searcher,
        query: Option<Box<dyn Query>>,
        limit: usize,
    ) -> Result<Vec<Hit>> {
        let Some(query) = query else {
            let collector = TopDocs::with_limit(limit).order_by((
                (SortByString::for_field(F_SERVER), Order::Asc),
                (SortByString::for_field(F_NAME), Order::Asc),
            ));
            let docs = searcher.search(&AllQuery, &collector)?;
            return Ok(docs
                .into_iter()
                .map(|((server, name), _)| hit(server, name, 0.0))
                .collect());
        };
        let collector = TopDocs::with_limit(limit).order_by((
            (SortBySimilarityScore, Order::Desc),
            (SortByString::for_field(F_SERVER), Order::Asc),
            (SortByString::for_field(F_NAME), Order::Asc),
        ));
        let docs = searcher.search(&query, &collector)?;
        Ok(docs
            .into_iter()
            .map(|((score, server, name), _)| hit(server, name, score))
            .collect())
    }

    /// [`search`](Self::search) in an index of one segment (the usual case: every update
    /// merges into one), ties broken by term ordinals (`by_ord`).
    fn search_one_segment(
        searcher: &tantivy::Searcher,
        segment: &tantivy::SegmentReader,
        query: Option<Box<dyn Query>>,
        limit: usize,
    ) -> Result<Vec<Hit>> {
        let by_server = (SortByTermOrd::for_field(F_SERVER), Order::Asc);
        let by_name = (SortByTermOrd::for_field(F_NAME), Order::Asc);
        let found: Vec<OrdHit> = match query {
            Some(query) => {
                top_by_score(searcher, segment, query.as_ref(), limit, (F_SERVER, F_NAME))?
            }
            None => {
                let collector = TopDocs::with_limit(limit).order_by((by_server, by_name));
                searcher
                    .search(&AllQuery, &collector)?
                    .into_iter()
                    .map(|((server, name), _)| (0.0, server, name))
                    .collect()
            }
        };
        let servers = terms_of(segment, F_SERVER, found.iter().filter_map(|hit| hit.1))?;
        let names = terms_of(segment, F_NAME, found.iter().filter_map(|hit| hit.2))?;
        Ok(found
            .into_iter()
            .map(|(score, server, name)| Hit {
                server: term(&servers, server),
                name: term(&names, name),
                score,
            })
            .collect())
    }

    /// Number of tools in the current snapshot.
    pub fn len(&self) -> usize {
        usize::try_from(self.reader.searcher().num_docs()).unwrap_or(usize::MAX)
    }

    /// Whether the current snapshot holds no tool.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn document(&self, server: &str, tool: &ToolDoc<'_>) -> TantivyDocument {
        let f = &self.fields;
        let mut doc = TantivyDocument::default();
        doc.add_text(f.server, server);
        doc.add_text(f.name, tool.name);
        doc.add_text(f.name_exact, tool.name);
        doc.add_text(f.qualified, format!("{server}:{}", tool.name));
        doc.add_text(f.server_exact, server);
        doc.add_text(f.name_text, tool.name);
        doc.add_text(f.server_text, server);
        doc.add_text(f.description, tool.description);
        for param in tool.params {
            doc.add_text(f.params, param);
        }
        doc
    }

    /// Deletes each server's documents, adds its `docs`, commits and reloads
    /// the reader, one update at a time, through a writer opened for this update
    /// and closed (its threads joined, its buffers freed) before returning. On
    /// failure nothing is committed: the writer is dropped with its operations.
    ///
    /// Merging is done here, synchronously, rather than by tantivy's
    /// background merge policy: a background merge's file GC holds the
    /// directory meta lock, and a `reload` that meets it sleeps 100 ms.
    /// Merging everything also purges deleted tools from the BM25 stats.
    fn update(&self, changes: Vec<(&str, Vec<TantivyDocument>)>) -> Result<()> {
        // The guard protects no data: a panicking update left nothing committed.
        let _one_at_a_time = mcpproxy_support::lock(&self.updates);
        let mut writer = self.open_writer()?;
        for (server, docs) in changes {
            writer.delete_term(Term::from_field_text(self.fields.server, server));
            for doc in docs {
                writer.add_document(doc)?;
            }
        }
        writer.commit()?;
        let segments = self.index.searchable_segment_ids()?;
        if segments.len() > MAX_SEGMENTS {
            // Not fatal: the index stays correct, only less compact.
            if let Err(err) = writer.merge(&segments).wait() {
                tracing::warn!(%err, "tool index: segment merge failed");
            }
        }
        writer.wait_merging_threads()?;
        self.reader.reload()?;
        Ok(())
    }

    /// A writer with one indexing thread and no background merges.
    fn open_writer(&self) -> Result<IndexWriter> {
        let writer: IndexWriter = self.index.writer_with_options(
            IndexWriterOptions::builder()
                .num_worker_threads(1)
                .num_merge_threads(1)
                .memory_budget_per_thread(WRITER_MEMORY_BYTES)
                .build(),
        )?;
        writer.set_merge_policy(Box::new(NoMergePolicy));
        Ok(writer)
    }

    /// Turns free text into a boolean SHOULD query; `None` when the text
    /// holds nothing searchable.
    fn build_query(&self, text: &str) -> Option<Box<dyn Query>> {
        let f = &self.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut add = |field: Field, terms: &[String], boost: f32| {
            for term in terms {
                let query = TermQuery::new(
                    Term::from_field_text(field, term),
                    IndexRecordOption::WithFreqs,
                );
                clauses.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(Box::new(query), boost)),
                ));
            }
        };

        // Whole whitespace-separated chunks, for exact names and `server:tool`.
        let mut exact = self.exact.clone();
        let (mut names, mut qualified, mut servers) = (Vec::new(), Vec::new(), Vec::new());
        for chunk in text.split_whitespace().take(MAX_QUERY_TERMS) {
            let chunk = chunk.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
            if chunk.is_empty() {
                continue;
            }
            match chunk.rsplit_once(':') {
                Some((server, name)) if !server.is_empty() && !name.is_empty() => {
                    analysis::terms_into(&mut exact, chunk, &mut qualified, MAX_QUERY_TERMS);
                    analysis::terms_into(&mut exact, server, &mut servers, MAX_QUERY_TERMS);
                    analysis::terms_into(&mut exact, name, &mut names, MAX_QUERY_TERMS);
                }
                _ => analysis::terms_into(&mut exact, chunk, &mut names, MAX_QUERY_TERMS),
            }
        }
        add(f.qualified, &qualified, BOOST_QUALIFIED);
        add(f.name_exact, &names, BOOST_NAME_EXACT);
        add(f.server_exact, &servers, BOOST_SERVER_EXACT);

        // Words, for everything else.
        let mut words = Vec::new();
        analysis::terms_into(&mut self.ident.clone(), text, &mut words, MAX_QUERY_TERMS);
        add(f.name_text, &words, BOOST_NAME);
        add(f.params, &words, BOOST_PARAMS);
        add(f.server_text, &words, BOOST_SERVER);
        let mut prose = Vec::new();
        analysis::terms_into(&mut self.prose.clone(), text, &mut prose, MAX_QUERY_TERMS);
        add(f.description, &prose, BOOST_DESCRIPTION);

        if clauses.is_empty() {
            None
        } else {
            Some(Box::new(BooleanQuery::new(clauses)))
        }
    }
}

fn hit(server: Option<String>, name: Option<String>, score: f32) -> Hit {
    Hit {
        server: server.unwrap_or_default(),
        name: name.unwrap_or_default(),
        score,
    }
}
