//! The effective annotations a pipeline of pure annotators worked out, remembered per tool
//! definition: a call of a tool whose definition has not changed reuses them instead of
//! asking the annotators again (a WebAssembly call, a conversion of the tool's schema).
//!
//! An entry is found by the tool's name and used only when the whole definition (server,
//! description, schema, annotations, `_meta`) equals the one it was made for, so a tool that
//! changes is annotated afresh. The memo holds at most [`MAX_TOOLS`] definitions and starts
//! over when full.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::types::{EffectiveAnnotations, Tool};

/// Tool definitions remembered at most; past this the memo is emptied and fills again.
pub(crate) const MAX_TOOLS: usize = 1024;

/// Definitions kept under one tool name (several servers may have a tool of that name).
const PER_NAME: usize = 8;

/// Remembered annotations by tool name, each with the definition it was made for.
#[derive(Default)]
pub(super) struct AnnotationMemo {
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_name: HashMap<String, Vec<(Tool, EffectiveAnnotations)>>,
    len: usize,
}

impl AnnotationMemo {
    fn entries(&self) -> MutexGuard<'_, Entries> {
        mcpproxy_support::lock(&self.entries)
    }

    /// The annotations remembered for exactly this definition of the tool.
    pub(super) fn get(&self, tool: &Tool) -> Option<EffectiveAnnotations> {
        self.entries()
            .by_name
            .get(&tool.name)?
            .iter()
            .find(|(seen, _)| seen == tool)
            .map(|(_, effective)| effective.clone())
    }

    /// Remembers the annotations worked out for this definition of the tool.
    pub(super) fn put(&self, tool: &Tool, effective: &EffectiveAnnotations) {
        let mut entries = self.entries();
        if entries.len >= MAX_TOOLS {
            entries.by_name.clear();
            entries.len = 0;
        }
        let same_name = entries.by_name.entry(tool.name.clone()).or_default();
        let mut added = 1;
        if let Some(at) = same_name
            .iter()
            .position(|(seen, _)| seen.server == tool.server)
        {
            // The server's previous definition of this tool is out of date.
            same_name.remove(at);
            added = 0;
        } else if same_name.len() >= PER_NAME {
            same_name.remove(0);
            added = 0;
        }
        same_name.push((tool.clone(), effective.clone()));
        entries.len += added;
    }

    /// Definitions held now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries().len
    }
}

/// A copy of a pipeline starts with an empty memo.
impl Clone for AnnotationMemo {
    fn clone(&self) -> Self {
        Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AnnotationSource, SafetyClass};

    fn tool(server: &str, name: &str, description: &str) -> Tool {
        Tool {
            server: server.into(),
            name: name.into(),
            description: description.into(),
            input_schema: serde_json::json!({"type": "object"}).into(),
            annotations: None,
            meta: None,
            ..Default::default()
        }
    }

    fn effective(class: SafetyClass) -> EffectiveAnnotations {
        EffectiveAnnotations {
            annotations: None,
            source: AnnotationSource::Plugin("annotator".into()),
            reason: Some("name".into()),
            safety_class: class,
        }
    }

    #[test]
    fn only_the_same_definition_finds_its_annotations() {
        let memo = AnnotationMemo::default();
        let read = tool("a", "list", "lists");
        memo.put(&read, &effective(SafetyClass::ReadOnly));
        assert_eq!(memo.get(&read), Some(effective(SafetyClass::ReadOnly)));
        assert_eq!(memo.get(&tool("a", "list", "deletes everything")), None);
        assert_eq!(memo.get(&tool("b", "list", "lists")), None);
        let mut schema_changed = read.clone();
        schema_changed.input_schema =
            serde_json::json!({"type": "object", "required": ["x"]}).into();
        assert_eq!(memo.get(&schema_changed), None);
    }

    #[test]
    fn a_new_definition_replaces_the_servers_old_one_and_other_servers_keep_theirs() {
        let memo = AnnotationMemo::default();
        memo.put(&tool("a", "t", "v1"), &effective(SafetyClass::ReadOnly));
        memo.put(&tool("b", "t", "v1"), &effective(SafetyClass::WriteCapable));
        memo.put(&tool("a", "t", "v2"), &effective(SafetyClass::Dangerous));
        assert_eq!(memo.len(), 2);
        assert_eq!(memo.get(&tool("a", "t", "v1")), None);
        assert_eq!(
            memo.get(&tool("a", "t", "v2")),
            Some(effective(SafetyClass::Dangerous))
        );
        assert_eq!(
            memo.get(&tool("b", "t", "v1")),
            Some(effective(SafetyClass::WriteCapable))
        );
    }

    #[test]
    fn it_stays_bounded() {
        let memo = AnnotationMemo::default();
        for i in 0..MAX_TOOLS * 3 {
            memo.put(
                &tool("s", &format!("t{i}"), ""),
                &effective(SafetyClass::ReadOnly),
            );
            assert!(memo.len() <= MAX_TOOLS);
        }
        for i in 0..PER_NAME * 3 {
            memo.put(
                &tool(&format!("s{i}"), "same", ""),
                &effective(SafetyClass::ReadOnly),
            );
        }
        let last = tool(&format!("s{}", PER_NAME * 3 - 1), "same", "");
        assert_eq!(memo.get(&last), Some(effective(SafetyClass::ReadOnly)));
        assert!(memo.len() <= MAX_TOOLS);
        assert_eq!(memo.get(&tool("s0", "same", "")), None, "the oldest went");
    }
}
