(() => {
  const callTool = globalThis.__mcpproxy_call_tool;
  const consoleLog = globalThis.__mcpproxy_console_log;
  const code = globalThis.__mcpproxy_code;
  const inputText = globalThis.__mcpproxy_input;
  delete globalThis.__mcpproxy_call_tool;
  delete globalThis.__mcpproxy_console_log;
  delete globalThis.__mcpproxy_code;
  delete globalThis.__mcpproxy_input;

  const show = (value) => {
    if (typeof value === "string") return value;
    try {
      const text = JSON.stringify(value);
      return text === undefined ? String(value) : text;
    } catch (_) {
      return String(value);
    }
  };
  const describe = (error) =>
    error instanceof Error ? `${error.name}: ${error.message}` : `thrown: ${show(error)}`;

  globalThis.call_tool = function call_tool(name, args) {
    if (typeof name !== "string") {
      throw new TypeError('call_tool(name, args): name must be a "server:tool" string');
    }
    const text = JSON.stringify(args === undefined ? {} : args);
    if (text === undefined || text[0] !== "{") {
      throw new TypeError("call_tool(name, args): args must be an object");
    }
    return JSON.parse(callTool(name, text));
  };
  const log = (...values) => consoleLog(values.map(show).join(" "));
  globalThis.console = { log, info: log, warn: log, error: log, debug: log };
  globalThis.input = JSON.parse(inputText);

  let value;
  try {
    value = new Function(code)();
  } catch (error) {
    return JSON.stringify({ ok: false, error: describe(error) });
  }
  try {
    const text = JSON.stringify(value === undefined ? null : value);
    return `{"ok":true,"value":${text === undefined ? "null" : text}}`;
  } catch (error) {
    return JSON.stringify({
      ok: false,
      error: `the return value is not JSON-serialisable: ${describe(error)}`,
    });
  }
})()
