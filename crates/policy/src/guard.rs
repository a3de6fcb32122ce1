//! Result guards: the stage that judges what comes back from an upstream (a tool's result,
//! a prompt, a resource) before the client sees it. A [`ResultGuard`] answers per item:
//! pass, redact spans, or mark the item as untrusted; or it blocks the whole result.
//! [`Guards`] runs them in order (each sees the items as the guards before it left them),
//! checks every answer, applies redactions, and sums up what happened as [`GuardReport`]s
//! for the activity record (kinds and counts, never the text found) and [`GuardTally`]s
//! for the metrics. A guard that faults, or answers something that cannot be applied,
//! withholds the result: the chain fails closed.
//!
//! Marks are only collected here; the proxy wraps each marked item with [`wrap_marked`]
//! and a tag of its own choosing (random per result), which the upstream cannot guess and
//! so cannot forge a closing delimiter for.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcpproxy_support::quote;
use serde::{Deserialize, Serialize};

use super::stage::{Fault, FaultKind};
use super::types::{Annotations, Intent, OperationType};

/// What a guarded result answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    /// A tool call's result.
    ToolResult,
    /// A prompt (`prompts/get`).
    Prompt,
    /// A resource (`resources/read`).
    Resource,
}

/// The request a guarded result answers.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardContext {
    pub kind: ResultKind,
    pub server: String,
    /// The tool's or prompt's name on its server, or the resource's URI.
    pub name: String,
    pub variant: Option<OperationType>,
    pub intent: Option<Intent>,
    pub annotations: Option<Annotations>,
}

/// Where an item's text comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    Text,
    ResourceText,
    /// `structuredContent` as JSON text.
    Structured,
}

/// One piece of a result a guard sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardItem {
    pub kind: ItemKind,
    pub text: String,
    pub uri: Option<String>,
}

impl GuardItem {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            kind: ItemKind::Text,
            text: text.into(),
            uri: None,
        }
    }
}

/// A span of an item's text to replace: UTF-8 byte offsets, `end` exclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    pub start: usize,
    pub end: usize,
    pub kind: String,
    /// `None`: `[REDACTED:<kind>]`.
    pub replacement: Option<String>,
}

/// Why an item is marked untrusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub kind: String,
    pub note: String,
}

/// What a guard does with one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemAction {
    Pass,
    Redact(Vec<Redaction>),
    Mark(Mark),
}

/// Why a guard withholds the whole result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub kind: String,
    pub reason: String,
}

/// A guard's answer: an action per item (in order), or block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardAnswer {
    Items(Vec<ItemAction>),
    Block(Block),
}

/// Judges a result's items. The plugin host implements it for WebAssembly components.
pub trait ResultGuard: Send + Sync {
    /// The name records and messages use for this guard.
    fn name(&self) -> &str;
    fn guard(&self, context: &GuardContext, items: &[GuardItem]) -> Result<GuardAnswer, Fault>;
    /// As [`crate::Annotator::is_quick`]: cheap enough to run on the thread serving the call.
    fn is_quick(&self) -> bool {
        false
    }
}

/// What a guard did, as the activity record keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardAction {
    Redact,
    Mark,
    Block,
    /// The guard faulted (or answered something unusable) and the result was withheld.
    Fault,
}

impl GuardAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Redact => "redact",
            Self::Mark => "mark",
            Self::Block => "block",
            Self::Fault => "fault",
        }
    }
}

/// One guard's effect on one result, for the activity record: which kinds it found and how
/// many times it acted. Never the text it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardReport {
    #[serde(default)]
    pub plugin: String,
    pub action: GuardAction,
    /// The kinds found, sorted, each once (`aws-access-key`, `github-token`); at most 16.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Distinct secrets redacted (one written twice, say as text and again in
    /// `structuredContent`, counts once), items marked; 1 for a block or a fault.
    #[serde(default)]
    pub count: u32,
}

/// One guard's count of one action on one kind, for the metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardTally {
    pub plugin: String,
    pub action: GuardAction,
    pub kind: String,
    pub count: u32,
}

/// Why a result was withheld.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    /// The guard that blocked or faulted.
    pub plugin: String,
    /// What the caller reads instead of the result.
    pub message: String,
    /// Set when the guard faulted rather than blocked.
    pub fault: Option<FaultKind>,
}

