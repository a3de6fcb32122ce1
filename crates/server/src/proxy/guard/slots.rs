//! Where the strings of an answer are, and putting the guards' changes back: each answer
//! (a tool result, a prompt, a resource, JSON values) becomes slots of text (a text blob or
//! a text-typed image decoded), the slots become the items the guards judge (adjacent text
//! items as one), and what the guards redacted or marked is written back into the slots
//! (a blob encoded again), with the delimiters' look-alikes neutralised in every string.

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, MetaObject, ResourceContents};
use serde_json::Value;

use mcpproxy_policy::{GuardItem, Guarded, ItemKind, neutralise_delimiters, wrap_marked};

use super::GuardNote;

/// A JSON value in an answer: a `Value` field or an object (`_meta`).
pub(super) enum Json<'a> {
    Value(&'a mut Value),
    Object(&'a mut JsonObject),
}

impl Json<'_> {
    fn to_text(&self) -> String {
        match self {
            Json::Value(value) => value.to_string(),
            Json::Object(object) => serde_json::to_string(object).unwrap_or_default(),
        }
    }

    /// Replaces the value with `text` parsed; `Err` when it is no longer JSON of its kind.
    fn set_text(&mut self, text: &str) -> Result<(), String> {
        let parsed: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match (self, parsed) {
            (Json::Value(value), parsed) => **value = parsed,
            (Json::Object(object), Value::Object(parsed)) => **object = parsed,
            (Json::Object(_), _) => return Err("it is no longer a JSON object".to_owned()),
        }
        Ok(())
    }

    fn neutralise(&mut self) {
        match self {
            Json::Value(value) => neutralise_json(value),
            Json::Object(object) => object.values_mut().for_each(neutralise_json),
        }
    }
}

/// A place in an answer that holds text a guard sees.
pub(super) enum Slot<'a> {
    /// A string shown as it is: a text item, a description, a completion value, an error
    /// message. `joinable`: a text item, judged together with the text items next to it.
    Text {
        text: &'a mut String,
        kind: ItemKind,
        uri: Option<String>,
        joinable: bool,
    },
    /// Base64 of text (a blob or image whose `mimeType` is text): the guards see it
    /// decoded; it is encoded again when they changed it. `decoded` is what they were given.
    Encoded {
        data: &'a mut String,
        uri: Option<String>,
        decoded: String,
    },
    /// A JSON value (`structuredContent`, a `_meta`, an error's `data`, log data) as JSON
    /// text; `given` is the text the guards were given.
    Json {
        value: Json<'a>,
        given: String,
        structured: bool,
    },
}

impl<'a> Slot<'a> {
    pub(super) fn text(text: &'a mut String, kind: ItemKind, uri: Option<String>) -> Self {
        Slot::Text {
            text,
            kind,
            uri,
            joinable: false,
        }
    }

    pub(super) fn meta(meta: &'a mut Option<MetaObject>) -> Option<Self> {
        meta.as_mut().map(|meta| Slot::Json {
            value: Json::Object(&mut meta.0),
            given: String::new(),
            structured: false,
        })
    }

    pub(super) fn value(value: &'a mut Value) -> Self {
        match value {
            Value::String(text) => Slot::text(text, ItemKind::Text, None),
            value => Slot::Json {
                value: Json::Value(value),
                given: String::new(),
                structured: false,
            },
        }
    }
}

/// Every place of a tool result a guard sees: its content, `structuredContent`, `_meta`.
pub(super) fn call_result_slots(result: &mut CallToolResult) -> Vec<Slot<'_>> {
    let CallToolResult {
        content,
        structured_content,
        meta,
        ..
    } = result;
    let (mut slots, mut metas) = (Vec::new(), Vec::new());
    for block in content.iter_mut() {
        content_slots(block, &mut slots, &mut metas);
    }
    slots.append(&mut metas);
    if let Some(value) = structured_content.as_mut() {
        slots.push(Slot::Json {
            value: Json::Value(value),
            given: String::new(),
            structured: true,
        });
    }
    slots.extend(Slot::meta(meta));
    slots
}

