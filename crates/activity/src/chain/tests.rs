//! The chain's unit tests: the canonical encoding, hashing, splicing, keys and checkpoints,
//! and the verifier on hand-made chains.

use serde_json::{Value, json};

use super::*;

#[test]
fn canonical_sorts_keys_and_drops_whitespace() {
    let value = json!({"b": 1, "a": {"z": [1, "x\n"], "y": null}, "é": true});
    assert_eq!(
        String::from_utf8(canonical(&value)).unwrap(),
        r#"{"a":{"y":null,"z":[1,"x\n"]},"b":1,"é":true}"#
    );
}

#[test]
fn splice_appends_chain_fields_and_same_content_sees_through_them() {
    let json = br#"{"id":"x","status":"success"}"#;
    let link = ChainLink {
        seq: Some(7),
        replaces: Vec::new(),
        prev: Some(hex(&GENESIS)),
        hash: Some(hex(&[1; 32])),
    };
    let stored = splice(json, &link);
    let text = String::from_utf8(stored.clone()).unwrap();
    assert!(text.starts_with(r#"{"id":"x","status":"success","seq":7,"prev":"000"#));
    assert!(same_content(&stored, json));
    assert!(!same_content(&stored, br#"{"id":"x","status":"error"}"#));
    assert_eq!(ChainLink::of_row(&stored).unwrap(), link);
}

#[test]
fn the_hash_ignores_prev_and_hash_but_covers_seq() {
    let a = json!({"id": "x", "seq": 1});
    let with = json!({"id": "x", "seq": 1, "prev": "00", "hash": "ff"});
    assert_eq!(record_hash(&GENESIS, &a), record_hash(&GENESIS, &with));
    assert_ne!(
        record_hash(&GENESIS, &a),
        record_hash(&GENESIS, &json!({"id": "x", "seq": 2}))
    );
    assert_ne!(record_hash(&GENESIS, &a), record_hash(&[1; 32], &a));
}

#[test]
fn hex_round_trips() {
    let bytes: [u8; 32] = std::array::from_fn(|i| i as u8 * 7);
    assert_eq!(unhex32(&hex(&bytes)), Some(bytes));
    assert_eq!(unhex32("zz"), None);
    assert_eq!(unhex32(&"g".repeat(64)), None);
}

#[test]
fn a_key_is_made_once_private_and_signs_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(KEY_FILE);
    let key = SigningKey::load_or_create(&path).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = SigningKey::load_or_create(&path).unwrap();
    assert_eq!(key.public_hex(), again.public_hex());
    assert_eq!(public_key_of(&path).unwrap(), key.public_hex());

    let checkpoint = key.checkpoint(5, &[9; 32], 1_700_000_000_000);
    assert!(checkpoint.signed_by(&key.public_hex()));
    let other = SigningKey::load_or_create(&dir.path().join("other")).unwrap();
    assert!(!checkpoint.signed_by(&other.public_hex()));
    let mut forged = checkpoint.clone();
    forged.seq = 6;
    assert!(!forged.signed_by(&key.public_hex()));
}

#[test]
fn a_key_file_that_is_not_a_key_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(KEY_FILE);
    std::fs::write(&path, "not a key").unwrap();
    let e = SigningKey::load_or_create(&path).unwrap_err().to_string();
    assert!(e.contains(KEY_FILE) && e.contains("64 hex digits"), "{e}");
}

/// A chain of `n` records linked by hand, as the writer links them; record `seq` was made at
/// `1_000_000 + 1000 * seq` ms.
fn chain(n: u64) -> Vec<Value> {
    let mut prev = GENESIS;
    (1..=n)
        .map(|seq| {
            let id = ulid::Ulid::from_parts(1_000_000 + 1000 * seq, u128::from(seq)).to_string();
            let mut value = json!({"id": id, "status": "success", "seq": seq});
            let hash = record_hash(&prev, &value);
            value["prev"] = hex(&prev).into();
            value["hash"] = hex(&hash).into();
            prev = hash;
            value
        })
        .collect()
}

fn verify(records: &[Value]) -> ChainReport {
    let mut verifier = Verifier::new(None);
    for record in records {
        verifier.record(record);
    }
    verifier.finish()
}

#[test]
fn an_intact_chain_verifies() {
    let report = verify(&chain(10));
    assert!(report.ok, "{report:?}");
    assert_eq!(
        (report.chained, report.first_seq, report.last_seq),
        (10, Some(1), Some(10))
    );
}

#[test]
fn each_kind_of_break_is_named() {
    let records = chain(10);
    let kinds = |records: &[Value]| {
        verify(records)
            .problems
            .iter()
            .map(|p| (p.kind, p.seq))
            .collect::<Vec<_>>()
    };
    let mut deleted = records.clone();
    deleted.remove(4);
    assert_eq!(kinds(&deleted), [(ProblemKind::Deleted, Some(5))]);

    let mut altered = records.clone();
    altered[2]["status"] = "blocked".into();
    assert_eq!(kinds(&altered), [(ProblemKind::Altered, Some(3))]);

    let mut swapped = records.clone();
    let (a, b) = (swapped[3]["seq"].clone(), swapped[4]["seq"].clone());
    swapped[3]["seq"] = b;
    swapped[4]["seq"] = a;
    let found = kinds(&swapped);
    assert!(
        found.contains(&(ProblemKind::Altered, Some(4))),
        "{found:?}"
    );
    assert!(
        found.contains(&(ProblemKind::Altered, Some(5))),
        "{found:?}"
    );

    let mut unchained = records.clone();
    let mut extra = records[9].clone();
    let obj = extra.as_object_mut().unwrap();
    obj.remove("seq");
    obj.remove("prev");
    obj.remove("hash");
    unchained.push(extra);
    let report = verify(&unchained);
    assert!(
        report.ok,
        "without a known start an unchained record is older: {report:?}"
    );
}

mod journal {
    //! The chain as the journal writes it.

    use std::time::Duration;

    use crate::test_util::{open_temp, rec_at, stored_row};
    use crate::{Durability, Journal, JournalOptions, Retention, Status, now_ms};

    use super::super::{ChainLink, ChainOptions, KEY_FILE, SigningKey};

    fn every(n: u64) -> JournalOptions {
        JournalOptions {
            chain: ChainOptions {
                checkpoint_every: n,
                checkpoint_interval: Duration::from_secs(3600),
                ..ChainOptions::default()
            },
            ..JournalOptions::default()
        }
    }

    #[tokio::test]
    async fn a_key_given_by_the_config_signs_and_labels_checkpoints_with_the_replica() {
        let seed = "07".repeat(32);
        let source = "${secret:AUDIT_KEY}";
        let expected = SigningKey::from_hex_seed(&seed, source)
            .unwrap()
            .public_hex();
        let options = |hex: &str| JournalOptions {
            replica: Some("replica-a".to_owned()),
            chain: ChainOptions {
                key_seed: Some(super::super::KeySeed {
                    hex: hex.to_owned(),
                    source: source.to_owned(),
                }),
                ..every(1).chain
            },
            ..every(1)
        };
        let (dir, j) = open_temp(options(&seed));
        assert_eq!(j.public_key(), expected);
        let rec = rec_at(now_ms(), "s", "t", "read", Status::Success);
        j.append(rec).await.unwrap();
        j.flush().await.unwrap();
        let checkpoint = j.latest_checkpoint().unwrap().expect("a checkpoint");
        assert!(checkpoint.signed_by(&expected));
        assert_eq!(checkpoint.replica.as_deref(), Some("replica-a"));
        assert!(
            !dir.path().join(KEY_FILE).exists(),
            "no key file is made beside the journal when the config gives the key"
        );
        assert!(j.verify_chain(None, None).unwrap().ok);
        drop(j);
        // A secret that is not a seed: an error naming where it came from, never its value.
        let e = Journal::open(&dir.path().join("other.redb"), options("not-hex"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(source) && e.contains("64 hex digits") && !e.contains("not-hex"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn final_records_are_chained_pending_ones_are_not_and_the_chain_verifies() {
        for durability in [
            Durability::Sync,
            Durability::Async {
                flush: Duration::from_millis(5),
            },
        ] {
            let (dir, j) = open_temp(JournalOptions {
                durability,
                ..every(3)
            });
            let mut ids = Vec::new();
            for i in 0..10 {
                let mut rec = rec_at(now_ms(), "s", "t", "read", Status::Pending);
                rec.request_id = Some(i.to_string());
                j.append(rec.clone()).await.unwrap();
                rec.status = Status::Success;
                j.submit(rec.clone());
                ids.push(rec.id);
            }
            let open = rec_at(now_ms(), "s", "t", "read", Status::Pending);
            j.append(open.clone()).await.unwrap();
            j.flush().await.unwrap();
            let seqs: Vec<u64> = ids
                .iter()
                .map(|id| ChainLink::of_row(&stored_row(&j, id)).unwrap().seq.unwrap())
                .collect();
            let mut sorted = seqs.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (1..=10).collect::<Vec<_>>(), "{durability:?}");
            assert_eq!(
                ChainLink::of_row(&stored_row(&j, &open.id)).unwrap().seq,
                None
            );
            let report = j.verify_chain(None, None).unwrap();
            assert!(report.ok, "{report:#?}");
            assert_eq!((report.chained, report.pending), (10, 1));
            // A checkpoint is made at the end of a transaction that passed the count.
            assert!(report.checkpoints >= 1, "{report:?}");
            let signed = report.last_checkpoint.as_ref().map_or(0, |c| c.seq);
            assert_eq!(report.unsigned_tail, 10 - signed, "{report:?}");
            // Closing signs the head.
            let path = dir.path().join("sub/activity.redb");
            drop(j);
            let j = Journal::open(&path, every(3)).unwrap();
            let report = j.verify_chain(None, None).unwrap();
            assert!(report.ok && report.unsigned_tail == 0, "{report:#?}");
        }
    }

    #[tokio::test]
    async fn an_idle_journal_signs_its_head_once_the_interval_has_passed() {
        for durability in [
            Durability::Sync,
            Durability::Async {
                flush: Duration::from_millis(5),
            },
        ] {
            let (_dir, j) = open_temp(JournalOptions {
                durability,
                chain: ChainOptions {
                    checkpoint_every: 0,
                    checkpoint_interval: Duration::from_millis(100),
                    ..ChainOptions::default()
                },
                ..JournalOptions::default()
            });
            // The first record is signed at once (no checkpoint yet); the next ones wait.
            for _ in 0..5 {
                j.append(rec_at(now_ms(), "s", "t", "read", Status::Success))
                    .await
                    .unwrap();
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                let (state, checkpoints) = j.chain_state().unwrap();
                if state.head_seq == 5 && checkpoints.last().map(|c| c.seq) == Some(5) {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{state:?} {checkpoints:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    #[tokio::test]
    async fn a_final_record_written_again_replaces_its_earlier_version() {
        let (_dir, j) = open_temp(every(1));
        let mut rec = rec_at(now_ms(), "s", "t", "read", Status::Success);
        j.append(rec.clone()).await.unwrap();
        j.append(rec_at(now_ms(), "s", "u", "read", Status::Success))
            .await
            .unwrap();
        // Reading makes the writer apply what it holds, so the first version is stored.
        stored_row(&j, &rec.id);
        rec.status = Status::Error;
        j.append(rec.clone()).await.unwrap();
        // The same content again changes nothing.
        j.append(rec.clone()).await.unwrap();
        let link = ChainLink::of_row(&stored_row(&j, &rec.id)).unwrap();
        assert_eq!((link.seq, link.replaces.len()), (Some(3), 1));
        let report = j.verify_chain(None, None).unwrap();
        assert!(report.ok, "{report:#?}");
        assert_eq!(report.replaced, 1);
    }

    #[tokio::test]
    async fn retention_prunes_to_a_signed_anchor_and_what_remains_verifies() {
        let (_dir, j) = open_temp(JournalOptions {
            retention: Retention {
                max_records: 20,
                min_age: Duration::ZERO,
                ..Retention::default()
            },
            ..every(7)
        });
        for _ in 0..50 {
            j.append(rec_at(now_ms(), "s", "t", "read", Status::Success))
                .await
                .unwrap();
        }
        assert_eq!(j.run_retention().unwrap(), 30);
        let (state, checkpoints) = j.chain_state().unwrap();
        assert!(state.pruned_to >= 30, "{state:?}");
        assert_eq!(
            checkpoints[0].seq, state.pruned_to,
            "older checkpoints are dropped"
        );
        let report = j.verify_chain(None, None).unwrap();
        assert!(report.ok, "{report:#?}");
        assert_eq!(report.pruned, 30);
        // A key that is not the journal's: every signature is refused.
        let other = SigningKey::load_or_create(&_dir.path().join("other.key")).unwrap();
        let report = j.verify_chain(Some(&other.public_hex()), None).unwrap();
        assert!(!report.ok);
    }
}

#[test]
fn since_checks_the_chain_from_its_first_record_at_or_after_the_time() {
    let mut records = chain(10);
    records.remove(7); // seq 8
    records.remove(2); // seq 3
    let mut verifier = Verifier::new(None);
    verifier.since(1_000_000 + 1000 * 6);
    for record in &records {
        verifier.record(record);
    }
    let report = verifier.finish();
    assert_eq!(report.first_seq, Some(6));
    let found: Vec<_> = report.problems.iter().map(|p| (p.kind, p.seq)).collect();
    assert_eq!(found, [(ProblemKind::Deleted, Some(8))], "{report:#?}");
}

#[test]
fn a_head_past_the_last_record_is_a_cut_tail_and_a_later_unchained_record_is_inserted() {
    let mut records = chain(6);
    let mut forged = records[0].clone();
    let object = forged.as_object_mut().unwrap();
    for field in ["seq", "prev", "hash"] {
        object.remove(field);
    }
    forged["id"] = ulid::Ulid::from_parts(9_000_000, 1).to_string().into();
    records.push(forged);
    let mut verifier = Verifier::new(None);
    verifier.chain_state(8, 0, 1_000_500);
    for record in &records {
        verifier.record(record);
    }
    let report = verifier.finish();
    let found: Vec<_> = report.problems.iter().map(|p| (p.kind, p.seq)).collect();
    assert_eq!(
        found,
        [
            (ProblemKind::Truncated, Some(7)),
            (ProblemKind::Inserted, None)
        ],
        "{report:#?}"
    );
}

#[test]
fn the_canonical_sha256_ignores_key_order_and_hashes_the_canonical_text() {
    let one = canonical_sha256(&json!({"b": 1, "a": {"y": [true, null], "x": "é"}}));
    let other = canonical_sha256(&json!({"a": {"x": "é", "y": [true, null]}, "b": 1}));
    assert_eq!(one, other);
    assert_eq!(
        one,
        hex(&Sha256::digest(
            r#"{"a":{"x":"é","y":[true,null]},"b":1}"#.as_bytes()
        ))
    );
}
