//! Tests of the tool index: ranking of names, servers, descriptions and parameters, name
//! splitting, several servers replaced in one commit. Its latency is measured by the
//! criterion bench `benches/search.rs`.

use std::sync::Arc;

use super::*;

/// An owned tool, so tests can build `ToolDoc`s from literals.
struct T {
    name: String,
    description: String,
    params: Vec<String>,
}

fn t(name: &str, description: &str, params: &[&str]) -> T {
    T {
        name: name.to_owned(),
        description: description.to_owned(),
        params: params.iter().map(|p| (*p).to_owned()).collect(),
    }
}

fn put(index: &ToolIndex, server: &str, tools: &[T]) {
    let docs: Vec<ToolDoc<'_>> = tools
        .iter()
        .map(|tool| ToolDoc {
            name: &tool.name,
            description: &tool.description,
            params: &tool.params,
        })
        .collect();
    index.replace_server(server, &docs).unwrap();
}

fn names(hits: &[Hit]) -> Vec<String> {
    hits.iter()
        .map(|h| format!("{}:{}", h.server, h.name))
        .collect()
}

fn top(index: &ToolIndex, query: &str) -> String {
    let hits = index.search(query, 10).unwrap();
    assert!(!hits.is_empty(), "no hits for {query:?}");
    format!("{}:{}", hits[0].server, hits[0].name)
}

fn fixture() -> ToolIndex {
    let index = ToolIndex::new().unwrap();
    put(
        &index,
        "github",
        &[
            t(
                "delete_repo",
                "Delete a GitHub repository.",
                &["owner", "repo"],
            ),
            t(
                "create_repo",
                "Create a new GitHub repository.",
                &["name", "private"],
            ),
            t(
                "delete_branch",
                "Delete a branch of a repository.",
                &["owner", "repo", "branchName"],
            ),
            t(
                "list_repos",
                "List repositories of a user or organization.",
                &["owner"],
            ),
            t(
                "search_code",
                "Search code across GitHub repositories.",
                &["q"],
            ),
        ],
    );
    put(
        &index,
        "gitlab",
        &[
            t("delete_repo", "Delete a GitLab project.", &["project_id"]),
            t(
                "list_merge_requests",
                "List merge requests of a project.",
                &["project_id", "state"],
            ),
        ],
    );
    put(
        &index,
        "files",
        &[
            t(
                "read_file",
                "Read the contents of a file from disk.",
                &["path"],
            ),
            t(
                "write_file",
                "Write text to a file, replacing it.",
                &["path", "content"],
            ),
            t(
                "cleanup",
                "Delete repo delete repo: deletes repos, deleting a repo and another repo.",
                &["target"],
            ),
        ],
    );
    put(
        &index,
        "k8s",
        &[t(
            "apply_manifest",
            "Apply a manifest to a Kubernetes cluster.",
            &["manifestYaml", "dryRun"],
        )],
    );
    index
}

#[test]
fn exact_name_query_ranks_that_tool_first() {
    let index = fixture();
    // `files:cleanup` repeats "delete repo" in its description; the exact
    // name must still win.
    let hits = index.search("delete_repo", 10).unwrap();
    let first_two: Vec<_> = names(&hits).into_iter().take(2).collect();
    assert_eq!(first_two, ["github:delete_repo", "gitlab:delete_repo"]);
    assert_eq!(top(&index, "read_file"), "files:read_file");
    assert_eq!(
        top(&index, "LIST_MERGE_REQUESTS"),
        "gitlab:list_merge_requests"
    );
    assert_eq!(top(&index, "\"apply_manifest\""), "k8s:apply_manifest");
}

#[test]
fn server_qualified_query_favours_that_server() {
    let index = fixture();
    assert_eq!(top(&index, "gitlab:delete_repo"), "gitlab:delete_repo");
    assert_eq!(top(&index, "github:delete_repo"), "github:delete_repo");
    assert_eq!(
        top(&index, "please call gitlab:delete_repo now"),
        "gitlab:delete_repo"
    );
    // A server prefix alone still narrows towards that server.
    assert_eq!(top(&index, "k8s: apply"), "k8s:apply_manifest");
}

#[test]
fn description_words_find_tools() {
    let index = fixture();
    assert_eq!(top(&index, "kubernetes"), "k8s:apply_manifest");
    assert_eq!(top(&index, "contents from disk"), "files:read_file");
    // camel-case words in prose match both whole and split.
    assert_eq!(top(&index, "gitlab project"), "gitlab:delete_repo");
    let github = index.search("github", 10).unwrap();
    assert!(names(&github).contains(&"github:search_code".to_owned()));
}

