//! `tool-scanner`: a WebAssembly component of the `scanner-plugin` world. It reviews a
//! server's tools before a person approves them (a quarantined server, or tools changed since
//! approval) and reports hidden instructions, credential access, URLs, e-mail addresses,
//! encoded data, invisible Unicode and references to other servers' tools. The logic lives in
//! the `tool-scan` crate; this file only converts between the WIT types and the scanner's.

use tool_scan as scan;
use tool_scan::ToolText;

wit_bindgen::generate!({
    path: "../../wit",
    world: "scanner-plugin",
});

use exports::mcpproxy::plugin::metadata::{self, PluginInfo};
use exports::mcpproxy::plugin::scanner::{self, Finding, Severity};
use mcpproxy::plugin::host::{self, LogLevel};
use mcpproxy::plugin::types::Tool;

struct ToolScanner;

impl metadata::Guest for ToolScanner {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "tool-scanner".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            description: "Reviews a server's tools for hidden instructions, credential access \
                          and other red flags"
                .to_string(),
        }
    }
}

impl scanner::Guest for ToolScanner {
    fn scan(tools: Vec<Tool>, other_tools: Vec<String>) -> Vec<Finding> {
        let texts: Vec<ToolText<'_>> = tools
            .iter()
            .map(|tool| ToolText {
                name: &tool.name,
                description: &tool.description,
                input_schema: &tool.input_schema,
            })
            .collect();
        let others: Vec<&str> = other_tools.iter().map(String::as_str).collect();
        let findings = scan::run(&host::config(), &texts, &others);
        for finding in findings.iter().filter(|f| f.kind == scan::SCANNER_ERROR) {
            host::log(LogLevel::Warn, &finding.detail);
        }
        findings
            .into_iter()
            .map(|f| Finding {
                tool: f.tool,
                kind: f.kind.to_string(),
                severity: match f.severity {
                    scan::Severity::Info => Severity::Info,
                    scan::Severity::Warning => Severity::Warning,
                    scan::Severity::Danger => Severity::Danger,
                },
                detail: f.detail,
            })
            .collect()
    }
}

/// The component's exports: wit-bindgen's glue from the canonical ABI to [`ToolScanner`].
#[allow(
    unsafe_code,
    reason = "the glue `export!` expands to is unsafe by nature (it reads the guest's memory as \
              the canonical ABI lays it out); the code of this crate has none"
)]
mod component_exports {
    use super::ToolScanner;

    crate::export!(ToolScanner with_types_in crate);
}
