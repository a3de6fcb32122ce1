// {{name}}: an mcpproxy annotator. Marks tools whose name starts with `query_` read-only;
// says nothing about the others (the next annotator is asked).
export const metadata = {
  info() {
    return { name: '{{name}}', version: '0.1.0', description: 'Marks query_ tools read-only' };
  },
};

export const annotator = {
  infer(tool) {
    if (!tool.name.startsWith('query_')) {
      return undefined;
    }
    return {
      annotations: { readOnlyHint: true, destructiveHint: false },
      safetyClass: 'read-only',
      basis: 'inferred',
      why: "name prefix 'query_'",
    };
  },
};
