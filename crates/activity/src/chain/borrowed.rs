//! The writer's way to a record's hash: its canonical bytes (see the chain's module docs)
//! written straight from its JSON text, without building a `serde_json::Value` of it.
//!
//! Linking a record parsed its JSON into a `Value` (a `String` for every key and string, a
//! map per object) only to sort and write it again: a third of the writer thread's CPU on a
//! busy proxy (docs/benchmarks.md). Here the text is parsed into a tree that borrows its
//! strings from the text ([`Node`]). A string without escapes is written as it stands: its
//! bytes are already canonical, since JSON text can hold neither a quote, a backslash nor a
//! control character unescaped, and the canonical form escapes exactly those. A string
//! with escapes, and every number, is written by `serde_json` as the `Value` path writes it.
//!
//! The result is the same bytes as [`super::canonical`] of the parsed `Value` in every case,
//! duplicate keys included (the last one wins, as in a `Value`'s map); the unit tests
//! compare the two on hand-picked and generated records. The verifier keeps the `Value`
//! path: it is the definition.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;
use sha2::{Digest, Sha256};

use super::{Digest32, Replaced};

/// A JSON value whose unescaped strings are borrowed from the text it was read from.
#[derive(Debug)]
pub(super) enum Node<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    /// Members in the order of the text, duplicates kept (see [`write`]).
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

/// The hash of the record whose JSON object is `json`, with `extra` members set on it (they
/// replace members of the same name, as `Map::insert` does) and `prev` and `hash` left out,
/// linked to `prev`: what `record_hash` gives for that record. `None` when `json` is not a
/// JSON object.
pub(super) fn record_hash(
    prev: &Digest32,
    json: &[u8],
    extra: Vec<(Cow<'_, str>, Node<'_>)>,
    scratch: &mut Vec<u8>,
) -> Option<Digest32> {
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let node = Node::deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    let Node::Object(mut members) = node else {
        return None;
    };
    members.retain(|(key, _)| key != "prev" && key != "hash");
    members.extend(extra);
    scratch.clear();
    write_object(members, scratch);
    let mut hasher = Sha256::new();
    hasher.update(prev);
    hasher.update(&scratch[..]);
    Some(hasher.finalize().into())
}

/// The chain members a linked record's hash covers beside its own: `seq`, and `replaces`
/// when it replaces earlier versions (as `serde_json` writes [`Replaced`]).
pub(super) fn chain_members(seq: u64, replaces: &[Replaced]) -> Vec<(Cow<'static, str>, Node<'_>)> {
    let mut members = vec![(Cow::Borrowed("seq"), Node::Number(seq.into()))];
    if !replaces.is_empty() {
        let versions = replaces
            .iter()
            .map(|version| {
                Node::Object(vec![
                    (Cow::Borrowed("seq"), Node::Number(version.seq.into())),
                    (
                        Cow::Borrowed("hash"),
                        Node::String(Cow::Borrowed(&version.hash)),
                    ),
                ])
            })
            .collect();
        members.push((Cow::Borrowed("replaces"), Node::Array(versions)));
    }
    members
}

