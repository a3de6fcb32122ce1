//! Random inputs for the property tests of several crates (proptest strategies): JSON
//! values and strings biased toward what breaks parsers. Included with `#[path]` by each
//! crate's `tests/properties.rs`.

use proptest::prelude::*;
use serde_json::Value;

/// Any JSON value, nested a few levels, with strings that include control, invisible and
/// non-ASCII characters.
pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Strings biased toward what breaks parsers: separators, controls, bidi and zero-width
/// characters, and plain words.
pub(crate) fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{0,12}(:[a-z_]{0,12}){0,2}",
        "\\PC{0,40}",
        prop::collection::vec(
            prop_oneof![
                Just('\r'),
                Just('\n'),
                Just('\u{1b}'),
                Just('\u{202e}'),
                Just('\u{200b}'),
                Just(':'),
                Just('"'),
                any::<char>()
            ],
            0..24
        )
        .prop_map(|cs| cs.into_iter().collect()),
    ]
}
