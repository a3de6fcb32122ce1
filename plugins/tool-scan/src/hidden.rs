//! `hidden-instructions`: instruction tags (`<IMPORTANT>`, `</system>`), chat-template tokens
//! (`<|im_start|>`, `[INST]`), HTML comments, and phrases that tell the model to drop its
//! instructions, keep things from the user, read or send something first, or that speak to
//! the model.

use std::sync::OnceLock;

use super::collect::{Collector, Location};
use super::evidence::clip;
use super::finding::{HIDDEN_INSTRUCTIONS, Severity};
use super::pattern::{Norm, Rules, Tok, find_rules};

const OVERRIDE: &str = "tells the model to set aside its instructions";
const SECRECY: &str = "tells the model to keep something from the user";
const FIRST_STEP: &str = "tells the model to read or send something before using the tool";
const ADDRESS: &str = "speaks to the model directly";

/// (what it means, token pattern), tried in order at every token.
const PHRASES: &[(&str, &str)] = &[
    (
        OVERRIDE,
        "ignore|disregard|forget|override|bypass all|any|the|your|all+the|all+of+the|all+your|any+of+the \
         previous|prior|above|earlier|preceding|former|original|initial|existing|system|developer|safety|security \
         instructions|instruction|directions|directives|rules|guidelines|prompts|prompt|messages|context|guidance|constraints|policies|policy|restrictions|commands|guardrails",
    ),
    (
        OVERRIDE,
        "ignore|disregard|forget|override|bypass previous|prior|above|earlier|preceding|original|system|developer|safety|security \
         instructions|instruction|directions|directives|rules|guidelines|prompts|prompt|messages|context|guidance|constraints|policies|restrictions|guardrails",
    ),
    (
        OVERRIDE,
        "ignore|disregard|forget all|everything previous|prior|above|earlier|before|preceding",
    ),
    (
        OVERRIDE,
        "ignore|disregard|forget the|all+the|everything above|foregoing",
    ),
    (
        OVERRIDE,
        "ignore|disregard|forget|override|bypass your|the|all|any instructions|rules|guidelines|directives|programming|training|guardrails|system+prompt",
    ),
    (
        OVERRIDE,
        "disregard the|any|all? user|user's|users|human|human's|warnings|warning|permissions|consent",
    ),
    (
        OVERRIDE,
        "new|updated|revised|real|true|actual|secret|hidden|additional system? instructions|instruction|rules|directives|task|orders :",
    ),
    (
        SECRECY,
        "do+not|don't|dont|never|must+not|should+not|cannot|can't tell|inform|mention|reveal|disclose",
    ),
    (
        SECRECY,
        "do+not|don't|dont|never|must+not|should+not notify|alert|warn|show|ask|let|bother|remind|alarm the|your? user|users|human|anyone",
    ),
    (
        SECRECY,
        "without telling|informing|mentioning|revealing|disclosing",
    ),
    (
        SECRECY,
        "without notifying|alerting|asking|warning|letting|bothering|consulting the|your? user|users|human",
    ),
    (
        SECRECY,
        "without the|your? user|user's|users|users'|human|human's knowing|knowledge|noticing|awareness|seeing|realizing|realising",
    ),
    (
        SECRECY,
        "keep|hide this|it|that|these|them|everything? secret|hidden|confidential|private? from the|your? user|users|human",
    ),
    (
        SECRECY,
        "the|your? user|users|human must|should|shall|need|needs not|never know|see|notice|learn|find+out|be+told|be+informed|be+aware|suspect",
    ),
    (
        SECRECY,
        "the|your? user|users|human does+not|doesn't|doesnt|do+not|don't|never need|needs|has|have to? \
         know|see|notice|learn|be+told|be+informed|be+aware",
    ),
    (
        SECRECY,
        "silently|quietly|secretly|covertly read|send|include|upload|copy|forward|collect|gather|exfiltrate|access|open|cat|dump|attach|post|share|add|change|modify|replace|redirect|bcc|cc|email",
    ),
    (SECRECY, "secretly|covertly|surreptitiously"),
    (
        FIRST_STEP,
        "before|prior+to using|calling|invoking|running|executing|you+use|you+call|you+run|you+invoke|use+of \
         this|the|any|these tool|tools|function|functions ,? \
         you+must|you+need+to|you+should|you+have+to|please|always|first|make+sure+to|be+sure+to|it+is+required+to? first? \
         silently|quietly|secretly? \
         read|open|access|cat|send|include|upload|copy|pass|extract|collect|gather|dump|attach|forward|share|post",
    ),
    (
        FIRST_STEP,
        "before|prior+to any|all|every other? action|actions|step|steps|tool|tools|call|calls|request|requests|response|responses|answer|reply|task ,? \
         you+must|you+need+to|you+should|please|always|first? silently|quietly|secretly? \
         read|open|access|cat|send|include|upload|copy|pass|extract|collect|gather|dump|attach|forward|share|post",
    ),
    (
        FIRST_STEP,
        "you must|need+to|have+to|should first \
         read|open|access|cat|send|include|upload|copy|pass|extract|collect|gather|dump|attach|forward|share",
    ),
    (
        FIRST_STEP,
        "first ,? you must|need+to|have+to|should \
         read|open|access|cat|send|include|upload|copy|pass|extract|collect|gather|dump|attach|forward|share",
    ),
    (
        ADDRESS,
        "as an|a ai|llm|language+model|ai+model|ai+assistant|large+language+model|ai+agent",
    ),
    (ADDRESS, "assistant :"),
    (
        ADDRESS,
        "note|reminder|memo|directive|directives to|for the|this? ai|assistant|model|llm|agent|claude|chatgpt|gpt|copilot",
    ),
    (
        ADDRESS,
        "instructions|instruction to|for the|this? ai|assistant|llm|agent|claude|chatgpt|copilot :",
    ),
    (
        ADDRESS,
        "hey|dear|hello|hi ai|assistant|llm|claude|chatgpt|gpt|copilot|agent|model",
    ),
    (
        ADDRESS,
        "attention|attn :|, ai|assistant|llm|claude|chatgpt|gpt|copilot|agent|model",
    ),
    (
        ADDRESS,
        "attention|attn ai|assistant|llm|claude|chatgpt|gpt|copilot|agent",
    ),
    (
        ADDRESS,
        "you are a|an ai|llm|assistant|language+model|helpful|large+language+model|ai+assistant|chatbot",
    ),
    (
        ADDRESS,
        "this is a|an system|developer|priority|urgent|important|admin|administrator|official \
         message|instruction|instructions|notice|prompt|directive|override|update",
    ),
    (
        ADDRESS,
        "system|developer|admin|administrator override|directive",
    ),
];