/// The result after every guard: the items (redacted), the marks to wrap each item in,
/// and what the guards did. When `withheld` is set the items must not be shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guarded {
    pub items: Vec<GuardItem>,
    /// Per item, the marks the guards put on it (empty: unmarked).
    pub marks: Vec<Vec<Mark>>,
    /// Per item judged as several parts joined (see [`Guards::run_parts`]), where each part
    /// after the first starts in the redacted text, in order.
    pub parts: Vec<Vec<usize>>,
    pub withheld: Option<Withheld>,
    pub reports: Vec<GuardReport>,
    pub tallies: Vec<GuardTally>,
}

impl Guarded {
    /// Whether any guard changed or marked something, or withheld the result.
    pub fn acted(&self) -> bool {
        !self.reports.is_empty()
    }

    /// The marks of the whole answer: every mark any item got, each once, in order. When one
    /// part of an answer is flagged, the proxy marks all of it with these.
    pub fn answer_marks(&self) -> Vec<Mark> {
        let mut all: Vec<Mark> = Vec::new();
        for mark in self.marks.iter().flatten() {
            if !all.contains(mark) {
                all.push(mark.clone());
            }
        }
        all
    }
}

/// The longest kind kept, in bytes; longer kinds are cut.
const MAX_KIND_BYTES: usize = 64;
/// The most kinds one report lists (its count still counts them all).
const MAX_KINDS: usize = 16;
/// The longest replacement or note kept, in bytes.
const MAX_NOTE_BYTES: usize = 512;

/// The guards in force, in order.
#[derive(Clone, Default)]
pub struct Guards {
    stages: Vec<Arc<dyn ResultGuard>>,
}

impl std::fmt::Debug for Guards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.stages.iter().map(|g| g.name()))
            .finish()
    }
}

impl Guards {
    pub fn new(stages: Vec<Arc<dyn ResultGuard>>) -> Self {
        Self { stages }
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// The guards' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.stages.iter().map(|g| g.name().to_owned()).collect()
    }

    /// Whether every guard is quick (see [`ResultGuard::is_quick`]).
    pub fn is_quick(&self) -> bool {
        self.stages.iter().all(|g| g.is_quick())
    }

    /// Runs every guard in order over `items`. Stops at the first block or fault.
    pub fn run(&self, context: &GuardContext, items: Vec<GuardItem>) -> Guarded {
        let parts = vec![Vec::new(); items.len()];
        self.run_parts(context, items, parts)
    }

    /// [`Guards::run`] over items some of which are several pieces of the answer joined
    /// (adjacent text items, so that a secret split across them is seen whole): `parts`
    /// holds, per item, the byte offsets where each piece after the first starts. The
    /// offsets follow the redactions (a redaction across a boundary goes to the piece it
    /// starts in), so the caller can cut the redacted text back into its pieces with
    /// [`Guarded::parts`].
    pub fn run_parts(
        &self,
        context: &GuardContext,
        items: Vec<GuardItem>,
        parts: Vec<Vec<usize>>,
    ) -> Guarded {
        let mut guarded = Guarded {
            marks: vec![Vec::new(); items.len()],
            parts,
            items,
            withheld: None,
            reports: Vec::new(),
            tallies: Vec::new(),
        };
        if guarded.items.is_empty() {
            return guarded;
        }
        for guard in &self.stages {
            let name = guard.name();
            let answer = match guard.guard(context, &guarded.items) {
                Ok(answer) => answer,
                Err(fault) => {
                    let message = format!(
                        "Result withheld because the {fault}; the proxy fails closed when a \
                         result guard faults"
                    );
                    guarded.fail(name, message, fault.kind);
                    return guarded;
                }
            };
            match answer {
                GuardAnswer::Block(block) => {
                    let kind = clean_kind(&block.kind);
                    guarded.withheld = Some(Withheld {
                        plugin: name.to_owned(),
                        message: format!(
                            "Result withheld: the result guard '{name}' blocked it: {}",
                            quote(cut(&block.reason, MAX_NOTE_BYTES))
                        ),
                        fault: None,
                    });
                    guarded.record(name, GuardAction::Block, BTreeMap::from([(kind, 1)]));
                    return guarded;
                }
                GuardAnswer::Items(actions) => {
                    if let Err(problem) = guarded.apply(name, actions) {
                        let message = format!(
                            "Result withheld because the result guard '{name}' {problem}; the \
                             proxy fails closed when a result guard faults"
                        );
                        guarded.fail(name, message, FaultKind::Trap);
                        return guarded;
                    }
                }
            }
        }
        guarded
    }
}

