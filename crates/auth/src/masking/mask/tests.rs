//! Tests of masking URLs, arguments, free text and the log.

use super::*;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

const GHP: &str = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
const JWT: &str =
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";

#[test]
fn urls_lose_user_info_query_values_and_fragment() {
    for (url, shown) in [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        (
            "https://alice:s3cr%40t@example.com:8443/mcp",
            "https://***@example.com:8443/mcp",
        ),
        ("http://bob@h/", "http://***@h/"),
        (
            "http://127.0.0.1:8080/mcp?token=SECRET&x=1&flag",
            "http://127.0.0.1:8080/mcp?token=***&x=***&flag",
        ),
        ("http://h/mcp?token=", "http://h/mcp?token="),
        ("http://h/mcp#access_token=abc", "http://h/mcp#***"),
        ("https://user:pw@h:1/a?k=v#f", "https://***@h:1/a?k=***#***"),
        (&format!("https://h/hooks/{GHP}/x"), "https://h/hooks/***/x"),
        (&format!("https://h/mcp?{GHP}"), "https://h/mcp?***"),
        ("not a url", "not a url"),
        ("", ""),
    ] {
        assert_eq!(mask_url(url), shown, "{url}");
    }
}

#[test]
fn secret_looking_arguments_are_masked_and_ordinary_ones_kept() {
    let cases: &[(&[&str], &[&str])] = &[
        // The rule manage.rs had: the value after a secret flag, KEY=value.
        (
            &[
                "-y",
                "server",
                "--token",
                "abc",
                "--api-key=xyz",
                "GITHUB_TOKEN=t",
                "--dir",
                "/tmp",
            ],
            &[
                "-y",
                "server",
                "--token",
                "***",
                "--api-key=***",
                "GITHUB_TOKEN=***",
                "--dir",
                "/tmp",
            ],
        ),
        (&["--password", "hunter2"], &["--password", "***"]),
        (&["--secret", "x"], &["--secret", "***"]),
        (&["--client-secret=abc"], &["--client-secret=***"]),
        (
            &["-e", "ANTHROPIC_API_KEY=sk-ant-whatever"],
            &["-e", "ANTHROPIC_API_KEY=***"],
        ),
        // Tokens on their own or after any flag.
        (&[GHP], &["***"]),
        (&["sk-live-4f9a8b7c6d5e4f3a2b1c"], &["***"]),
        (&["sk-proj-abcdefghijklmnopqrstuvwxyz"], &["***"]),
        (&["sk_live_51HxYzAbCdEf"], &["***"]),
        (&["pk_live_51HxYzAbCdEf"], &["***"]),
        (&["gho_16C7e42F292c6912E7710c838347Ae178B4a"], &["***"]),
        (
            &["github_pat_11ABCDEFG0123456789_abcdefghijklmnop"],
            &["***"],
        ),
        (&["glpat-xxxxxxxxxxxxxxxxxxxx"], &["***"]),
        (&["xoxb-1234567890-abcdefghij"], &["***"]),
        (&["xoxp-1234567890-abcdefghij"], &["***"]),
        (&["AKIAIOSFODNN7EXAMPLE"], &["***"]),
        (&["ASIAY34FZKBOKMUTVV7A"], &["***"]),
        (&[JWT], &["***"]),
        (&["-t", "Zx9Qw2Lm7Np4Rt6Vb8Kc3Hd5"], &["-t", "***"]),
        (&["--auth", "Zx9Qw2Lm7Np4Rt6Vb8Kc3Hd5"], &["--auth", "***"]),
        (&["--header=Zx9Qw2Lm7Np4Rt6Vb8Kc3Hd5"], &["--header=***"]),
        (&["CONFIG=Zx9Qw2Lm7Np4Rt6Vb8Kc3Hd5"], &["CONFIG=***"]),
        // Secrets inside an argument: a URL, a header.
        (
            &["--url", "https://u:p@h/mcp?key=v"],
            &["--url", "https://***@h/mcp?key=***"],
        ),
        (
            &["DATABASE_URL=postgres://app:pw@db:5432/app"],
            &["DATABASE_URL=postgres://***@db:5432/app"],
        ),
        (
            &["--header", "Authorization: Bearer abc.def"],
            &["--header", "Authorization: Bearer ***"],
        ),
    ];
    for (args, shown) in cases {
        assert_eq!(mask_args(&strings(args)), strings(shown), "{args:?}");
    }
}

