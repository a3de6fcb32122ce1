//! `code-runtime`: the JavaScript engine behind mcpproxy's `code_execution` tool, a
//! WebAssembly component of the `code-runtime` world (package `mcpproxy:code`, `wit/code/`,
//! internal to mcpproxy). The proxy runs one script per fresh instance; the script's only way
//! out is the `host` import
//! (`call_tool` through the proxy's policy, and `console.log`).
//!
//! The engine is Boa (pure Rust: it builds for wasm32-wasip2 with the Rust toolchain alone).
//! This file registers the two host functions and runs [`PRELUDE`], which defines the
//! script's globals, runs the script as a function body and reports its outcome as JSON.

use boa_engine::native_function::NativeFunction;
use boa_engine::property::Attribute;
use boa_engine::{Context, JsArgs, JsResult, JsString, JsValue, Source, js_string};

wit_bindgen::generate!({
    path: "../../wit/code",
    world: "code-runtime",
});

use exports::mcpproxy::code::runner;
use mcpproxy::code::host;

/// Defines `call_tool`, `console` and `input`, runs the script (`new Function(code)`, so a
/// syntax error is reported like a throw) and returns `{"ok":true,"value":...}` or
/// `{"ok":false,"error":"..."}` as JSON text.
const PRELUDE: &str = include_str!("prelude.js");

struct Runtime;

impl runner::Guest for Runtime {
    fn run(code: String, input: String) -> Result<String, String> {
        let mut context = Context::default();
        setup(&mut context, code, input)
            .map_err(|e| format!("the runtime could not start the script: {e}"))?;
        let outcome = context
            .eval(Source::from_bytes(PRELUDE))
            .map_err(|e| format!("uncaught: {e}"))?;
        let text = outcome
            .as_string()
            .map(|s| s.to_std_string_escaped())
            .ok_or_else(|| "the runtime's prelude returned no outcome".to_string())?;
        let mut outcome: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("the script's outcome is not JSON: {e}"))?;
        match outcome.get("ok").and_then(serde_json::Value::as_bool) {
            Some(true) => Ok(outcome
                .get_mut("value")
                .map(serde_json::Value::take)
                .unwrap_or_default()
                .to_string()),
            _ => Err(outcome
                .get("error")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("the script failed")
                .to_string()),
        }
    }
}

fn setup(context: &mut Context, code: String, input: String) -> JsResult<()> {
    context.register_global_builtin_callable(
        js_string!("__mcpproxy_call_tool"),
        2,
        NativeFunction::from_fn_ptr(call_tool),
    )?;
    context.register_global_builtin_callable(
        js_string!("__mcpproxy_console_log"),
        1,
        NativeFunction::from_fn_ptr(console_log),
    )?;
    context.register_global_property(
        js_string!("__mcpproxy_code"),
        JsString::from(code.as_str()),
        Attribute::all(),
    )?;
    context.register_global_property(
        js_string!("__mcpproxy_input"),
        JsString::from(input.as_str()),
        Attribute::all(),
    )?;
    Ok(())
}

fn text_arg(args: &[JsValue], index: usize, context: &mut Context) -> JsResult<String> {
    Ok(args
        .get_or_undefined(index)
        .to_string(context)?
        .to_std_string_escaped())
}

/// `__mcpproxy_call_tool(name, argsJson)`: the envelope `call_tool` returns, as JSON text.
fn call_tool(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let name = text_arg(args, 0, context)?;
    let arguments = text_arg(args, 1, context)?;
    let envelope = match host::call_tool(&name, &arguments) {
        Ok(result) => match serde_json::from_str::<serde_json::Value>(&result) {
            Ok(result) => serde_json::json!({ "ok": true, "result": result }),
            Err(e) => serde_json::json!({
                "ok": false,
                "error": format!("the proxy returned a result that is not JSON: {e}"),
            }),
        },
        Err(error) => serde_json::json!({ "ok": false, "error": error }),
    };
    Ok(JsString::from(envelope.to_string().as_str()).into())
}

/// `__mcpproxy_console_log(line)`.
fn console_log(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let line = text_arg(args, 0, context)?;
    host::console_log(&line);
    Ok(JsValue::undefined())
}

/// The component's exports: wit-bindgen's glue from the canonical ABI to [`Runtime`].
#[allow(
    unsafe_code,
    reason = "the glue `export!` expands to is unsafe by nature (it reads the guest's memory as \
              the canonical ABI lays it out); the code of this crate has none"
)]
mod component_exports {
    use super::Runtime;

    crate::export!(Runtime with_types_in crate);
}