impl Guarded {
    fn fail(&mut self, name: &str, message: String, kind: FaultKind) {
        self.withheld = Some(Withheld {
            plugin: name.to_owned(),
            message,
            fault: Some(kind),
        });
        self.record(
            name,
            GuardAction::Fault,
            BTreeMap::from([(kind.as_str().to_owned(), 1)]),
        );
    }

    fn record(&mut self, plugin: &str, action: GuardAction, kinds: BTreeMap<String, u32>) {
        if kinds.is_empty() {
            return;
        }
        self.reports.push(GuardReport {
            plugin: plugin.to_owned(),
            action,
            kinds: kinds.keys().take(MAX_KINDS).cloned().collect(),
            count: kinds.values().sum(),
        });
        self.tallies
            .extend(kinds.into_iter().map(|(kind, count)| GuardTally {
                plugin: plugin.to_owned(),
                action,
                kind,
                count,
            }));
    }

    /// Checks a guard's actions against the items and applies them; `Err` says what was
    /// wrong with the answer (nothing is applied then).
    fn apply(&mut self, name: &str, actions: Vec<ItemAction>) -> Result<(), String> {
        if actions.len() != self.items.len() {
            return Err(format!(
                "answered {} item actions for {} items (one per item, in order)",
                actions.len(),
                self.items.len()
            ));
        }
        let mut texts: Vec<Option<String>> = vec![None; actions.len()];
        let mut redacted = BTreeMap::new();
        // A secret counts once, however often it appears (text and structuredContent).
        let mut distinct = std::collections::HashSet::new();
        let mut marked = BTreeMap::new();
        let mut new_marks = Vec::new();
        for (i, action) in actions.into_iter().enumerate() {
            match action {
                ItemAction::Pass => {}
                ItemAction::Redact(spans) if spans.is_empty() => {}
                ItemAction::Redact(spans) => {
                    let boundaries = self.parts.get(i).map_or(&[][..], Vec::as_slice);
                    let (text, found, moved) = redact(&self.items[i].text, spans, boundaries)
                        .map_err(|e| format!("answered an unusable redaction for item {i}: {e}"))?;
                    if let Some(parts) = self.parts.get_mut(i) {
                        *parts = moved;
                    }
                    for (kind, fingerprint) in found {
                        let count = redacted.entry(kind.clone()).or_insert(0);
                        if distinct.insert((kind, fingerprint)) {
                            *count += 1;
                        }
                    }
                    texts[i] = Some(text);
                }
                ItemAction::Mark(mark) => {
                    let mark = Mark {
                        kind: clean_kind(&mark.kind),
                        note: cut(&mark.note, MAX_NOTE_BYTES).to_owned(),
                    };
                    *marked.entry(mark.kind.clone()).or_insert(0) += 1;
                    new_marks.push((i, mark));
                }
            }
        }
        for (item, text) in self.items.iter_mut().zip(texts) {
            if let Some(text) = text {
                item.text = text;
            }
        }
        for (i, mark) in new_marks {
            self.marks[i].push(mark);
        }
        self.record(name, GuardAction::Redact, redacted);
        self.record(name, GuardAction::Mark, marked);
        Ok(())
    }
}

/// What [`redact`] gives back: the new text, the kind and fingerprint of each span, and the
/// part boundaries moved into the new text.
type Redacted = (String, Vec<(String, u64)>, Vec<usize>);

