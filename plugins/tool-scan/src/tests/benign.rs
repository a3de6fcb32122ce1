//! Tools that must come out clean: ordinary descriptions and schemas that only look
//! suspicious (reset e-mails, `ignore case`, hex hashes, emoji, Persian text, ...).

use super::*;

#[test]
fn read_file_is_clean() {
    let schema = r#"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
        "properties":{"path":{"type":"string","description":"Path of the file to read"}},
        "required":["path"],"additionalProperties":false}"#;
    let found = scan_all(
        &[tool(
            "read_file",
            "Read the complete contents of a file from the file system.",
            schema,
        )],
        &["github:create_issue", "slack:post_message"],
    );
    assert_eq!(found, vec![]);
}

#[test]
fn ordinary_tools_are_clean() {
    let tools = [
        tool(
            "list_directory",
            "Get a detailed listing of all files and directories in a specified path. Only works within allowed directories.",
            OBJECT,
        ),
        tool(
            "fetch",
            "Fetches a URL from the internet and optionally extracts its contents as markdown.",
            OBJECT,
        ),
        tool(
            "git_commit",
            "Records changes to the repository. Returns the new commit's 64-char SHA, e.g. 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.",
            OBJECT,
        ),
        tool(
            "send_reset",
            "Send a password reset email to the user.",
            OBJECT,
        ),
        tool(
            "secure_call",
            "Never include your API key in the query string. Authenticate with an access token.",
            OBJECT,
        ),
        tool(
            "env_info",
            "Reports whether process.env.NODE_ENV is set; the personal access token is read from the GITHUB_TOKEN environment variable.",
            OBJECT,
        ),
        tool(
            "grep",
            "Ignore case when matching. Set ignore_previous to ignore previous results.",
            OBJECT,
        ),
        tool("ls", "Do not show hidden files unless all=true.", OBJECT),
        tool(
            "run_command",
            "Executes a shell command without asking for confirmation.",
            OBJECT,
        ),
        tool(
            "emoji",
            "Adds a \u{1F9D1}\u{200D}\u{1F4BB} or \u{2764}\u{FE0F} reaction.",
            OBJECT,
        ),
        tool(
            "farsi",
            "\u{FEFF}Translate to Persian: \u{0645}\u{06CC}\u{200C}\u{062E}\u{0648}\u{0627}\u{0647}\u{0645}",
            OBJECT,
        ),
        tool(
            "wallet",
            "Ethereum address, e.g. 0x52908400098527886E0F7030069857D2E4169EE7.",
            OBJECT,
        ),
        tool(
            "ask_llm",
            "Sends a prompt to a model. The system prompt for the model is optional.",
            OBJECT,
        ),
        tool(
            "create_component",
            "Creates getUserProfileByIdentifierV2AndIncludeMetadata and a src/components/Foo/Bar/Baz/Qux/Quux/file.tsx path.",
            OBJECT,
        ),
        tool(
            "markdown",
            "Renders a table:\n\n----------------------------------------\n| a < b and c > d |",
            OBJECT,
        ),
    ];
    let schema = r#"{"type":"object","properties":{
        "to":{"type":"string","description":"Recipient, e.g. alice@example.com"},
        "api_key":{"type":"string","description":"Your API key, from the dashboard of https://example.com"},
        "password":{"type":"string","title":"Password","description":"Password to open the encrypted PDF file"},
        "mode":{"type":"string","enum":["fast","careful"],"default":"fast"}}}"#;
    let mut all = tools.to_vec();
    all.push(tool("send_mail", "Sends an e-mail.", schema));
    let found = scan_all(&all, &["other:list_directory_tree", "mail:send", "x:ls"]);
    assert_eq!(found, vec![]);
}