/// Writes `node`'s canonical bytes to `out`.
fn write(node: Node<'_>, out: &mut Vec<u8>) {
    match node {
        Node::Object(members) => write_object(members, out),
        Node::Array(items) => {
            out.push(b'[');
            for (i, item) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Node::String(text) => write_string(&text, out),
        Node::Number(number) => {
            // Writing a number into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, &number);
        }
        Node::Bool(true) => out.extend_from_slice(b"true"),
        Node::Bool(false) => out.extend_from_slice(b"false"),
        Node::Null => out.extend_from_slice(b"null"),
    }
}

/// An object's members sorted by key, the last of each key kept (a `Value`'s map keeps the
/// last value a key is given).
fn write_object(mut members: Vec<(Cow<'_, str>, Node<'_>)>, out: &mut Vec<u8>) {
    // Stable: members of one key stay in text order, so the last one is the one kept.
    members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    let mut members = members.into_iter().peekable();
    let mut first = true;
    while let Some((key, value)) = members.next() {
        if members.peek().is_some_and(|(next, _)| *next == key) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        write_string(&key, out);
        out.push(b':');
        write(value, out);
    }
    out.push(b'}');
}

fn write_string(text: &str, out: &mut Vec<u8>) {
    let plain = text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\');
    if plain {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
    }
}

impl<'de> Deserialize<'de> for Node<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Node::Bool(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // As `Value` does: a float JSON can hold (never NaN or infinite from a parser).
        Ok(Number::from_f64(v).map_or(Node::Null, Node::Number))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Node::String(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Node::String(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Node::String(Cow::Owned(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some((key, value)) = map.next_entry::<Key<'de>, Node<'de>>()? {
            members.push((key.0, value));
        }
        Ok(Node::Object(members))
    }
}

/// An object's key, borrowed where it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::chain::link::hash_by_value;

    /// What `Linker::link` hashes by way of a `Value`: `text` with `seq` (and `replaces`) set.
    fn by_value(text: &str, seq: u64, replaces: &[Replaced]) -> Digest32 {
        hash_by_value(&[7; 32], text.as_bytes(), seq, replaces).unwrap()
    }

    fn by_text(text: &str, seq: u64, replaces: &[Replaced]) -> Option<Digest32> {
        let extra = chain_members(seq, replaces);
        record_hash(&[7; 32], text.as_bytes(), extra, &mut Vec::new())
    }

    #[test]
    fn hand_picked_records_hash_as_their_values_do() {
        let replaces = [Replaced {
            seq: 3,
            hash: "ab".repeat(32),
        }];
        let texts = [
            r#"{}"#,
            r#"{"id":"x","status":"success","arguments":{"b":[1,2.5,-3,null,true],"a":"\n\"\\"}}"#,
            // Whitespace, escapes a canonical form writes literally, a surrogate pair.
            "{ \"b\" : \"\\u00e9\\u0041\\/\" ,\n \"a\":\"\\ud83d\\ude00 \\u001f\\t\" }",
            // Duplicate keys (the last wins), chain fields to leave out or replace.
            r#"{"k":1,"k":2,"prev":"00","hash":"ff","seq":99,"z":{"d":1,"d":[{"x":1,"x":0}]}}"#,
            // Numbers: exponents, big integers, negative zero, floats near the edges.
            r#"{"n":[1e3,-0,0.1,1.0E-7,18446744073709551615,18446744073709551616,-9223372036854775808,123456789012345678901234567890,5e-324,1.7976931348623157e308]}"#,
            // Keys that sort by bytes, not by characters.
            r#"{"é":1,"z":2,"Z":3,"":4,"a\u0000b":5,"😀":6}"#,
        ];
        for text in texts {
            for replaced in [&[][..], &replaces[..]] {
                assert_eq!(
                    by_text(text, 5, replaced),
                    Some(by_value(text, 5, replaced)),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn what_is_not_an_object_is_left_to_the_value_path() {
        for text in ["[1]", "\"x\"", "{", "{} {}", "", "nul"] {
            assert_eq!(by_text(text, 1, &[]), None, "{text}");
        }
    }

    /// A small deterministic generator (no dependency for one test).
    struct Gen(u64);

    impl Gen {
        fn next(&mut self, below: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % below
        }

        /// A JSON string as text, each character written one of the ways JSON allows.
        fn string(&mut self) -> String {
            const CHARS: &[char] = &['a', 'Z', '"', '\\', '/', '\n', '\u{1}', 'é', '😀', ' ', 'ÿ'];
            let mut out = String::from("\"");
            for _ in 0..self.next(6) {
                let c = CHARS[self.next(CHARS.len() as u64) as usize];
                let escaped = self.next(3) == 0;
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str(if escaped { "\\u000a" } else { "\\n" }),
                    '\u{1}' => out.push_str("\\u0001"),
                    '😀' if escaped => out.push_str("\\ud83d\\ude00"),
                    '/' if escaped => out.push_str("\\/"),
                    c if escaped && (c as u32) < 0x10000 => {
                        out.push_str(&format!("\\u{:04x}", c as u32));
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }

        fn number(&mut self) -> String {
            const NUMBERS: &[&str] = &["0", "-0", "7", "-12", "3.25", "1e2", "-2.5E-3", "1e400"];
            let n = NUMBERS[self.next(NUMBERS.len() as u64) as usize];
            if n == "1e400" {
                // Out of f64's range: not JSON a parser takes; a huge integer instead.
                "99999999999999999999999".to_owned()
            } else {
                n.to_owned()
            }
        }

        fn value(&mut self, depth: u32) -> String {
            let space = if self.next(4) == 0 { " \n" } else { "" };
            match self.next(if depth > 3 { 4 } else { 6 }) {
                0 => self.string(),
                1 => self.number(),
                2 => ["true", "false", "null"][self.next(3) as usize].to_owned(),
                3 => {
                    let keys = [
                        "\"a\"",
                        "\"b\"",
                        "\"prev\"",
                        "\"hash\"",
                        "\"seq\"",
                        "\"\\u0061\"",
                    ];
                    let key = keys[self.next(keys.len() as u64) as usize];
                    format!("{{{space}{key}{space}:{space}{}}}", self.number())
                }
                4 => {
                    let items: Vec<String> =
                        (0..self.next(4)).map(|_| self.value(depth + 1)).collect();
                    format!("[{space}{}{space}]", items.join(&format!(",{space}")))
                }
                _ => self.object(depth + 1),
            }
        }

        fn object(&mut self, depth: u32) -> String {
            let members: Vec<String> = (0..self.next(6))
                .map(|_| {
                    let key = if self.next(3) == 0 {
                        ["\"seq\"", "\"prev\"", "\"hash\"", "\"replaces\"", "\"id\""]
                            [self.next(5) as usize]
                            .to_owned()
                    } else {
                        self.string()
                    };
                    format!("{key}:{}", self.value(depth))
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
    }

    #[test]
    fn generated_records_hash_as_their_values_do() {
        let mut generator = Gen(0x5eed);
        let replaces = [
            Replaced {
                seq: 1,
                hash: "0".repeat(64),
            },
            Replaced {
                seq: 9,
                hash: "f".repeat(64),
            },
        ];
        for round in 0..3000 {
            let text = generator.object(0);
            let replaced = if round % 4 == 0 { &replaces[..] } else { &[] };
            let seq = generator.next(1 << 40);
            assert_eq!(
                by_text(&text, seq, replaced),
                Some(by_value(&text, seq, replaced)),
                "{text}"
            );
        }
        // The records the proxy writes, as it writes them.
        let record = json!({"id": "01M8NTRKAC70X4Y9BYZ9H1651H", "arguments": {"text": "hi\u{7f}"}});
        let text = serde_json::to_string(&record).unwrap();
        assert_eq!(by_text(&text, 2, &[]), Some(by_value(&text, 2, &[])));
    }
}