#[test]
fn ordinary_arguments_stay_visible() {
    let ordinary = [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/tmp/dir",
        "--port",
        "8080",
        "-p",
        "3000",
        "-t",
        "30",
        "--timeout=30",
        "run",
        "--rm",
        "-i",
        "ghcr.io/github/github-mcp-server:latest",
        "mcp-server-sqlite",
        "--db-path",
        "/home/me/data.db",
        "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        "DA39A3EE5E6B4B0D3255BFEF95601890AFD80709",
        "123e4567-e89b-12d3-a456-426614174000",
        "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "TestProject2024ReleaseCandidate",
        "Qwen2-Coder-32B-Instruct-GGUF",
        "claude-3-5-sonnet-20241022",
        "x86_64-unknown-linux-gnu",
        "WindowsServer2022Datacenter",
        "sk-learn",
        "hf_transfer",
        "--token-file",
        "/run/secrets/token",
        "--max-tokens",
        "4096",
        "--no-auth",
        "./data",
        "LOG_LEVEL=debug",
        "--",
        "-1",
        "C:\\Users\\me\\mcp",
        "https://api.example.com/v1/mcp",
        "user@example.com",
    ];
    let args = strings(&ordinary);
    assert_eq!(mask_args(&args), args);
}

#[test]
fn free_text_masks_urls_tokens_and_assignments() {
    for (text, shown) in [
        (
            "could not reach http://user:pw@127.0.0.1:9/mcp?token=SECRET: error sending request for url (http://user:pw@127.0.0.1:9/mcp?token=SECRET)",
            "could not reach http://***@127.0.0.1:9/mcp?token=***: error sending request for url (http://***@127.0.0.1:9/mcp?token=***)",
        ),
        (
            "connecting to https://h/mcp?a=b,c. Retry.",
            "connecting to https://h/mcp?a=***. Retry.",
        ),
        (
            &format!("started `npx server --token {GHP}`"),
            "started `npx server --token ***`",
        ),
        (&format!("token {GHP}."), "token ***."),
        ("Authorization: Bearer abc", "Authorization: Bearer ***"),
        (
            "send `Authorization: Bearer <token>` or Bearer YOUR_API_KEY",
            "send `Authorization: Bearer <token>` or Bearer YOUR_API_KEY",
        ),
        ("GITHUB_TOKEN=abc is set", "GITHUB_TOKEN=*** is set"),
        ("password: hunter2024", "password: ***"),
        ("key=sk-ant-api03-abcdefgh123", "key=***"),
        (&format!("jwt {JWT}"), "jwt ***"),
        ("the AKIAIOSFODNN7EXAMPLE key", "the *** key"),
        // Left alone: ids, hashes, plain words after a secret word.
        (
            "record 01ARZ3NDEKTSV4RRFFQ69G5FAV at da39a3ee5e6b4b0d3255bfef95601890afd80709",
            "record 01ARZ3NDEKTSV4RRFFQ69G5FAV at da39a3ee5e6b4b0d3255bfef95601890afd80709",
        ),
        ("--token is required", "--token is required"),
        ("invalid password: too short", "invalid password: too short"),
        (
            "upstream fs (stdio): ready — 3 tools",
            "upstream fs (stdio): ready — 3 tools",
        ),
        ("ratio 3://x", "ratio 3://x"),
        // A log line's target is a path, not `auth: VALUE`.
        (
            "INFO mcpproxy_auth::credentials: credentials are kept in a 0600 file",
            "INFO mcpproxy_auth::credentials: credentials are kept in a 0600 file",
        ),
        ("auth:s3cretvalue99", "auth:***"),
        ("", ""),
    ] {
        assert_eq!(mask_text(text), shown, "{text}");
    }
}

