//! The tool search index behind `retrieve_tools` (issue 52): one server with 10,000 tools,
//! searched with queries of the kinds agents send, and one server's 50 tools replaced, alone
//! and 20 servers in one commit (what a start with 20 lazy servers costs the index).
//!
//! `cargo bench -p mcpproxy-upstream --bench search`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mcpproxy_upstream::index::{ToolDoc, ToolIndex};

const WORDS: [&str; 40] = [
    "create",
    "delete",
    "list",
    "get",
    "update",
    "search",
    "repository",
    "issue",
    "branch",
    "file",
    "directory",
    "user",
    "project",
    "cluster",
    "pod",
    "deployment",
    "message",
    "channel",
    "email",
    "calendar",
    "event",
    "database",
    "table",
    "query",
    "row",
    "bucket",
    "object",
    "image",
    "document",
    "page",
    "comment",
    "ticket",
    "invoice",
    "payment",
    "customer",
    "order",
    "metric",
    "alert",
    "log",
    "trace",
];

/// A tool as the index takes it, owned.
struct Tool {
    name: String,
    description: String,
    params: Vec<String>,
}

/// `count` tools with names, descriptions and parameters drawn from [`WORDS`], the same for
/// the same `seed`.
fn tools(count: usize, seed: usize) -> Vec<Tool> {
    let word = |i: usize| WORDS[i % WORDS.len()];
    (0..count)
        .map(|i| {
            let k = i + seed;
            Tool {
                name: format!("{}_{}_{i}", word(k), word(k / 7 + 3)),
                description: format!(
                    "{} the {} of a {} in the {}. Returns a {} with {} and {}.",
                    word(k * 3),
                    word(k * 5 + 1),
                    word(k * 11 + 2),
                    word(k + 9),
                    word(k * 13),
                    word(k * 17 + 4),
                    word(k * 19 + 5)
                ),
                params: vec![
                    word(k * 23).to_owned(),
                    word(k * 29 + 1).to_owned(),
                    "limit".into(),
                ],
            }
        })
        .collect()
}

fn docs(tools: &[Tool]) -> Vec<ToolDoc<'_>> {
    tools
        .iter()
        .map(|t| ToolDoc {
            name: &t.name,
            description: &t.description,
            params: &t.params,
        })
        .collect()
}

/// The queries: prose, a tool's exact name, `server:tool`, words that match nothing, and
/// the empty query (which lists).
const QUERIES: [(&str, &str); 6] = [
    ("prose", "query database table rows with a limit"),
    ("two-words", "delete repository"),
    ("exact-name", "create_issue_3"),
    ("qualified", "big:list_file_12"),
    ("no-match", "kubernetes pod logs"),
    ("empty", ""),
];

fn search(c: &mut Criterion) {
    let index = ToolIndex::new().expect("an index in RAM");
    let many = tools(10_000, 0);
    index.replace_server("big", &docs(&many)).expect("indexed");
    let mut group = c.benchmark_group("search_10000_tools");
    for (name, query) in QUERIES {
        group.bench_with_input(BenchmarkId::from_parameter(name), query, |b, query| {
            b.iter(|| index.search(query, 10).expect("searched"));
        });
    }
    group.finish();
}

fn replace(c: &mut Criterion) {
    let index = ToolIndex::new().expect("an index in RAM");
    let servers: Vec<(String, Vec<Tool>)> = (0..20)
        .map(|s| (format!("server{s}"), tools(50, s * 50)))
        .collect();
    let views: Vec<Vec<ToolDoc<'_>>> = servers.iter().map(|(_, t)| docs(t)).collect();
    let batch: Vec<(&str, &[ToolDoc<'_>])> = servers
        .iter()
        .zip(&views)
        .map(|((name, _), docs)| (name.as_str(), docs.as_slice()))
        .collect();
    let mut group = c.benchmark_group("replace");
    group.bench_function("one_server_50_tools", |b| {
        b.iter(|| {
            index
                .replace_server("server0", &views[0])
                .expect("replaced")
        });
    });
    group.bench_function("20_servers_one_by_one", |b| {
        b.iter(|| {
            for (name, docs) in &batch {
                index.replace_server(name, docs).expect("replaced");
            }
        });
    });
    group.bench_function("20_servers_one_commit", |b| {
        b.iter(|| index.replace_servers(&batch).expect("replaced"));
    });
    group.finish();
}

criterion_group!(benches, search, replace);
criterion_main!(benches);