/// `text` with `spans` replaced, the kind and [`fingerprint`] of each span, and
/// `boundaries` (offsets into `text`, ascending) moved to where they fall in the new text (a
/// boundary inside a span moves to the end of its replacement); `Err` when a span is out of
/// bounds, not on character boundaries, reversed, or overlaps another.
fn redact(text: &str, mut spans: Vec<Redaction>, boundaries: &[usize]) -> Result<Redacted, String> {
    spans.sort_by_key(|s| (s.start, s.end));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut kinds = Vec::with_capacity(spans.len());
    let mut moved = Vec::with_capacity(boundaries.len());
    let mut next_boundary = boundaries.iter().copied().peekable();
    for span in spans {
        if span.start > span.end || span.end > text.len() {
            return Err(format!(
                "span {}..{} is outside the text ({} bytes)",
                span.start,
                span.end,
                text.len()
            ));
        }
        if !text.is_char_boundary(span.start) || !text.is_char_boundary(span.end) {
            return Err(format!(
                "span {}..{} does not fall on UTF-8 character boundaries",
                span.start, span.end
            ));
        }
        if span.start < at {
            return Err(format!(
                "span {}..{} overlaps the span before it",
                span.start, span.end
            ));
        }
        let kind = clean_kind(&span.kind);
        // Boundaries before the span (or at its start) keep their distance to the text
        // before it.
        while let Some(b) = next_boundary.next_if(|b| *b <= span.start) {
            moved.push(out.len() + b.saturating_sub(at));
        }
        out.push_str(&text[at..span.start]);
        match &span.replacement {
            Some(replacement) => out.push_str(cut(replacement, MAX_NOTE_BYTES)),
            None => {
                out.push_str("[REDACTED:");
                out.push_str(&kind);
                out.push(']');
            }
        }
        kinds.push((kind, fingerprint(&text[span.start..span.end])));
        // Boundaries inside the span move to the end of its replacement.
        while let Some(_inside) = next_boundary.next_if(|b| *b <= span.end) {
            moved.push(out.len());
        }
        at = span.end;
    }
    moved.extend(next_boundary.map(|b| out.len() + b.saturating_sub(at)));
    out.push_str(&text[at..]);
    Ok((out, kinds, moved))
}