#[test]
fn parameter_names_find_tools() {
    let index = fixture();
    assert_eq!(top(&index, "branchName"), "github:delete_branch");
    assert_eq!(top(&index, "branch name"), "github:delete_branch");
    assert_eq!(top(&index, "dry run yaml"), "k8s:apply_manifest");
    assert_eq!(
        top(&index, "project_id state"),
        "gitlab:list_merge_requests"
    );
}

#[test]
fn snake_camel_and_kebab_names_split_alike() {
    let index = ToolIndex::new().unwrap();
    put(
        &index,
        "a",
        &[t("delete_repo", "", &[]), t("other", "", &[])],
    );
    put(&index, "b", &[t("deleteRepo", "", &[])]);
    put(&index, "c", &[t("delete-repo", "", &[])]);
    put(&index, "d", &[t("HTTPDeleteRepo", "", &[])]);
    for query in ["delete repo", "Delete Repo", "deleting repos"] {
        let mut found = names(&index.search(query, 10).unwrap());
        found.sort();
        assert_eq!(
            found,
            [
                "a:delete_repo",
                "b:deleteRepo",
                "c:delete-repo",
                "d:HTTPDeleteRepo"
            ],
            "query {query:?}"
        );
    }
    // Each exact spelling wins for itself.
    assert_eq!(top(&index, "deleteRepo"), "b:deleteRepo");
    assert_eq!(top(&index, "delete-repo"), "c:delete-repo");
    assert_eq!(top(&index, "delete_repo"), "a:delete_repo");
    assert_eq!(top(&index, "http"), "d:HTTPDeleteRepo");
}

#[test]
fn replace_swaps_a_servers_tools() {
    let index = fixture();
    assert_eq!(index.len(), 11);
    put(
        &index,
        "github",
        &[t("get_issue", "Fetch one issue.", &["number"])],
    );
    assert_eq!(index.len(), 7);
    let hits = index
        .search("delete_repo create_repo list_repos", 20)
        .unwrap();
    assert!(hits.iter().all(|h| h.server != "github"), "{hits:?}");
    assert_eq!(top(&index, "issue"), "github:get_issue");
    // Other servers are untouched.
    assert_eq!(top(&index, "gitlab:delete_repo"), "gitlab:delete_repo");

    index.remove_server("github").unwrap();
    assert_eq!(index.len(), 6);
    assert!(index.search("issue", 10).unwrap().is_empty());
    index.remove_server("no-such-server").unwrap();
    assert_eq!(index.len(), 6);

    // Replacing with nothing empties the server; duplicates keep the first.
    put(&index, "files", &[]);
    put(
        &index,
        "dup",
        &[t("same", "first", &[]), t("same", "second", &[])],
    );
    assert_eq!(index.len(), 4);
    assert!(index.search("second", 10).unwrap().is_empty());
}

#[test]
fn updates_merge_segments_and_leave_no_writer_open() {
    let index = fixture();
    for round in 0..3 * MAX_SEGMENTS {
        let description = format!("Fetch issue number {round}.");
        put(
            &index,
            "github",
            &[t("get_issue", &description, &["number"])],
        );
    }
    assert_eq!(index.len(), 7);
    assert_eq!(top(&index, "issue"), "github:get_issue");
    let segments = index.index.searchable_segment_ids().unwrap();
    assert!(
        segments.len() <= MAX_SEGMENTS + 1,
        "{} segments",
        segments.len()
    );
    // A writer left open between updates would hold the index's writer lock.
    let writer = index
        .open_writer()
        .expect("no writer is open between updates");
    drop(writer);
}

#[test]
fn server_names_are_exact_keys() {
    let index = ToolIndex::new().unwrap();
    put(&index, "git", &[t("a", "", &[])]);
    put(&index, "github", &[t("b", "", &[])]);
    put(&index, "Git", &[t("c", "", &[])]);
    index.remove_server("git").unwrap();
    assert_eq!(names(&index.search("", 10).unwrap()), ["Git:c", "github:b"]);
}

