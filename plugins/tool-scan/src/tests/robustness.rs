//! Odd text never makes the scanner panic.

use super::*;

#[test]
fn never_panics_on_odd_text() {
    const PIECES: &[&str] = &[
        "<",
        ">",
        "/",
        "|",
        "<|",
        "|>",
        "<!--",
        "\\u",
        "\\u{",
        "}",
        "\\x4",
        "@",
        ".",
        "..",
        "http://",
        "https://x",
        "é",
        "ß",
        "İ",
        "\u{200D}",
        "\u{FE0F}",
        "\u{E0100}",
        "\u{E0041}",
        "\u{1F600}",
        "\u{202E}",
        "\u{FEFF}",
        "\u{0}",
        "\u{1b}",
        "\n",
        " ",
        "  ",
        "ignore",
        "previous",
        "instructions",
        "send",
        "api",
        "_",
        "key",
        "password",
        "important",
        "system",
        "AAAA",
        "zZ09+/",
        "mail:",
        "send_email",
        "~/.ssh",
        ".env",
        "'",
        "\u{2019}",
        "Ａ",
        "=",
        "-",
        "0x",
    ];
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    for round in 0..400 {
        let mut text = String::new();
        for _ in 0..(round % 60) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push_str(PIECES[(state % PIECES.len() as u64) as usize]);
        }
        let schema = serde_json::json!({"type": "object", "properties": {text.clone(): {"description": text.clone(), "enum": [text.clone()]}}}).to_string();
        scan_all(
            &[tool(&text, &text, &schema), tool("x", &text, &text)],
            &["mail:send_email", &text, ":", ""],
        );
        for i in 0..=text.len() {
            let _ = quote(&text, i, text.len());
        }
    }
}