/// The places of one content item: its text (or text data) and a resource link's words in
/// `slots`, its `_meta` in `metas` (kept apart, so that a `_meta` on a text item does not
/// part it from the text items next to it).
pub(super) fn content_slots<'a>(
    content: &'a mut ContentBlock,
    slots: &mut Vec<Slot<'a>>,
    metas: &mut Vec<Slot<'a>>,
) {
    match content {
        ContentBlock::Text(text) => {
            slots.push(Slot::Text {
                text: &mut text.text,
                kind: ItemKind::Text,
                uri: None,
                joinable: true,
            });
            metas.extend(Slot::meta(&mut text.meta));
        }
        ContentBlock::Image(image) => {
            if is_text_mime(&image.mime_type) {
                slots.push(encoded(&mut image.data, None));
            }
            metas.extend(Slot::meta(&mut image.meta));
        }
        ContentBlock::Audio(audio) => {
            if is_text_mime(&audio.mime_type) {
                slots.push(encoded(&mut audio.data, None));
            }
            metas.extend(Slot::meta(&mut audio.meta));
        }
        ContentBlock::Resource(embedded) => {
            resource_slots(&mut embedded.resource, slots, metas);
            metas.extend(Slot::meta(&mut embedded.meta));
        }
        ContentBlock::ResourceLink(link) => {
            let at = Some(link.uri.clone());
            let rmcp::model::Resource {
                uri,
                name,
                title,
                description,
                meta,
                ..
            } = link;
            slots.push(Slot::text(name, ItemKind::Text, at.clone()));
            if let Some(title) = title.as_mut() {
                slots.push(Slot::text(title, ItemKind::Text, at.clone()));
            }
            if let Some(description) = description.as_mut() {
                slots.push(Slot::text(description, ItemKind::Text, at.clone()));
            }
            slots.push(Slot::text(uri, ItemKind::Text, at));
            metas.extend(Slot::meta(meta));
        }
        // A kind of content rmcp adds later: not shown to the guards until it is known.
        _ => {}
    }
}

/// The places of a resource's contents: its text, or its blob when the `mimeType` is
/// text, in `slots`; its `_meta` in `metas`.
pub(super) fn resource_slots<'a>(
    resource: &'a mut ResourceContents,
    slots: &mut Vec<Slot<'a>>,
    metas: &mut Vec<Slot<'a>>,
) {
    match resource {
        ResourceContents::TextResourceContents {
            uri, text, meta, ..
        } => {
            slots.push(Slot::text(text, ItemKind::ResourceText, Some(uri.clone())));
            metas.extend(Slot::meta(meta));
        }
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            meta,
        } => {
            if mime_type.as_deref().is_some_and(is_text_mime) {
                slots.push(encoded(blob, Some(uri.clone())));
            }
            metas.extend(Slot::meta(meta));
        }
        _ => {}
    }
}

fn encoded(data: &mut String, uri: Option<String>) -> Slot<'_> {
    Slot::Encoded {
        data,
        uri,
        decoded: String::new(),
    }
}

/// Whether data of this media type is text a client may show: `text/*`, JSON, XML, YAML,
/// JavaScript, TOML, shell scripts, SQL (parameters ignored, case-insensitive).
pub(super) fn is_text_mime(mime: &str) -> bool {
    let essence = mime
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || essence.ends_with("+yaml")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/xml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/javascript"
                | "application/ecmascript"
                | "application/toml"
                | "application/x-sh"
                | "application/sql"
                | "application/x-www-form-urlencoded"
        )
}

/// The slots' text as items, moved out (the slots are written back afterwards): adjacent
/// text items joined into one, with the offsets where each piece after the first starts,
/// and how many slots each item holds.
pub(super) fn take_items(slots: &mut [Slot<'_>]) -> (Vec<GuardItem>, Vec<Vec<usize>>, Vec<usize>) {
    let mut items: Vec<GuardItem> = Vec::with_capacity(slots.len());
    let mut parts: Vec<Vec<usize>> = Vec::with_capacity(slots.len());
    let mut sizes: Vec<usize> = Vec::with_capacity(slots.len());
    let mut joining = false;
    for slot in slots.iter_mut() {
        match slot {
            Slot::Text {
                text,
                kind,
                uri,
                joinable,
            } => {
                let text = std::mem::take(*text);
                if *joinable
                    && joining
                    && let (Some(item), Some(boundaries), Some(size)) =
                        (items.last_mut(), parts.last_mut(), sizes.last_mut())
                {
                    boundaries.push(item.text.len());
                    item.text.push_str(&text);
                    *size += 1;
                    continue;
                }
                joining = *joinable;
                items.push(GuardItem {
                    kind: *kind,
                    text,
                    uri: uri.take(),
                });
            }
            Slot::Encoded { data, uri, decoded } => {
                joining = false;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.trim().as_bytes())
                    .unwrap_or_else(|_| data.as_bytes().to_vec());
                *decoded = String::from_utf8_lossy(&bytes).into_owned();
                items.push(GuardItem {
                    kind: if uri.is_some() {
                        ItemKind::ResourceText
                    } else {
                        ItemKind::Text
                    },
                    text: decoded.clone(),
                    uri: uri.take(),
                });
            }
            Slot::Json {
                value,
                given,
                structured,
            } => {
                joining = false;
                *given = value.to_text();
                items.push(GuardItem {
                    kind: if *structured {
                        ItemKind::Structured
                    } else {
                        ItemKind::Text
                    },
                    text: given.clone(),
                    uri: None,
                });
            }
        }
        parts.push(Vec::new());
        sizes.push(1);
    }
    (items, parts, sizes)
}

