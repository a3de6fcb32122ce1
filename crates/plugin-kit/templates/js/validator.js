// {{name}}: an mcpproxy validator. Rejects calls to the tools its settings block:
// {"blocked_tools": ["server:tool", ...]}. An exception that escapes validate() rejects the
// call (the proxy fails closed).
import { config } from 'mcpproxy:plugin/host@0.1.1';

export const metadata = {
  info() {
    return {
      name: '{{name}}',
      version: '0.1.0',
      description: 'Rejects calls to the tools its settings block',
    };
  },
};

export const validator = {
  validate(request) {
    let settings;
    try {
      settings = JSON.parse(config());
    } catch (e) {
      return { tag: 'reject', val: `{{name}}: invalid settings: ${e.message}` };
    }
    const tool = `${request.tool.server}:${request.tool.name}`;
    if ((settings.blocked_tools ?? []).includes(tool)) {
      return {
        tag: 'reject',
        val: `Tool '${tool}' is blocked by {{name}}; ask an operator to unblock it`,
      };
    }
    return { tag: 'allow' };
  },
};
