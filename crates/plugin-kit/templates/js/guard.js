// {{name}}: an mcpproxy result guard. Blocks any result (tool result, prompt or resource)
// that holds one of its marker words: {"marker_words": ["CONFIDENTIAL"]} (the default). An
// exception that escapes guard() blocks the result (the proxy fails closed).
import { config } from 'mcpproxy:plugin/host@0.1.1';

export const metadata = {
  info() {
    return {
      name: '{{name}}',
      version: '0.1.0',
      description: 'Blocks results that hold a marker word',
    };
  },
};

export const resultGuard = {
  guard(context, items) {
    let settings;
    try {
      settings = JSON.parse(config());
    } catch (e) {
      return { tag: 'block', val: { kind: 'settings', reason: `{{name}}: invalid settings: ${e.message}` } };
    }
    const words = settings.marker_words ?? ['CONFIDENTIAL'];
    for (const item of items) {
      const word = words.find((w) => item.text.includes(w));
      if (word !== undefined) {
        return {
          tag: 'block',
          val: {
            kind: 'marker-word',
            reason: `the result of ${context.server}:${context.name} is marked ${word}; ask its owner for a copy you may share`,
          },
        };
      }
    }
    return { tag: 'items', val: items.map(() => ({ tag: 'pass' })) };
  },
};
