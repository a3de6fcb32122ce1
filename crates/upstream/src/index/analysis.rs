//! Text analysis shared by indexing and querying: identifier splitting
//! (`snake_case`, `camelCase`, `kebab-case`), lowercasing, stop words and
//! English stemming, plus the "exact" analyzer that keeps a whole name as
//! one lowercased term.

use tantivy::tokenizer::{
    Language, LowerCaser, RawTokenizer, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer,
    Token, TokenStream, Tokenizer,
};

/// Analyzer for tool names, server names and parameter names.
pub(super) const IDENT: &str = "mcp_ident";
/// Analyzer for descriptions: like [`IDENT`] plus English stop words.
pub(super) const PROSE: &str = "mcp_prose";
/// Analyzer keeping the whole (lowercased) value as one term.
pub(super) const EXACT: &str = "mcp_exact";

/// Tokens longer than this (in bytes) are dropped; nobody searches for them.
const MAX_WORD_BYTES: usize = 64;
/// Whole names longer than this are not indexed as exact terms.
const MAX_EXACT_BYTES: usize = 256;

/// Lucene's English stop words (the list tantivy ships behind a feature flag).
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

pub(super) fn ident_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(IdentTokenizer)
        .filter(RemoveLongFilter::limit(MAX_WORD_BYTES))
        .filter(LowerCaser)
        .filter(Stemmer::new(Language::English))
        .build()
}

pub(super) fn prose_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(IdentTokenizer)
        .filter(RemoveLongFilter::limit(MAX_WORD_BYTES))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            STOP_WORDS.iter().map(|w| (*w).to_owned()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

pub(super) fn exact_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(RawTokenizer::default())
        .filter(RemoveLongFilter::limit(MAX_EXACT_BYTES))
        .filter(LowerCaser)
        .build()
}

/// Runs `analyzer` over `text`, appending each term not already in `out`
/// until `out` holds `cap` terms.
pub(super) fn terms_into(
    analyzer: &mut TextAnalyzer,
    text: &str,
    out: &mut Vec<String>,
    cap: usize,
) {
    let mut stream = analyzer.token_stream(text);
    while out.len() < cap && stream.advance() {
        let term = &stream.token().text;
        if !term.is_empty() && !out.iter().any(|t| t == term) {
            out.push(term.clone());
        }
    }
}

/// Splits text into words (maximal alphanumeric runs), so `_`, `-`, `.`,
/// `:` and whitespace all separate words. A word with internal case changes
/// (`deleteRepo`, `HTTPServer`, `GitHub`) is emitted whole *and* as its
/// parts, so `github` and `git hub` both find `GitHub`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct IdentTokenizer;

pub(super) struct IdentTokenStream {
    pending: std::vec::IntoIter<Token>,
    current: Token,
}

impl Tokenizer for IdentTokenizer {
    type TokenStream<'a> = IdentTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> IdentTokenStream {
        IdentTokenStream {
            pending: split_ident(text).into_iter(),
            current: Token::default(),
        }
    }
}

impl TokenStream for IdentTokenStream {
    fn advance(&mut self) -> bool {
        match self.pending.next() {
            Some(token) => {
                self.current = token;
                true
            }
            None => false,
        }
    }

    fn token(&self) -> &Token {
        &self.current
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.current
    }
}

fn split_ident(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut push = |from: usize, to: usize| {
        tokens.push(Token {
            offset_from: from,
            offset_to: to,
            position: tokens.len(),
            text: text[from..to].to_owned(),
            position_length: 1,
        });
    };
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if !c.is_alphanumeric() {
            chars.next();
            continue;
        }
        // Collect one word, remembering camel-case boundaries.
        let mut bounds = vec![start];
        let mut prev: Option<char> = None;
        let mut end = start;
        while let Some(&(i, c)) = chars.peek() {
            if !c.is_alphanumeric() {
                break;
            }
            chars.next();
            if let Some(p) = prev {
                let next_lower = chars.peek().is_some_and(|&(_, n)| n.is_lowercase());
                let lower_to_upper = (p.is_lowercase() || p.is_numeric()) && c.is_uppercase();
                let acronym_end = p.is_uppercase() && c.is_uppercase() && next_lower;
                if lower_to_upper || acronym_end {
                    bounds.push(i);
                }
            }
            prev = Some(c);
            end = i + c.len_utf8();
        }
        push(start, end);
        if bounds.len() > 1 {
            bounds.push(end);
            for pair in bounds.windows(2) {
                push(pair[0], pair[1]);
            }
        }
    }
    tokens
}
