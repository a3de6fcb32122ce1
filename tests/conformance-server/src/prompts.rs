//! The prompts of the `prompts-*` scenarios: a simple one, one with two
//! arguments substituted into its text, one embedding a resource whose URI is
//! an argument, and one carrying an image.

use rmcp::{
    ErrorData as McpError,
    model::{
        ContentBlock, GetPromptRequestParams, GetPromptResult, ImageContent, Prompt,
        PromptArgument, PromptMessage, Role,
    },
};
use serde_json::{Map, Value, json};

use crate::media;

pub const SIMPLE: &str = "test_simple_prompt";
pub const WITH_ARGUMENTS: &str = "test_prompt_with_arguments";
pub const WITH_EMBEDDED_RESOURCE: &str = "test_prompt_with_embedded_resource";
pub const WITH_IMAGE: &str = "test_prompt_with_image";

/// Every prompt, in a fixed order.
pub fn list() -> Vec<Prompt> {
    vec![
        Prompt::new(SIMPLE, Some("A simple prompt without arguments"), None),
        Prompt::new(
            WITH_ARGUMENTS,
            Some("A prompt that substitutes its two arguments"),
            Some(vec![
                PromptArgument::new("arg1")
                    .with_description("First test argument")
                    .with_required(true),
                PromptArgument::new("arg2")
                    .with_description("Second test argument")
                    .with_required(true),
            ]),
        ),
        Prompt::new(
            WITH_EMBEDDED_RESOURCE,
            Some("A prompt that embeds the resource named by its argument"),
            Some(vec![
                PromptArgument::new("resourceUri")
                    .with_description("URI of the resource to embed")
                    .with_required(true),
            ]),
        ),
        Prompt::new(WITH_IMAGE, Some("A prompt carrying an image"), None),
    ]
}

/// `prompts/get`: the messages of prompt `request.name`, or invalid params
/// for an unknown prompt or a missing required argument.
pub fn get(request: &GetPromptRequestParams) -> Result<GetPromptResult, McpError> {
    let empty = Map::new();
    let arguments = request.arguments.as_ref().unwrap_or(&empty);
    let messages = match request.name.as_str() {
        SIMPLE => vec![PromptMessage::new_text(
            Role::User,
            "This is a simple prompt for testing.",
        )],
        WITH_ARGUMENTS => {
            let arg1 = required(arguments, "arg1")?;
            let arg2 = required(arguments, "arg2")?;
            vec![PromptMessage::new_text(
                Role::User,
                format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"),
            )]
        }
        WITH_EMBEDDED_RESOURCE => {
            let uri = required(arguments, "resourceUri")?;
            vec![
                PromptMessage::new_resource(
                    Role::User,
                    uri.to_owned(),
                    Some("text/plain".to_owned()),
                    Some("Embedded resource content for testing.".to_owned()),
                    None,
                    None,
                    None,
                ),
                PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
            ]
        }
        WITH_IMAGE => vec![
            PromptMessage::new(
                Role::User,
                ContentBlock::Image(ImageContent::new(media::PNG_BASE64, media::PNG_MIME)),
            ),
            PromptMessage::new_text(Role::User, "Please analyze the image above."),
        ],
        other => {
            return Err(McpError::invalid_params(
                format!("unknown prompt: {other}"),
                Some(json!({ "name": other })),
            ));
        }
    };
    Ok(GetPromptResult::new(messages))
}

/// The string argument `name`, or invalid params naming it.
fn required<'a>(arguments: &'a Map<String, Value>, name: &str) -> Result<&'a str, McpError> {
    arguments.get(name).and_then(Value::as_str).ok_or_else(|| {
        McpError::invalid_params(
            format!("missing required string argument '{name}'"),
            Some(json!({ "argument": name })),
        )
    })
}
