//! [`CompactJson`]: a JSON value kept as its compact text, shared between its copies.
//!
//! A tool's schemas are kept for every listed tool (in the policy's tool, in its pin, in
//! what a lazy server's listing is rebuilt from) but read rarely: a plugin receives them as
//! text, a search hit passes them on, a pin fingerprints them when a listing is vetted. As
//! `serde_json::Value`s every object is a B-tree whose smallest node holds eleven entries
//! (632 bytes), so a three-parameter schema of 280 bytes of JSON took about 2.5 KB, once
//! per copy: 10,000 tools held three such copies (docs/benchmarks.md). Kept as text behind
//! an `Arc`, a schema costs its length once, and a copy is a reference count.
//!
//! The text is always `serde_json`'s compact form of a [`Value`] (objects' keys sorted,
//! no spaces), however it arrived: two `CompactJson`s are equal exactly when the values
//! are.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A JSON value as its compact text (keys sorted), shared: cloning it counts a reference.
#[derive(Clone)]
pub struct CompactJson(Arc<RawValue>);

impl CompactJson {
    /// The value's compact text.
    pub fn new(value: &Value) -> Self {
        Self::serialized(value)
    }

    /// An object's compact text (an MCP tool's `inputSchema` as it arrives).
    pub fn from_object(object: &Map<String, Value>) -> Self {
        Self::serialized(object)
    }

    /// `null`.
    pub fn null() -> Self {
        Self(Arc::from(RawValue::NULL.to_owned()))
    }

    fn serialized<T: Serialize + ?Sized>(value: &T) -> Self {
        // Serialising a `Value` or a map with string keys cannot fail; `null` stands in
        // should a future serde_json find a way.
        serde_json::value::to_raw_value(value)
            .map_or_else(|_| Self::null(), |raw| Self(Arc::from(raw)))
    }

    /// The compact text, valid JSON.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The value, parsed from the text: for the few readers that walk it.
    pub fn to_value(&self) -> Value {
        // The text was written by serde_json from a `Value`, so it parses back.
        serde_json::from_str(self.as_str()).unwrap_or(Value::Null)
    }

    /// Whether this is the JSON `null` (an absent schema read leniently).
    pub fn is_null(&self) -> bool {
        self.as_str() == "null"
    }

    /// Whether `self` and `other` share one text (a copy, not an equal value).
    pub fn shares_text_with(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for CompactJson {
    fn default() -> Self {
        Self::null()
    }
}

impl PartialEq for CompactJson {
    fn eq(&self, other: &Self) -> bool {
        // A copy (the usual comparison: a pin, a memo entry) needs no look at the text.
        self.shares_text_with(other) || self.as_str() == other.as_str()
    }
}

impl Eq for CompactJson {}

impl fmt::Debug for CompactJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for CompactJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Value> for CompactJson {
    fn from(value: Value) -> Self {
        Self::new(&value)
    }
}

impl From<&Value> for CompactJson {
    fn from(value: &Value) -> Self {
        Self::new(value)
    }
}

impl Serialize for CompactJson {
    /// Written as the JSON it holds (not as a string).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for CompactJson {
    /// Any JSON value, brought to the compact form (a pretty-printed file's spaces and its
    /// key order do not make two equal schemas differ).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|value| Self::new(&value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_text_is_the_compact_form_whatever_the_input_order_and_spacing() {
        let read: CompactJson =
            serde_json::from_str(r#"{ "type" : "object", "properties": {"b": {}, "a": {}} }"#)
                .unwrap();
        assert_eq!(
            read.as_str(),
            r#"{"properties":{"a":{},"b":{}},"type":"object"}"#
        );
        let made = CompactJson::from(json!({"properties": {"a": {}, "b": {}}, "type": "object"}));
        assert_eq!(read, made);
        assert!(!read.shares_text_with(&made));
        assert_ne!(read, CompactJson::from(json!({"type": "object"})));
    }

    #[test]
    fn it_serialises_as_json_and_round_trips_through_a_value() {
        let schema = CompactJson::from(json!({"type": "object", "required": ["x"]}));
        let wrapped = json!({"inputSchema": schema});
        assert_eq!(wrapped["inputSchema"]["required"][0], "x");
        assert_eq!(
            serde_json::to_string(&wrapped).unwrap(),
            r#"{"inputSchema":{"required":["x"],"type":"object"}}"#
        );
        assert_eq!(
            schema.to_value(),
            json!({"type": "object", "required": ["x"]})
        );
        let copy = schema.clone();
        assert!(copy.shares_text_with(&schema));
    }

    #[test]
    fn the_default_is_null() {
        assert!(CompactJson::default().is_null());
        assert_eq!(CompactJson::default().to_value(), Value::Null);
        assert_eq!(
            serde_json::to_string(&CompactJson::default()).unwrap(),
            "null"
        );
    }
}