#[test]
fn hostile_queries_never_fail() {
    let index = fixture();
    let empty = ToolIndex::new().unwrap();
    let long_unique: String = (0..2_000).map(|i| format!("w{i} ")).collect();
    let queries: Vec<String> = [
        "\"",
        "\"unbalanced quote",
        "a AND b OR NOT c",
        "*",
        "?*",
        "(((",
        ")",
        "title:foo",
        ":",
        "::",
        "a:",
        ":b",
        "a:b:c",
        "\\",
        "[1 TO 2]",
        "{}",
        "+-!^~",
        "-delete_repo",
        "+delete_repo^10",
        "delete_repo~2",
        "ünïcödé ΣΊΣΥΦΟΣ",
        "日本語 ツール",
        "🦀🦀 🦀",
        "\u{0}\u{1}\u{7f}",
        "\u{202e}evil\u{200b}",
        "\t\n\r",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([
        "x".repeat(10_000),
        "delete ".repeat(1_500),
        "a:".repeat(5_000),
        "é".repeat(5_000),
        long_unique,
    ])
    .collect();
    for query in &queries {
        for limit in [0, 1, 10, usize::MAX] {
            let hits = index.search(query, limit);
            assert!(
                hits.is_ok(),
                "query {:?}: {hits:?}",
                &query[..query.len().min(40)]
            );
            assert!(hits.unwrap().len() <= limit);
            assert!(empty.search(query, limit).unwrap().is_empty());
        }
    }
}

#[test]
fn empty_query_lists_by_server_then_name() {
    let index = fixture();
    let expected = [
        "files:cleanup",
        "files:read_file",
        "files:write_file",
        "github:create_repo",
        "github:delete_branch",
        "github:delete_repo",
        "github:list_repos",
        "github:search_code",
        "gitlab:delete_repo",
        "gitlab:list_merge_requests",
        "k8s:apply_manifest",
    ];
    for query in ["", "   ", "\t\n", "***", "::"] {
        let hits = index.search(query, 100).unwrap();
        assert_eq!(names(&hits), expected, "query {query:?}");
        assert!(hits.iter().all(|h| h.score == 0.0));
    }
    assert_eq!(names(&index.search("", 3).unwrap()), expected[..3]);
}

#[test]
fn limit_is_respected() {
    let index = fixture();
    assert!(index.search("", 0).unwrap().is_empty());
    assert!(index.search("delete", 0).unwrap().is_empty());
    assert_eq!(index.search("delete", 1).unwrap().len(), 1);
    assert_eq!(index.search("", usize::MAX).unwrap().len(), 11);
    let all = index.search("delete repo", usize::MAX).unwrap();
    let two = index.search("delete repo", 2).unwrap();
    assert_eq!(two, all[..2]);
    assert!(all.windows(2).all(|w| w[0].score >= w[1].score));
}

#[test]
fn equal_scores_tie_break_by_server_then_name() {
    let index = ToolIndex::new().unwrap();
    // Added in an order unlike the expected one, one segment per server.
    for server in ["c", "a", "b"] {
        put(
            &index,
            server,
            &[t("zeta", "same words", &[]), t("alpha", "same words", &[])],
        );
    }
    let hits = index.search("same words", 10).unwrap();
    assert_eq!(
        names(&hits),
        [
            "a:alpha", "a:zeta", "b:alpha", "b:zeta", "c:alpha", "c:zeta"
        ]
    );
    assert!(
        hits.iter()
            .all(|h| h.score == hits[0].score && h.score > 0.0)
    );
    assert_eq!(
        names(&index.search("same words", 3).unwrap()),
        ["a:alpha", "a:zeta", "b:alpha"]
    );
}

#[test]
fn param_names_reads_schema_properties() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": { "zeta": {}, "alpha": {"type": "string"}, "mid": {} }
    });
    assert_eq!(param_names(&schema), ["alpha", "mid", "zeta"]);
    assert!(param_names(&serde_json::json!({"type": "object"})).is_empty());
    assert!(param_names(&serde_json::json!({"properties": []})).is_empty());
    assert!(param_names(&serde_json::Value::Null).is_empty());
}

#[test]
fn concurrent_searches_see_whole_replacements() {
    const VERSIONS: usize = 60;
    const TOOLS_PER_VERSION: usize = 5;
    let index = Arc::new(fixture());
    let churn = |v: usize| -> Vec<T> {
        (0..TOOLS_PER_VERSION)
            .map(|i| {
                t(
                    &format!("churn_v{v}_t{i}"),
                    &format!("churning tool version{v}"),
                    &[],
                )
            })
            .collect()
    };
    put(&index, "churn", &churn(0));

    let readers: Vec<_> = (0..4)
        .map(|_| {
            let index = Arc::clone(&index);
            std::thread::spawn(move || {
                for _ in 0..150 {
                    let hits = index.search("churning", 100).unwrap();
                    assert_eq!(hits.len(), TOOLS_PER_VERSION, "{hits:?}");
                    let version = hits[0].name.split('_').nth(1).unwrap().to_owned();
                    assert!(hits.iter().all(|h| h.server == "churn"
                        && h.name.split('_').nth(1) == Some(version.as_str())));
                    assert_eq!(top(&index, "kubernetes"), "k8s:apply_manifest");
                    assert_eq!(index.len(), 11 + TOOLS_PER_VERSION);
                }
            })
        })
        .collect();
    for v in 1..=VERSIONS {
        put(&index, "churn", &churn(v));
    }
    for reader in readers {
        reader.join().unwrap();
    }
    let hits = index.search("churning", 100).unwrap();
    assert!(
        hits.iter()
            .all(|h| h.name.starts_with(&format!("churn_v{VERSIONS}_")))
    );
}