#[test]
fn a_message_about_a_url_loses_its_parts_wherever_they_appear() {
    let url = "https://alice:s3cr%40t@example.com:8443/mcp?token=SECRET1";
    let message = format!(
        "could not reach {url}: Url {{ username: \"alice\", password: Some(\"s3cr%40t\"), query: Some(\"token=SECRET1\") }}"
    );
    let shown = mask_text_with_url(&message, url);
    for secret in ["s3cr", "SECRET1"] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(
        shown.starts_with("could not reach https://***@example.com:8443/mcp?token=***:"),
        "{shown}"
    );
    assert_eq!(mask_text_with_url("x", "http://h/mcp"), "x");
}

#[test]
fn the_log_writer_masks_what_a_library_quotes() {
    use std::io::Write;
    let mut out = MaskingWriter(Vec::new());
    let line = "ERROR mcp_client::transport::worker: worker quit: Client(reqwest::Error { url: \"http://127.0.0.1:9/mcp?token=DEADSECRET99\" })\n";
    out.write_all(line.as_bytes()).unwrap();
    let written = String::from_utf8(out.0).unwrap();
    assert_eq!(
        written,
        "ERROR mcp_client::transport::worker: worker quit: Client(reqwest::Error { url: \"http://127.0.0.1:9/mcp?token=***\" })\n"
    );
}

#[test]
fn masking_never_panics_on_odd_text() {
    for text in [
        "://",
        "a://",
        "http://",
        "é://ü?x=ß#",
        "((http://h/x)))",
        "--token",
        "Bearer",
        "=",
        ":=:",
        "http://h/?=&&=#",
        "\u{202e}http://u:p@h",
    ] {
        let _ = mask_text(text);
        let _ = mask_url(text);
        let _ = mask_args(&[text.to_owned(), text.to_owned()]);
        let _ = mask_text_with_url(text, text);
    }
}

#[test]
fn secrets_in_json_strings_are_masked_and_everything_else_is_kept() {
    let mut args = serde_json::json!({
        "text": "deploy with AKIAIOSFODNN7EXAMPLE now",
        "nested": {"headers": ["Authorization: Bearer abc.def.ghi", "Accept: */*"]},
        "env": "GITHUB_TOKEN=ghp_0123456789abcdefABCDEF0123456789abcd",
        "path": "/tmp/notes.txt",
        "id": "01JDZ8Q5V3KX9N2M4P6R8T0W2Y",
        "count": 3,
        "ok": true,
        "nothing": null,
    });
    assert!(mask_json(&mut args));
    assert_eq!(args["text"], "deploy with *** now");
    assert_eq!(args["nested"]["headers"][0], "Authorization: Bearer ***");
    assert_eq!(args["nested"]["headers"][1], "Accept: */*");
    assert_eq!(args["env"], "GITHUB_TOKEN=***");
    // What is not a secret stays as it was: paths, ids (random-looking words are left to
    // the configured redact_keys), numbers, booleans, null, and every key.
    assert_eq!(args["path"], "/tmp/notes.txt");
    assert_eq!(args["id"], "01JDZ8Q5V3KX9N2M4P6R8T0W2Y");
    assert_eq!(args["count"], 3);
    assert_eq!(args["ok"], true);
    assert!(args["nothing"].is_null());

    let mut plain = serde_json::json!({"query": "SELECT 1", "rows": [1, 2]});
    let before = plain.clone();
    assert!(!mask_json(&mut plain));
    assert_eq!(plain, before);
}
