//! The plugin-name rule: part of the vocabulary because the config check, the plugin loader
//! and the plugin templates all apply it, and the config must not need the plugin host (and
//! so wasmtime) to check a name. A leaf: it imports nothing of the crate.

/// The plugin-name rule, shared by the loader, the templates and the config check: 1 to 64 of
/// `[a-z0-9-]`, not starting or ending with `-`.
pub fn is_plugin_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_names_are_lowercase_words_joined_by_dashes() {
        assert!(is_plugin_name("intent-matrix"));
        assert!(is_plugin_name("v2"));
        assert!(!is_plugin_name(""));
        assert!(!is_plugin_name("Intent"));
        assert!(!is_plugin_name("-x"));
        assert!(!is_plugin_name("x-"));
        assert!(!is_plugin_name("a_b"));
        assert!(!is_plugin_name(&"a".repeat(65)));
    }
}
