//! The routing rules as plain Rust on plain types, free of the component bindings so they
//! can be unit-tested natively. `lib.rs` converts the WIT types to these and back.
//!
//! | safety class  | variants that may run it                      |
//! |---------------|-----------------------------------------------|
//! | read-only     | any                                           |
//! | write-capable | `call_tool_write`, `call_tool_destructive`    |
//! | subprocess    | `call_tool_write`, `call_tool_destructive`    |
//! | dangerous     | `call_tool_destructive`                       |
//! | unknown       | none: always blocked                          |

/// The variant a call came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    Read,
    Write,
    Destructive,
}

/// The tool's effective safety class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    ReadOnly,
    WriteCapable,
    Subprocess,
    Dangerous,
    Unknown,
}

impl Class {
    /// The class as the WIT contract spells it.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Class::ReadOnly => "read-only",
            Class::WriteCapable => "write-capable",
            Class::Subprocess => "subprocess",
            Class::Dangerous => "dangerous",
            Class::Unknown => "unknown",
        }
    }
}

/// `None` when the call may go through, else the rejection message.
pub(crate) fn route(variant: Variant, class: Class, server: &str, tool: &str) -> Option<String> {
    match (class, variant) {
        (Class::ReadOnly, _)
        | (Class::WriteCapable | Class::Subprocess, Variant::Write | Variant::Destructive)
        | (Class::Dangerous, Variant::Destructive) => None,
        (Class::Unknown, _) => Some(format!(
            "Blocked: tool '{server}:{tool}' has unknown safety class. No variant can run it: \
             ask the server's maintainers to annotate it (readOnlyHint / destructiveHint) or to \
             give it a _meta.safety_class"
        )),
        (Class::Dangerous, _) => Some(format!(
            "Blocked: tool '{server}:{tool}' is classified dangerous. \
             Use call_tool_destructive to run it."
        )),
        (Class::WriteCapable | Class::Subprocess, Variant::Read) => Some(format!(
            "Blocked: tool '{server}:{tool}' is classified {}. \
             Use call_tool_write or call_tool_destructive to run it.",
            class.word()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VARIANTS: [Variant; 3] = [Variant::Read, Variant::Write, Variant::Destructive];

    fn allowed(class: Class) -> Vec<Variant> {
        VARIANTS
            .into_iter()
            .filter(|v| route(*v, class, "s", "t").is_none())
            .collect()
    }

    #[test]
    fn each_class_runs_only_through_its_variants() {
        assert_eq!(allowed(Class::ReadOnly), VARIANTS);
        assert_eq!(
            allowed(Class::WriteCapable),
            [Variant::Write, Variant::Destructive]
        );
        assert_eq!(
            allowed(Class::Subprocess),
            [Variant::Write, Variant::Destructive]
        );
        assert_eq!(allowed(Class::Dangerous), [Variant::Destructive]);
        assert_eq!(allowed(Class::Unknown), []);
    }

    #[test]
    fn messages_follow_the_documented_routing_rules() {
        assert_eq!(
            route(Variant::Write, Class::Dangerous, "mq", "remove_device").as_deref(),
            Some(
                "Blocked: tool 'mq:remove_device' is classified dangerous. \
                 Use call_tool_destructive to run it."
            )
        );
        assert_eq!(
            route(Variant::Read, Class::Subprocess, "mq", "run_job").as_deref(),
            Some(
                "Blocked: tool 'mq:run_job' is classified subprocess. \
                 Use call_tool_write or call_tool_destructive to run it."
            )
        );
        let unknown = route(Variant::Destructive, Class::Unknown, "mq", "mystery_tool");
        assert!(
            unknown.as_deref().is_some_and(|m| m
                .starts_with("Blocked: tool 'mq:mystery_tool' has unknown safety class.")
                && m.contains("_meta.safety_class")),
            "{unknown:?}"
        );
    }
}