/// `text` cut at `boundaries` into `count` pieces; `None` when a boundary is out of place.
pub(super) fn split_at(text: &str, boundaries: &[usize], count: usize) -> Option<Vec<String>> {
    if boundaries.len() + 1 != count {
        return None;
    }
    let mut pieces = Vec::with_capacity(count);
    let mut at = 0;
    for &boundary in boundaries {
        pieces.push(text.get(at..boundary)?.to_owned());
        at = boundary;
    }
    pieces.push(text.get(at..)?.to_owned());
    Some(pieces)
}

pub(super) fn put_back(
    slots: Vec<Slot<'_>>,
    sizes: &[usize],
    guarded: Guarded,
) -> Result<GuardNote, GuardNote> {
    // When any part of the answer is marked, all of it is.
    let marks = guarded.answer_marks();
    let mut note = GuardNote {
        reports: guarded.reports,
        withheld: guarded.withheld.map(|w| w.message),
        marked: None,
    };
    if note.withheld.is_some() {
        return Err(note);
    }
    let tag = (!marks.is_empty()).then(random_tag);
    let show = |text: String| match &tag {
        Some(tag) => wrap_marked(&text, &marks, tag),
        None => neutralise_delimiters(&text).unwrap_or(text),
    };
    let mut pieces = Vec::with_capacity(slots.len());
    for ((item, boundaries), size) in guarded.items.into_iter().zip(guarded.parts).zip(sizes) {
        match split_at(&item.text, &boundaries, *size) {
            Some(split) => pieces.extend(split),
            None => {
                note.withheld = Some(
                    "Result withheld: the result guards' redactions could not be put back \
                     into the answer's text items; the proxy fails closed"
                        .to_owned(),
                );
                return Err(note);
            }
        }
    }
    for (slot, piece) in slots.into_iter().zip(pieces) {
        match slot {
            Slot::Text { text, .. } => *text = show(piece),
            Slot::Encoded { data, decoded, .. } => {
                let shown = show(piece);
                if shown != decoded {
                    *data = base64::engine::general_purpose::STANDARD.encode(shown);
                }
            }
            Slot::Json {
                mut value, given, ..
            } => {
                // Untouched unless a guard redacted inside it; a redaction that broke the
                // JSON withholds the answer (fail closed).
                if given != piece
                    && let Err(e) = value.set_text(&piece)
                {
                    note.withheld = Some(format!(
                        "Result withheld: a result guard's redaction left JSON of the answer \
                         unreadable ({e}); the proxy fails closed"
                    ));
                    return Err(note);
                }
                value.neutralise();
            }
        }
    }
    note.marked = tag.map(|tag| (marks, tag));
    Ok(note)
}

/// Every string in `value` (keys included) with delimiter look-alikes neutralised.
pub(super) fn neutralise_json(value: &mut Value) {
    match value {
        Value::String(text) => {
            if let Some(clean) = neutralise_delimiters(text) {
                *text = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(neutralise_json),
        Value::Object(object) => {
            if object.keys().any(|k| neutralise_delimiters(k).is_some()) {
                let entries = std::mem::take(object);
                for (key, value) in entries {
                    let key = neutralise_delimiters(&key).unwrap_or(key);
                    object.insert(key, value);
                }
            }
            object.values_mut().for_each(neutralise_json);
        }
        _ => {}
    }
}

/// 16 hex digits from the OS's random source: the tag of one answer's untrusted-content
/// delimiters, which the upstream cannot know when it writes its answer.
pub(super) fn random_tag() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        // Never seen on Linux; a clock-derived tag is still unknown to the upstream ahead.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (nanos as u64).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
