//! The skills extension (SEP-2640) of the `sep-2640-skills-*` scenarios: one skill,
//! `greeting-helper`, whose files are resources under `skill://greeting-helper/`
//! (its `SKILL.md` manifest and `templates/hello.txt`), listed by `skills/list`,
//! returned by `skills/get`, and browsable with `resources/directory/read`.

use rmcp::{
    ErrorData as McpError,
    model::{
        DIRECTORY_MIME_TYPE, Resource, ResourceContents, Skill, SkillFrontmatter, SkillResource,
        SkillResources,
    },
};
use serde_json::json;

pub const NAME: &str = "greeting-helper";
const DESCRIPTION: &str = "Writes short, friendly greetings";
const ROOT: &str = "skill://greeting-helper";
const MANIFEST: &str = "skill://greeting-helper/SKILL.md";
const TEMPLATES: &str = "skill://greeting-helper/templates";
const HELLO: &str = "skill://greeting-helper/templates/hello.txt";
const HELLO_TEXT: &str = "Hello, {name}! Nice to meet you.\n";

fn manifest_text() -> String {
    format!(
        "---\nname: {NAME}\ndescription: {DESCRIPTION}\n---\n\n# Greeting helper\n\n\
         Greet people with the template in `templates/hello.txt`, filling in their name.\n"
    )
}

/// The skill, with the digest and size of each of its files.
pub fn skill() -> Skill {
    Skill::new(
        MANIFEST,
        SkillFrontmatter::new(NAME, DESCRIPTION),
        SkillResources::Files(vec![
            SkillResource::from_bytes(MANIFEST, manifest_text().as_bytes()),
            SkillResource::from_bytes(HELLO, HELLO_TEXT.as_bytes()),
        ]),
    )
}

fn manifest_resource() -> Resource {
    Resource::new(MANIFEST, NAME)
        .with_description(DESCRIPTION)
        .with_mime_type("text/markdown")
}

fn hello_resource() -> Resource {
    Resource::new(HELLO, "hello.txt")
        .with_description("The greeting template of greeting-helper")
        .with_mime_type("text/plain")
}

fn directory(uri: &str, name: &str) -> Resource {
    Resource::new(uri, name).with_mime_type(DIRECTORY_MIME_TYPE)
}

/// The skill's files, for `resources/list`.
pub fn resources() -> Vec<Resource> {
    vec![manifest_resource(), hello_resource()]
}

/// The contents of a skill file, or `None` when `uri` is not one.
pub fn read(uri: &str) -> Option<ResourceContents> {
    match uri {
        MANIFEST => {
            Some(ResourceContents::text(manifest_text(), uri).with_mime_type("text/markdown"))
        }
        HELLO => Some(ResourceContents::text(HELLO_TEXT, uri).with_mime_type("text/plain")),
        _ => None,
    }
}

fn not_served(uri: &str, what: &str) -> McpError {
    McpError::invalid_params(format!("{uri} is not {what}"), Some(json!({ "uri": uri })))
}

/// `skills/get`: the skill whose manifest is `uri`.
pub fn get(uri: &str) -> Result<Skill, McpError> {
    if uri == MANIFEST {
        Ok(skill())
    } else {
        Err(not_served(uri, "a skill this server serves"))
    }
}

/// `resources/directory/read`: the direct children of a directory of the skill.
pub fn children(uri: &str) -> Result<Vec<Resource>, McpError> {
    match uri.trim_end_matches('/') {
        ROOT => Ok(vec![manifest_resource(), directory(TEMPLATES, "templates")]),
        TEMPLATES => Ok(vec![hello_resource()]),
        _ => Err(not_served(uri, "a directory")),
    }
}
