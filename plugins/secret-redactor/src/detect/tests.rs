//! The detector's unit tests, its detection rate on a labelled set of secrets (generated in
//! each format, in the contexts they turn up in), and the false-positive measurement on a
//! corpus of ordinary files (`measure_false_positives`, ignored by default: it reads the
//! directories in `SECRET_REDACTOR_CORPUS`).

use super::*;

fn kinds(text: &str) -> Vec<&'static str> {
    find(text, &Settings::default())
        .into_iter()
        .map(|f| f.kind)
        .collect()
}

fn redacted(text: &str) -> String {
    let mut out = String::new();
    let mut at = 0;
    for f in find(text, &Settings::default()) {
        out.push_str(&text[at..f.start]);
        out.push_str(&format!("[{}]", f.kind));
        at = f.end;
    }
    out.push_str(&text[at..]);
    out
}

/// A deterministic generator for the labelled set (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize] as char)
            .collect()
    }
}

const UPPER_DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const HEX: &[u8] = b"0123456789abcdef";

#[test]
fn each_format_is_found_with_its_kind() {
    let cases = [
        ("key AKIAIOSFODNN7EXAMPLE here", "aws-access-key"),
        ("AIzaSyD-1234567890abcdefghijklmnopqrstu", "gcp-api-key"),
        ("ghp_1234567890abcdefghijklmnopqrstuvwxyZ", "github-token"),
        (
            "github_pat_11ABCDEFG0123456789abc_defghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTU",
            "github-token",
        ),
        ("glpat-abcdefghij0123456789", "gitlab-token"),
        (
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "slack-token",
        ),
        (
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "slack-token",
        ),
        ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe-key"),
        (
            "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",
            "openai-key",
        ),
        (
            "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",
            "anthropic-key",
        ),
        (
            "abc8Q~abcdefghijklmnopqrstuvwxyz01234.-_",
            "azure-client-secret",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net",
            "azure-storage-key",
        ),
        (
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "jwt",
        ),
        ("DB_PASSWORD=hunter2!", "password"),
        ("\"password\": \"correct horse\"", "password"),
        ("postgres://app:s3cr3t-pw@db.internal:5432/app", "password"),
        ("API_TOKEN=9fQ2xLr7Vb3KpZ8mWc1TyH6sJd4NaE0u", "secret"),
        (
            "Authorization: Bearer 9fQ2xLr7Vb3KpZ8mWc1TyH6sJd4NaE0u",
            "secret",
        ),
    ];
    for (text, kind) in cases {
        assert_eq!(kinds(text), [kind], "{text}");
    }
}

#[test]
fn an_aws_key_pair_github_token_and_private_key_are_redacted() {
    let file = "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n\
                aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n\
                github = ghp_1234567890abcdefghijklmnopqrstuvwxyZ\n\
                -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc\n-----END RSA PRIVATE KEY-----\ntail\n";
    assert_eq!(
        redacted(file),
        "[default]\naws_access_key_id = [aws-access-key]\naws_secret_access_key = \
         [aws-secret-key]\ngithub = [github-token]\n[private-key]\ntail\n"
    );
}

#[test]
fn a_private_key_inside_json_and_a_cut_one_are_redacted() {
    let json = r#"{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n", "client_email": "a@b.iam"}"#;
    assert_eq!(
        redacted(json),
        r#"{"type": "service_account", "private_key": "[private-key]\n", "client_email": "a@b.iam"}"#
    );
    let cut = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n\nafter";
    assert_eq!(redacted(cut), "[private-key]\n\nafter");
    // A certificate or a public key is not secret.
    assert!(kinds("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----").is_empty());
    assert!(kinds("-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----").is_empty());
}

