//! Tests of the credential file store: values set, listed and deleted; the file private
//! (0600 in a 0700 dir); concurrent writers; a corrupt file refused without showing a value.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_value_set_is_read_back_listed_by_prefix_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let store = CredentialStore::open_file(dir.path());
    assert_eq!(store.get("secret/GITHUB").unwrap(), None);
    store.set("secret/GITHUB", "ghp_value_1").unwrap();
    store
        .set("oauth/linear/tokens", "{\"access_token\":\"t\"}")
        .unwrap();
    store.set("secret/GITHUB", "ghp_value_2").unwrap();
    assert_eq!(
        store.get("secret/GITHUB").unwrap().unwrap().expose(),
        "ghp_value_2"
    );
    assert_eq!(store.keys("secret/").unwrap(), ["secret/GITHUB"]);
    assert_eq!(
        store.keys("").unwrap(),
        ["oauth/linear/tokens", "secret/GITHUB"]
    );
    // A second store on the same dir (another process, in real life) sees it.
    let other = CredentialStore::open_file(dir.path());
    assert_eq!(
        other.get("oauth/linear/tokens").unwrap().unwrap().expose(),
        "{\"access_token\":\"t\"}"
    );
    assert!(store.delete("secret/GITHUB").unwrap());
    assert!(!store.delete("secret/GITHUB").unwrap());
    assert_eq!(other.get("secret/GITHUB").unwrap(), None);
    assert_eq!(store.keys("secret/").unwrap(), Vec::<String>::new());
}

#[test]
fn the_file_is_0600_in_a_0700_dir_and_no_temporary_file_is_left() {
    let parent = tempfile::tempdir().unwrap();
    let data_dir = parent.path().join("data");
    let store = CredentialStore::open_file(&data_dir);
    assert_eq!(
        store.backend(),
        format!("file: {}", data_dir.join("credentials.json").display())
    );
    store.set("secret/A", "one").unwrap();
    store.set("secret/B", "two").unwrap();
    assert_eq!(mode(&data_dir), 0o700);
    assert_eq!(mode(&data_dir.join("credentials.json")), 0o600);
    let names: Vec<String> = std::fs::read_dir(&data_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".tmp")),
        "temporary files left: {names:?}"
    );
    // A file someone widened is narrowed again when it is next read.
    let path = data_dir.join("credentials.json");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(store.get("secret/A").unwrap().unwrap().expose(), "one");
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn two_stores_setting_at_once_on_one_dir_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let first = CredentialStore::open_file(dir.path());
    let second = CredentialStore::open_file(dir.path());
    std::thread::scope(|scope| {
        for (name, store) in [("first", &first), ("second", &second)] {
            for thread in 0..2 {
                let store = store.clone();
                scope.spawn(move || {
                    for i in 0..25 {
                        store
                            .set(&format!("secret/{name}-{thread}-{i}"), &format!("v{i}"))
                            .unwrap();
                    }
                });
            }
        }
    });
    let keys = first.keys("secret/").unwrap();
    assert_eq!(keys.len(), 100, "{keys:?}");
    assert_eq!(
        second.get("secret/first-1-24").unwrap().unwrap().expose(),
        "v24"
    );
}

#[test]
fn a_corrupt_file_is_refused_naming_the_file_and_never_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("credentials.json");
    let store = CredentialStore::open_file(dir.path());
    for text in [
        "{\"version\":1,\"secrets\":\"hunter2-value\"}",
        "{\"version\":1,\"secrets\":{\"k\":[\"hunter2-value\"]}}",
        "{\"version\":1,\"secrets\":{\"k\":\"hunter2-value\"",
        "{\"version\":1,\"secrets\":{},\"hunter2-value\":1}",
        "hunter2-value",
    ] {
        std::fs::write(&path, text).unwrap();
        for error in [
            store.get("k").unwrap_err(),
            store.set("k", "x").unwrap_err(),
            store.keys("").unwrap_err(),
        ] {
            let message = error.to_string();
            assert!(
                message.contains(&path.display().to_string()),
                "{text}: {message}"
            );
            assert!(message.contains("secret set"), "{message}");
            assert!(!message.contains("hunter2"), "{text}: {message}");
            assert!(!format!("{error:?}").contains("hunter2"), "{error:?}");
        }
    }
    // The refused write left the file as it was.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "hunter2-value");
    std::fs::write(&path, "{\"version\":2}").unwrap();
    assert!(
        store
            .get("k")
            .unwrap_err()
            .to_string()
            .contains("version 2")
    );
}

#[test]
fn no_value_shows_in_debug_output() {
    let dir = tempfile::tempdir().unwrap();
    let store = CredentialStore::open_file(dir.path());
    store.set("secret/TOKEN", "hunter2-value").unwrap();
    let secret = store.get("secret/TOKEN").unwrap().unwrap();
    assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
    assert!(!format!("{store:?}").contains("hunter2"));
    let too_large = "hunter2".repeat(40_000);
    let error = store.set("secret/BIG", &too_large).unwrap_err();
    assert!(error.to_string().contains("over the limit"), "{error}");
    assert!(!error.to_string().contains("hunter2"));
}

#[test]
fn malformed_keys_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = CredentialStore::open_file(dir.path());
    for (key, reason) in [
        ("", "empty"),
        ("secret/a\nb", "control character"),
        (" secret/a", "whitespace"),
    ] {
        let message = store.set(key, "v").unwrap_err().to_string();
        assert!(message.contains(reason), "{key:?}: {message}");
    }
    let long = "k".repeat(513);
    assert!(store.get(&long).unwrap_err().to_string().contains("512"));
    assert!(!dir.path().join("credentials.json").exists());
}

#[test]
fn the_store_is_send_sync_and_clone() {
    fn check<T: Send + Sync + Clone>() {}
    check::<CredentialStore>();
}