/// A hash of a redacted span that is the same for a secret written as plain text and as a
/// JSON string (escapes and whitespace left out): what makes a secret count once. Kept
/// only while one answer is guarded, never stored.
fn fingerprint(span: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut chars = span.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            chars.next();
        } else if !c.is_whitespace() {
            c.hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// A kind as records and metrics keep it: lowercase ASCII letters, digits, `-` and `_` (other
/// characters dropped, uppercase lowered), at most 64 bytes; `unnamed` when nothing is left.
pub fn clean_kind(kind: &str) -> String {
    let kept: String = kind
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_')
        .take(MAX_KIND_BYTES)
        .collect();
    if kept.is_empty() {
        "unnamed".to_owned()
    } else {
        kept
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The opening delimiter of a marked item.
pub const UNTRUSTED_OPEN: &str = "<untrusted-content";
/// The closing delimiter of a marked item.
pub const UNTRUSTED_CLOSE: &str = "</untrusted-content";

/// `text` wrapped in untrusted-content delimiters carrying `tag` (which the proxy draws at
/// random per result, so text from the upstream cannot close the wrapper early), the
/// marks' notes first:
///
/// ```text
/// <untrusted-content tag="3f9c0a1b2d4e5f60">
/// Note from mcpproxy (injection-marker): ...
/// ...the item's text...
/// </untrusted-content tag="3f9c0a1b2d4e5f60">
/// ```
pub fn wrap_marked(text: &str, marks: &[Mark], tag: &str) -> String {
    let neutralised = neutralise_delimiters(text);
    let text = neutralised.as_deref().unwrap_or(text);
    let mut out = String::with_capacity(text.len() + 200);
    out.push_str(UNTRUSTED_OPEN);
    out.push_str(" tag=\"");
    out.push_str(tag);
    out.push_str("\">\n");
    for mark in marks {
        out.push_str("Note from mcpproxy (");
        out.push_str(&mark.kind);
        out.push_str("): ");
        out.push_str(&mark.note.replace(['\r', '\n'], " "));
        out.push('\n');
    }
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(UNTRUSTED_CLOSE);
    out.push_str(" tag=\"");
    out.push_str(tag);
    out.push_str("\">");
    out
}

/// What a look-alike of the untrusted-content delimiters becomes.
pub const DELIMITER_REMOVED: &str = "[delimiter look-alike removed by mcpproxy]";

/// `text` with every look-alike of the untrusted-content delimiters (an opening or closing
/// tag an upstream wrote, to end the proxy's wrapper early or open one of its own) replaced
/// by [`DELIMITER_REMOVED`]; `None` when there is none. A look-alike is the word
/// `untrusted-content`, in any case, with `-`, `_`, a dash look-alike, spaces or nothing
/// between its halves and invisible characters anywhere in it, after an opening angle
/// bracket or one of its look-alikes (`＜`, `‹`, `〈`, `⟨`, `﹤`, `˂`, `&lt;`, `&#60;`,
/// `&#x3c;`, `\u003c`) and optional `/`, `\` and spaces. The words without a bracket
/// (ordinary prose) are left alone.
pub fn neutralise_delimiters(text: &str) -> Option<String> {
    // Invisible characters are not ASCII: plain ASCII text without the word has no
    // look-alike.
    if text.is_ascii() && !text.to_ascii_lowercase().contains("untrusted") {
        return None;
    }
    // The visible characters, with their byte offsets.
    let visible: Vec<(usize, char)> = text
        .char_indices()
        .filter(|(_, c)| !is_invisible(*c))
        .collect();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < visible.len() {
        let Some(word_end) = delimiter_word_at(&visible, i, text.len()) else {
            i += 1;
            continue;
        };
        if let Some(start) = opener_before(text, &visible, i) {
            cuts.push((start, word_end));
        }
        i += 1;
    }
    if cuts.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in cuts {
        if start < at {
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(DELIMITER_REMOVED);
        at = end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// Zero-width, joiner, direction and other format characters a look-alike may hide in.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00ad}' | '\u{034f}' | '\u{061c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}'
        | '\u{ffa0}' | '\u{e0000}'..='\u{e007f}')
}

/// Where the word `untrusted-content` that starts at `visible[i]` ends (a byte offset into
/// the text), if one does.
fn delimiter_word_at(visible: &[(usize, char)], i: usize, text_len: usize) -> Option<usize> {
    let mut j = i;
    let expect = |word: &str, j: &mut usize| -> bool {
        for want in word.chars() {
            match visible.get(*j) {
                Some((_, c)) if c.to_ascii_lowercase() == want => *j += 1,
                _ => return false,
            }
        }
        true
    };
    if !expect("untrusted", &mut j) {
        return None;
    }
    let mut separators = 0;
    while let Some((_, c)) = visible.get(j) {
        let separator = matches!(
            c,
            '-' | '_' | '.' | ' ' | '\t' | '\u{2010}'
                ..='\u{2015}' | '\u{2212}' | '\u{fe63}' | '\u{ff0d}'
        );
        if !separator || separators == 3 {
            break;
        }
        separators += 1;
        j += 1;
    }
    if !expect("content", &mut j) {
        return None;
    }
    Some(visible.get(j).map_or(text_len, |(at, _)| *at))
}

/// Where the opening bracket (or look-alike) before the word at `visible[i]` starts, past
/// `/`, `\` and spaces, if there is one.
fn opener_before(text: &str, visible: &[(usize, char)], i: usize) -> Option<usize> {
    let mut j = i;
    while j > 0
        && matches!(
            visible[j - 1].1,
            '/' | '\\' | ' ' | '\t' | '\u{2215}' | '\u{ff0f}'
        )
    {
        j -= 1;
    }
    let (end, before) = match j.checked_sub(1) {
        Some(k) => (visible[k].0 + visible[k].1.len_utf8(), visible[k]),
        None => return None,
    };
    if matches!(
        before.1,
        '<' | '\u{ff1c}'
            | '\u{2039}'
            | '\u{2329}'
            | '\u{3008}'
            | '\u{27e8}'
            | '\u{fe64}'
            | '\u{02c2}'
            | '\u{276e}'
    ) {
        return Some(before.0);
    }
    let mut from = end.saturating_sub(8);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    let head = text[from..end].to_ascii_lowercase();
    ["&lt;", "&#60;", "&#x3c;", "\\u003c"]
        .iter()
        .find(|escape| head.ends_with(*escape))
        .map(|escape| end - escape.len())
}

#[cfg(test)]
mod tests;
