//! `completion/complete`: suggestions for the arguments of
//! `test_prompt_with_arguments` and for the `{id}` of the resource template,
//! filtered by the prefix the client typed.

use rmcp::{
    ErrorData as McpError,
    model::{CompleteRequestParams, CompleteResult, CompletionInfo, Reference},
};

use crate::{prompts, resources};

/// The candidates for one argument, before filtering by prefix.
fn candidates(reference: &Reference, argument: &str) -> &'static [&'static str] {
    match (reference, argument) {
        (Reference::Prompt(prompt), "arg1") if prompt.name == prompts::WITH_ARGUMENTS => {
            &["paris", "park", "party", "test", "testValue1"]
        }
        (Reference::Prompt(prompt), "arg2") if prompt.name == prompts::WITH_ARGUMENTS => {
            &["testValue2", "world"]
        }
        (Reference::Resource(template), "id") if template.uri == resources::TEMPLATE => {
            &["1", "123", "42"]
        }
        _ => &[],
    }
}

/// The candidates starting with the typed value.
pub fn complete(request: &CompleteRequestParams) -> Result<CompleteResult, McpError> {
    let typed = request.argument.value.as_str();
    let values: Vec<String> = candidates(&request.r#ref, &request.argument.name)
        .iter()
        .filter(|value| value.starts_with(typed))
        .map(|value| (*value).to_owned())
        .collect();
    let info = CompletionInfo::with_all_values(values)
        .map_err(|error| McpError::internal_error(error, None))?;
    Ok(CompleteResult::new(info))
}