#[test]
fn tool_index_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ToolIndex>();
    assert_send_sync::<Arc<ToolIndex>>();
}

/// Several servers replaced in one commit: each server's old tools go, its new ones come,
/// a server named twice keeps its last entry, and servers not named are untouched.
#[test]
fn replace_servers_replaces_each_server_named_in_one_commit() {
    let index = ToolIndex::new().unwrap();
    put(&index, "kept", &[t("stay", "Untouched.", &[])]);
    put(&index, "a", &[t("old_a", "Replaced.", &[])]);
    let a = [t("new_a", "First of a.", &["x"])];
    let b_first = [t("first_b", "Overridden.", &[])];
    let b_last = [t("last_b", "Second entry wins.", &[])];
    let docs = |tools: &[T]| -> Vec<(String, String, Vec<String>)> {
        tools
            .iter()
            .map(|t| (t.name.clone(), t.description.clone(), t.params.clone()))
            .collect()
    };
    let owned = [docs(&a), docs(&b_first), docs(&b_last)];
    let views: Vec<Vec<ToolDoc<'_>>> = owned
        .iter()
        .map(|tools| {
            tools
                .iter()
                .map(|(name, description, params)| ToolDoc {
                    name,
                    description,
                    params,
                })
                .collect()
        })
        .collect();
    index
        .replace_servers(&[("a", &views[0]), ("b", &views[1]), ("b", &views[2])])
        .unwrap();
    let mut all = names(&index.search("", 100).unwrap());
    all.sort();
    assert_eq!(all, ["a:new_a", "b:last_b", "kept:stay"]);
}

/// Asserts that the one-segment search (term ordinals, pruned scoring) and the search over
/// any segments (strings, every document scored) give the same hits with the same scores.
fn assert_both_searches_agree(index: &ToolIndex, queries: &[&str], limits: &[usize]) {
    let searcher = index.reader.searcher();
    let [segment] = searcher.segment_readers() else {
        panic!("every update merges into one segment");
    };
    let scores = |hits: &[Hit]| hits.iter().map(|h| h.score).collect::<Vec<_>>();
    for &query in queries {
        for &limit in limits {
            let one =
                ToolIndex::search_one_segment(&searcher, segment, index.build_query(query), limit)
                    .unwrap();
            let any =
                ToolIndex::search_segments(&searcher, index.build_query(query), limit).unwrap();
            assert_eq!(names(&one), names(&any), "query {query:?}, limit {limit}");
            assert_eq!(scores(&one), scores(&any), "query {query:?}, limit {limit}");
        }
    }
}

#[test]
fn ties_broken_by_term_ordinals_order_hits_as_the_strings_do() {
    let index = ToolIndex::new().unwrap();
    // Many equal scores: the same description on tools of three servers, names that share
    // long prefixes, added in no order.
    for server in ["zeta", "alpha", "mid"] {
        let tools: Vec<T> = (0..60)
            .rev()
            .map(|i| {
                t(
                    &format!("create_issue_{i}"),
                    "creates an issue in a project",
                    &["title"],
                )
            })
            .collect();
        put(&index, server, &tools);
    }
    let queries = [
        "creates an issue",
        "create_issue_3",
        "alpha:create_issue_12",
        "",
        "nothing here",
    ];
    assert_both_searches_agree(&index, &queries, &[1, 7, 40, 500]);
    assert_eq!(
        names(&index.search("", 2).unwrap()),
        ["alpha:create_issue_0", "alpha:create_issue_1"]
    );
}

#[test]
fn pruned_search_ranks_as_the_full_one_on_a_large_generated_catalogue() {
    // 3,000 tools built from twelve words: every word is in a quarter of the tools or
    // more, and most scores have many equals, where pruning and tie-breaking could go wrong.
    const WORDS: [&str; 12] = [
        "read", "write", "file", "note", "task", "team", "mail", "sheet", "chart", "user", "store",
        "sync",
    ];
    let word = |i: usize| WORDS[i % WORDS.len()];
    let index = ToolIndex::new().unwrap();
    for server in ["left", "right"] {
        let tools: Vec<T> = (0..1500)
            .map(|k| {
                t(
                    &format!("{}_{}_{k}", word(k / 3), word(k + 5)),
                    &format!(
                        "Will {} every {} and {}.",
                        word(k * 7),
                        word(k / 11),
                        word(k + 2)
                    ),
                    &[word(k * 5 + 1), "page"],
                )
            })
            .collect();
        put(&index, server, &tools);
    }
    let queries = [
        "write a note for the team and sync the sheet",
        "read file",
        "task_user_9",
        "left:note_store_40",
        "kubernetes pod logs",
    ];
    assert_both_searches_agree(&index, &queries, &[1, 15, 60, 400]);
}
