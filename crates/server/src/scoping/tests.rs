//! Tests of what a logged-in caller sees: no rule, group rules, several rules narrowing
//! the view, and refusals that read alike for hidden and missing tools.

use super::*;
use mcpproxy_config::ScopeRule;

fn rules() -> Scopes {
    Scopes::new(vec![
        ScopeRule {
            groups: vec!["contractors".into()],
            hide_servers: vec!["prod-db".into()],
            hide_tools: vec![("github".into(), "delete_repo".into())],
            ..ScopeRule::default()
        },
        ScopeRule {
            subjects: vec!["carol".into()],
            only_servers: Some(vec!["docs".into(), "github".into()]),
            ..ScopeRule::default()
        },
        ScopeRule {
            groups: vec!["interns".into()],
            only_servers: Some(vec!["docs".into()]),
            ..ScopeRule::default()
        },
    ])
}

#[test]
fn callers_no_rule_names_see_everything() {
    assert_eq!(rules().view("alice", &["sre".into()]), None);
}

#[test]
fn a_group_rule_hides_its_servers_and_tools() {
    let view = rules()
        .view("bob", &["dev".into(), "contractors".into()])
        .expect("a view");
    assert!(!view.sees_server("prod-db"));
    assert!(!view.sees_tool("prod-db", "query"));
    assert!(!view.sees_tool("github", "delete_repo"));
    assert!(view.sees_tool("github", "create_issue"));
    assert!(view.sees_server("docs"));
}

#[test]
fn only_servers_of_every_rule_that_names_the_caller_narrow_the_view() {
    let view = rules().view("carol", &["interns".into()]).expect("a view");
    assert!(view.sees_server("docs"));
    assert!(!view.sees_server("github"), "interns see docs only");
    assert!(!view.sees_server("prod-db"));
}

#[test]
fn the_refusal_reads_the_same_for_hidden_and_missing_tools() {
    assert_eq!(
        not_available("prod-db", "drop"),
        "Tool 'prod-db:drop' is not available to this caller: it does not exist or is not \
         offered to you. Use retrieve_tools to find the tools you can call."
    );
}
