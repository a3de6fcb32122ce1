//! The cost of the result guards on one answer: the embedded `secret-redactor` (on by
//! default; a warm instance, as the proxy runs it) over a 10 KB and a 1 MB tool result of
//! ordinary output (log lines, JSON, source), with no secret in it and with a few; and the
//! opt-in `injection-marker` beside it on the 10 KB result. What is measured is
//! `Guards::run`, as the proxy calls it: the items copied into the guest, scanned, the
//! answer checked and applied.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mcpproxy_plugin_host::{EngineOptions, PluginEngine, PluginSet, PluginSettings, result_guards};
use mcpproxy_policy::{GuardContext, GuardItem, Guards, OperationType, ResultKind};

/// `bytes` of ordinary tool output: log lines, JSON objects and source lines, in turn.
fn ordinary(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 200);
    let mut i = 0u64;
    while out.len() < bytes {
        let line = match i % 3 {
            0 => format!(
                "2026-11-26T10:{:02}:{:02}.{:03}Z INFO http: GET /api/v1/items/{i} 200 {} ms user=u{}\n",
                i % 60,
                (i * 7) % 60,
                i % 1000,
                i % 97,
                i % 13
            ),
            1 => format!(
                "{{\"id\": {i}, \"name\": \"item-{i}\", \"tags\": [\"a\", \"b\"], \"sha\": \"{:016x}{:016x}\", \"url\": \"https://example.com/items/{i}\"}}\n",
                i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                i.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
            ),
            _ => format!(
                "    let value_{i} = config.get(\"key_{i}\").map(|v| v.len()).unwrap_or({i});\n"
            ),
        };
        out.push_str(&line);
        i += 1;
    }
    out
}

/// `ordinary(bytes)` with an AWS key pair, a GitHub token and a private key in it.
fn with_secrets(bytes: usize) -> String {
    let mut text = ordinary(bytes);
    text.insert_str(
        text.len() / 2,
        "aws_access_key_id = AKIAZ7Q4RT3XW5LMN2PB\naws_secret_access_key = \
         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\nGITHUB_TOKEN=ghp_R7kQ2mZx9Lw4Tv8Np3Hs6Jd1Fb5Gc0Ya2Ue7W\n\
         -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAw3Zq8Rv2Lw7Zt4Xc1Nb6Mk3Jh9Gf5Ds0Ap2Qe7Wr4TyUi\n\
         -----END RSA PRIVATE KEY-----\n",
    );
    text
}

fn bench(c: &mut Criterion) {
    let engine = PluginEngine::new(EngineOptions::default()).expect("engine");
    let set = PluginSet::load(&engine, None, &|_, _| PluginSettings::default()).expect("plugins");
    let guard = |names: &[&str]| {
        let plugins: Vec<_> = names
            .iter()
            .map(|n| set.get(n).expect("embedded").clone())
            .collect();
        Guards::new(result_guards(&plugins))
    };
    let redactor = guard(&["secret-redactor"]);
    let both = guard(&["secret-redactor", "injection-marker"]);
    let context = GuardContext {
        kind: ResultKind::ToolResult,
        server: "fs".into(),
        name: "read_text_file".into(),
        variant: Some(OperationType::Read),
        intent: None,
        annotations: None,
    };
    let mut group = c.benchmark_group("result_guard");
    for (label, size) in [("10KB", 10 * 1024), ("1MB", 1024 * 1024)] {
        for (what, text) in [("clean", ordinary(size)), ("secrets", with_secrets(size))] {
            let items = vec![GuardItem::text(text)];
            // Warm: the first answer makes the instance the rest reuse.
            assert!(redactor.run(&context, items.clone()).withheld.is_none());
            group.throughput(Throughput::Bytes(size as u64));
            group.bench_with_input(
                BenchmarkId::new(format!("secret-redactor/{what}"), label),
                &items,
                |b, items| b.iter(|| redactor.run(&context, items.clone())),
            );
        }
    }
    // The floor: a guard that passes everything (the `guard-trap` fixture, which looks at
    // the text only for its trigger words), warm: the copy into the guest and the call.
    let path = plugin_artifacts::artifact("guard_trap");
    let bytes = std::fs::read(&path).expect("the guard-trap fixture is built");
    let mut pass = mcpproxy_plugin_host::Plugin::load(
        &engine,
        &bytes,
        mcpproxy_plugin_host::PluginSource::File(path),
        mcpproxy_plugin_host::Limits::default(),
    )
    .expect("guard-trap loads");
    pass.configure(&PluginSettings {
        limits: mcpproxy_plugin_host::Limits {
            reuse_instance: true,
            ..Default::default()
        },
        reuse_chosen: true,
        ..PluginSettings::default()
    });
    let pass = Guards::new(result_guards(&[std::sync::Arc::new(pass)]));
    for (label, size) in [("10KB", 10 * 1024), ("1MB", 1024 * 1024)] {
        let items = vec![GuardItem::text(ordinary(size))];
        group.bench_with_input(
            BenchmarkId::new("pass-through (floor)", label),
            &items,
            |b, items| b.iter(|| pass.run(&context, items.clone())),
        );
    }
    let items = vec![GuardItem::text(ordinary(10 * 1024))];
    assert!(both.run(&context, items.clone()).withheld.is_none());
    group.bench_with_input(
        BenchmarkId::new("secret-redactor+injection-marker/clean", "10KB"),
        &items,
        |b, items| b.iter(|| both.run(&context, items.clone())),
    );
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