#[test]
fn an_aws_secret_after_its_key_id_is_found_without_a_name() {
    assert_eq!(
        redacted("AKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        "[aws-access-key],[aws-secret-key]"
    );
}

#[test]
fn ordinary_text_is_left_alone() {
    for text in [
        "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 in /home/user/projects",
        "let password = read_password()?;",
        "password: string",
        "\"password\": {\"type\": \"string\", \"minLength\": 8}",
        "PASSWORD=${DB_PASSWORD}",
        "password = \"********\"",
        "password: <your password>",
        "if password == expected {",
        "max_tokens: 4096, token_count=17",
        "\"next_page_token\": \"CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA0bTdnMDAQAg\"",
        "\"tokens\": [\"a\", \"b\"], \"token_type\": \"Bearer\"",
        "Authorization: Bearer <token>",
        "https://example.com/path?q=1",
        "ssh://git@github.com/org/repo.git",
        "std::env::var(\"API_KEY\")",
        "uuid 123e4567-e89b-12d3-a456-426614174000 sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "AKIA is a prefix; skid marks",
        "2026-11-26T10:00:00Z INFO request id=01KAMXH0VBSJ2QX6F6R4VZ7P3M took 12ms",
        "pub fn basic_auth<U, P>(self, username: U, password: Option<P>) -> RequestBuilder",
        "pub passwd: CString,",
        "let mut pwd = mem::MaybeUninit::<libc::passwd>::uninit();",
        "generate_private_key: x25519_generate_private_key,",
        "colon2_token: node.colon2_token,",
        "ServerTrafficSecret => \"SERVER_TRAFFIC_SECRET_0\",",
        "Url::parse(\"ftp://rms:secret123@example.com\")",
        "Proxy::all(\"http://letme:in@yo.local\")",
        "r\"-----BEGIN PRIVATE KEY-----\"",
    ] {
        assert!(kinds(text).is_empty(), "{text}: {:?}", kinds(text));
    }
}

#[test]
fn ignored_kinds_are_left_and_bad_settings_are_refused() {
    let settings = Settings::parse(r#"{"ignore_kinds": ["jwt"]}"#).unwrap();
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    assert!(find(jwt, &settings).is_empty());
    let err = Settings::parse(r#"{"ignore_kinds": ["jwts"]}"#).unwrap_err();
    assert!(
        err.starts_with("'ignore_kinds' names 'jwts', which is no kind"),
        "{err}"
    );
    assert!(Settings::parse(r#"{"ignore_kinds": "jwt"}"#).is_err());
    assert!(Settings::parse("{}").is_ok());
}

#[test]
fn spans_are_on_char_boundaries_in_any_text() {
    let mut rng = Rng(7);
    let pieces = [
        "é",
        "🦀",
        "=",
        ":",
        "\"",
        "password",
        "token",
        "AKIA",
        "ghp_",
        "-----BEGIN ",
        "PRIVATE KEY-----",
        "eyJ",
        ".",
        " ",
        "\n",
        "\\n",
        "://",
        "@",
        "sk-",
        "xoxb-",
    ];
    for _ in 0..2000 {
        let text: String = (0..(rng.next() % 40))
            .map(|_| {
                let piece = pieces[(rng.next() % pieces.len() as u64) as usize];
                let n = (rng.next() % 5) as usize;
                piece.to_owned() + &rng.pick(ALNUM, n)
            })
            .collect();
        let mut last = 0;
        for f in find(&text, &Settings::default()) {
            assert!(
                f.start >= last && f.start < f.end && f.end <= text.len(),
                "{text:?}"
            );
            assert!(
                text.is_char_boundary(f.start) && text.is_char_boundary(f.end),
                "{text:?}"
            );
            last = f.end;
        }
    }
}

/// The labelled set: `(secret, kind)` in each format, several of each.
fn labelled_secrets() -> Vec<(String, &'static str)> {
    let mut rng = Rng(0x5eed);
    let mut set = Vec::new();
    for _ in 0..20 {
        let aws = format!("AKIA{}", rng.pick(UPPER_DIGITS, 16));
        set.push((aws, "aws-access-key"));
        set.push((format!("AIza{}", rng.pick(B64URL, 35)), "gcp-api-key"));
        set.push((format!("ghp_{}", rng.pick(ALNUM, 36)), "github-token"));
        set.push((format!("gho_{}", rng.pick(ALNUM, 36)), "github-token"));
        set.push((
            format!(
                "github_pat_11{}_{}",
                rng.pick(ALNUM, 20),
                rng.pick(ALNUM, 59)
            ),
            "github-token",
        ));
        set.push((format!("glpat-{}", rng.pick(B64URL, 20)), "gitlab-token"));
        set.push((
            format!(
                "xoxb-{}-{}-{}",
                rng.pick(b"0123456789", 12),
                rng.pick(b"0123456789", 13),
                rng.pick(ALNUM, 24)
            ),
            "slack-token",
        ));
        set.push((format!("sk_live_{}", rng.pick(ALNUM, 24)), "stripe-key"));
        set.push((format!("rk_live_{}", rng.pick(ALNUM, 24)), "stripe-key"));
        set.push((format!("sk-proj-{}", rng.pick(B64URL, 64)), "openai-key"));
        set.push((
            format!("sk-{}T3BlbkFJ{}", rng.pick(ALNUM, 20), rng.pick(ALNUM, 20)),
            "openai-key",
        ));
        set.push((
            format!("sk-ant-api03-{}AA", rng.pick(B64URL, 93)),
            "anthropic-key",
        ));
        set.push((
            format!(
                "{}{}Q~{}",
                rng.pick(ALNUM, 3),
                rng.next() % 10,
                rng.pick(ALNUM, 34)
            ),
            "azure-client-secret",
        ));
        set.push((
            format!(
                "-----BEGIN PRIVATE KEY-----\n{}\n{}\n-----END PRIVATE KEY-----",
                rng.pick(B64, 64),
                rng.pick(B64, 40)
            ),
            "private-key",
        ));
        set.push((
            format!(
                "-----BEGIN EC PRIVATE KEY-----\n{}\n-----END EC PRIVATE KEY-----",
                rng.pick(B64, 64)
            ),
            "private-key",
        ));
        set.push((
            format!(
                "eyJhbGciOiJSUzI1NiJ9.eyJ{}.{}",
                rng.pick(B64URL, 60),
                rng.pick(B64URL, 43)
            ),
            "jwt",
        ));
    }
    set
}

/// Pairs: `(text, secret, kind)` with the secret as the value of a named key.
fn labelled_pairs() -> Vec<(String, String, &'static str)> {
    let mut rng = Rng(0xfeed);
    let mut set = Vec::new();
    for i in 0..20 {
        let aws_secret = rng.pick(B64, 40);
        let aws_secret = format!("a1B{}", &aws_secret[3..]);
        set.push((
            format!("aws_secret_access_key = {aws_secret}"),
            aws_secret,
            "aws-secret-key",
        ));
        let pw = format!("{}{}!", rng.pick(ALNUM, 8 + i % 6), rng.next() % 100);
        let contexts = [
            format!("DB_PASSWORD={pw}"),
            format!("\"password\": \"{pw}\""),
            format!("password: '{pw}'"),
            format!("mysql://root:{pw}@127.0.0.1/db"),
        ];
        let ctx = contexts[i % contexts.len()].clone();
        set.push((ctx, pw, "password"));
        let token = rng.pick(ALNUM, 32);
        let token = format!("{}7{}", &token[..3], &token[4..]);
        let key = [
            "API_KEY",
            "client_secret",
            "\"access_token\"",
            "X-Auth-Token",
            "SECRET_KEY",
        ][i % 5];
        set.push((format!("{key}: {token}"), token.clone(), "secret"));
        let hex = rng.pick(HEX, 40);
        set.push((format!("export SLACK_SIGNING_SECRET={hex}"), hex, "secret"));
    }
    set
}

/// Detection rate on the labelled set, each secret alone and in the contexts secrets come
/// in (a `.env` line, JSON, a log line, a shell command). Goal: 95% or more.
#[test]
fn detection_rate_on_the_labelled_set() {
    let mut total = 0;
    let mut caught = 0;
    let mut missed = Vec::new();
    for (secret, kind) in labelled_secrets() {
        let wrappers = [
            secret.clone(),
            format!("TOKEN_VALUE={secret}\n"),
            format!("{{\"value\": \"{}\"}}", secret.replace('\n', "\\n")),
            format!("2026-11-26 INFO using credential {secret} for upload"),
            format!("curl -H 'X-Key: {secret}' https://api.example.com"),
        ];
        for text in wrappers {
            total += 1;
            let found = find(&text, &Settings::default());
            let secret_json = secret.replace('\n', "\\n");
            let covered = found.iter().any(|f| {
                let span = &text[f.start..f.end];
                (span.contains(&secret) || span.contains(&secret_json)) && f.kind == kind
            });
            if covered {
                caught += 1;
            } else {
                missed.push((kind, text));
            }
        }
    }
    for (text, secret, kind) in labelled_pairs() {
        total += 1;
        let found = find(&text, &Settings::default());
        if found
            .iter()
            .any(|f| text[f.start..f.end].contains(&secret) && f.kind == kind)
        {
            caught += 1;
        } else {
            missed.push((kind, text));
        }
    }
    let rate = f64::from(caught) / f64::from(total);
    println!("detection: {caught}/{total} = {:.2}%", rate * 100.0);
    for (kind, text) in &missed {
        println!("missed {kind}: {text}");
    }
    assert!(rate >= 0.95, "detection rate {rate} below 95%: {missed:?}");
}

/// Lines flagged in the files under `SECRET_REDACTOR_CORPUS` (`:`-separated directories;
/// `.rs`, `.py`, `.js`, `.ts`, `.go`, `.json`, `.yaml`, `.toml`, `.md`, `.log`, `.txt`
/// files), each printed with its kind for review.
#[test]
#[ignore = "reads a corpus from SECRET_REDACTOR_CORPUS; run by hand"]
fn measure_false_positives() {
    let Some(dirs) = std::env::var_os("SECRET_REDACTOR_CORPUS") else {
        panic!("set SECRET_REDACTOR_CORPUS to directories of ordinary files");
    };
    let mut files = Vec::new();
    for dir in std::env::split_paths(&dirs) {
        walk(&dir, &mut files);
    }
    let (mut lines, mut bytes, mut flagged) = (0usize, 0usize, 0usize);
    let mut by_kind = std::collections::BTreeMap::<&str, usize>::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        lines += text.lines().count();
        bytes += text.len();
        let found = find(&text, &Settings::default());
        let mut seen_lines = std::collections::BTreeSet::new();
        for f in found {
            let line_no = text[..f.start].matches('\n').count();
            if seen_lines.insert(line_no) {
                flagged += 1;
                *by_kind.entry(f.kind).or_default() += 1;
                let line = text.lines().nth(line_no).unwrap_or("");
                let shown: String = line.chars().take(160).collect();
                println!(
                    "FLAG {} {}:{}: {shown}",
                    f.kind,
                    file.display(),
                    line_no + 1
                );
            }
        }
    }
    println!(
        "corpus: {} files, {lines} lines, {bytes} bytes; flagged lines: {flagged} ({:.3} per 10,000); by kind: {by_kind:?}",
        files.len(),
        flagged as f64 * 10_000.0 / lines.max(1) as f64
    );
}

fn walk(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, files);
        } else if path.extension().is_some_and(|e| {
            [
                "rs", "py", "js", "ts", "go", "json", "yaml", "yml", "toml", "md", "log", "txt",
            ]
            .iter()
            .any(|x| e == *x)
        }) {
            files.push(path);
        }
    }
}

/// Native cost of `find` on 10 KB and 1 MB of ordinary output (`cargo test --release -p
/// secret-redactor time_native -- --ignored --nocapture`); the guard's cost through the
/// proxy is `cargo bench --bench guards`.
#[test]
#[ignore = "a timing, run by hand"]
fn time_native() {
    let line = "2026-11-26T10:00:01.123Z INFO http: GET /api/v1/items/42 200 17 ms user=u3\n\
                {\"id\": 42, \"name\": \"item-42\", \"tags\": [\"a\", \"b\"], \"sha\": \"9e3779b97f4a7c15c2b2ae3d27d4eb4f\", \"url\": \"https://example.com/items/42\"}\n\
                    let value_42 = config.get(\"key_42\").map(|v| v.len()).unwrap_or(42);\n";
    for size in [10 * 1024, 1024 * 1024] {
        let text: String = line.repeat(size / line.len() + 1);
        let settings = Settings::default();
        let runs = if size < 100_000 { 2000 } else { 20 };
        let started = std::time::Instant::now();
        for _ in 0..runs {
            std::hint::black_box(find(std::hint::black_box(&text), &settings));
        }
        println!("{size} bytes: {:?} per find", started.elapsed() / runs);
        for (name, f) in [
            ("tokens", tokens::find as fn(&str, &mut Vec<Found>)),
            ("pem", pem::find),
            ("pairs", pairs::find),
        ] {
            let started = std::time::Instant::now();
            for _ in 0..runs {
                let mut found = Vec::new();
                f(std::hint::black_box(&text), &mut found);
                std::hint::black_box(found);
            }
            println!("  {name}: {:?}", started.elapsed() / runs);
        }
    }
}