fn phrase_rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| Rules::new(PHRASES.iter().map(|(_, p)| p)))
}

pub(crate) fn hidden_phrases(
    c: &mut Collector,
    location: &Location,
    norm: &Norm<'_>,
    toks: &[Tok],
) {
    for (rule, first, end) in find_rules(phrase_rules(), toks, &norm.text) {
        let (a, b) = (toks[first].a, toks[end - 1].b);
        let what = PHRASES[rule].0;
        c.add(
            HIDDEN_INSTRUCTIONS,
            Severity::Danger,
            norm.text[a..b].to_string(),
            || format!("{} {what}: {}.", location.subject(), norm.quote(a, b)),
        );
    }
}

/// Tag names that wrap instructions (`<IMPORTANT>`, `</system>`, `<tool_instructions>`).
fn is_instruction_tag(name: &str) -> bool {
    matches!(
        name,
        "important"
            | "system"
            | "system-prompt"
            | "system_prompt"
            | "systemprompt"
            | "hidden"
            | "critical"
            | "override"
            | "assistant"
    ) || name.ends_with("instructions")
        || name.ends_with("instruction")
}

/// Instruction tags, chat-template tokens and HTML comments, on the normalised text.
pub(crate) fn hidden_tags(c: &mut Collector, location: &Location, norm: &Norm<'_>) {
    let text = norm.text.as_str();
    let t = text.as_bytes();
    let skip_spaces = |mut j: usize| {
        while t.get(j) == Some(&b' ') {
            j += 1;
        }
        j
    };
    for (i, _) in text.match_indices('<') {
        // <!-- comment -->
        if text[i..].starts_with("<!--") {
            c.add(HIDDEN_INSTRUCTIONS, Severity::Danger, "<!--".to_string(), || {
                format!(
                    "{} contains an HTML comment, which a rendered view hides from the reviewer \
                     while the model still reads it: {}.",
                    location.subject(),
                    norm.quote(i, i + 4)
                )
            });
            continue;
        }
        // <|im_start|> and friends
        if t.get(i + 1) == Some(&b'|') {
            let name_end = (i + 2..t.len())
                .find(|&j| !(t[j].is_ascii_alphanumeric() || t[j] == b'_'))
                .unwrap_or(t.len());
            if name_end > i + 2 && text[name_end..].starts_with("|>") {
                let token = &text[i..name_end + 2];
                chat_token(c, location, norm, token, i, name_end + 2);
            }
            continue;
        }
        // <IMPORTANT>, </ system >, <instructions priority="high">
        let mut j = skip_spaces(i + 1);
        if t.get(j) == Some(&b'/') {
            j = skip_spaces(j + 1);
        }
        let name_start = j;
        while t
            .get(j)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
        {
            j += 1;
        }
        let name = &text[name_start..j];
        if name.is_empty() || !is_instruction_tag(name) {
            continue;
        }
        let close = match t.get(j) {
            Some(b'>') => Some(j + 1),
            Some(b'/') if t.get(j + 1) == Some(&b'>') => Some(j + 2),
            Some(b' ') => text[j..]
                .char_indices()
                .take(120)
                .find(|&(_, ch)| ch == '>' || ch == '<')
                .filter(|&(_, ch)| ch == '>')
                .map(|(k, _)| j + k + 1),
            _ => None,
        };
        let Some(close) = close else { continue };
        c.add(
            HIDDEN_INSTRUCTIONS,
            Severity::Danger,
            format!("<{name}>"),
            || {
                format!(
                    "{} contains the tag <{}>, a common wrapper for instructions aimed at \
                     the model rather than the user: {}.",
                    location.subject(),
                    name.to_ascii_uppercase(),
                    norm.quote(i, close)
                )
            },
        );
    }
    for token in ["[inst]", "[/inst]", "<<sys>>", "<</sys>>"] {
        if let Some(i) = text.find(token) {
            chat_token(
                c,
                location,
                norm,
                &token.replace('/', ""),
                i,
                i + token.len(),
            );
        }
    }
}

fn chat_token(
    c: &mut Collector,
    location: &Location,
    norm: &Norm<'_>,
    token: &str,
    a: usize,
    b: usize,
) {
    c.add(HIDDEN_INSTRUCTIONS, Severity::Danger, token.to_string(), || {
        format!(
            "{} contains the chat-template token '{}', which can pose as a system or user turn: {}.",
            location.subject(),
            clip(token, 30),
            norm.quote(a, b)
        )
    });
}
