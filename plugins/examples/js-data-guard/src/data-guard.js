// data-guard: an mcpproxy validator plugin written in JavaScript.
//
// Two rules, each rejecting with a message an agent can act on:
//   1. Private data stays in: a call whose intent declares `data_sensitivity: private` is
//      rejected when the tool's effective annotations say `openWorldHint: true` (it reaches
//      systems outside the operator's control).
//   2. Paths stay under a root: when the settings give `allowed_root` (an absolute path), an
//      argument whose key names a path or file (`path`, `file`, `filename`, `dir`,
//      `source_path`, ...) must hold a path inside that root.
// Everything else is allowed. Built into a WebAssembly component of mcpproxy's
// `validator-plugin` world with componentize-js (see build.sh).

import { config, log } from 'mcpproxy:plugin/host@0.1.1';

const NAME = 'data-guard';

// metadata.info(): who this plugin is.
export const metadata = {
  info() {
    return {
      name: NAME,
      version: '0.1.0',
      description:
        'Keeps private data off open-world tools and path arguments under an allowed root',
    };
  },
};

// validator.validate(request): allow, warn or reject one call.
export const validator = {
  validate(request) {
    let settings;
    try {
      settings = parseSettings(config());
    } catch (e) {
      // Fail closed on a misconfiguration rather than guess.
      return reject(`${NAME}: invalid settings: ${e.message}`);
    }
    const tool = `${request.tool.server}:${request.tool.name}`;

    const sensitivity = request.intent?.dataSensitivity;
    if (sensitivity === 'private' && request.effective?.openWorldHint === true) {
      return reject(
        `Tool '${tool}' reaches outside systems (openWorldHint); ` +
          `private data may not be sent to it. Remove the private data, or use a tool ` +
          `that stays inside your systems`,
      );
    }

    if (settings.allowedRoot !== undefined) {
      let args;
      try {
        args = JSON.parse(request.argsJson);
      } catch (e) {
        return reject(`${NAME}: the arguments of '${tool}' are not valid JSON`);
      }
      for (const [key, value] of pathArguments(args, '')) {
        if (!insideRoot(value, settings.allowedRoot)) {
          return reject(
            `Argument '${key}' of tool '${tool}' names '${value}', outside the allowed ` +
              `root ${settings.allowedRoot}; use an absolute path under ` +
              `${settings.allowedRoot}`,
          );
        }
      }
    }
    return { tag: 'allow' };
  },
};

function reject(message) {
  log('debug', message);
  return { tag: 'reject', val: message };
}

// The plugin's settings: `allowed_root` (optional, an absolute path). Other keys (such as
// the intent_declaration switches every validator receives) are ignored.
function parseSettings(text) {
  const raw = JSON.parse(text);
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new Error('expected a JSON object');
  }
  const root = raw.allowed_root;
  if (root === undefined || root === null) {
    return { allowedRoot: undefined };
  }
  if (typeof root !== 'string' || !root.startsWith('/')) {
    throw new Error(
      `allowed_root must be an absolute path such as "/tmp", not ${JSON.stringify(root)}`,
    );
  }
  return { allowedRoot: normalize(root) };
}

// Keys whose string values are paths: path, file, dir, and words built on them
// (filename, file_path, sourcePath, target_dir, paths, files, ...).
const PATH_KEY = /(path|file|dir|directory|folder)s?$|^(path|file|dir)/i;

// Yields [key, value] for every string under a path-like key, at any depth (a list of paths
// under `paths` counts too).
function* pathArguments(value, key, underPathKey = false) {
  if (typeof value === 'string') {
    if (underPathKey) yield [key, value];
  } else if (Array.isArray(value)) {
    for (const item of value) yield* pathArguments(item, key, underPathKey);
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      yield* pathArguments(v, key ? `${key}.${k}` : k, PATH_KEY.test(k));
    }
  }
}

// Whether `value` names a place inside `root` (already normalized). Judged on the text alone:
// a plugin sees no filesystem, so symlinks are not followed.
//   - absolute paths and file:// URLs are normalized (`.`, `..`, `//`) and compared;
//   - `~` paths (someone's home) are outside;
//   - relative paths pass unless a `..` lets them climb out (they are relative to the
//     upstream server's working directory, which the proxy does not know).
function insideRoot(value, root) {
  let path = value;
  if (/^file:\/\//i.test(path)) {
    path = path.slice('file://'.length);
    try {
      path = decodeURIComponent(path);
    } catch {
      return false;
    }
  }
  if (path.startsWith('~') || /^[A-Za-z]:[\\/]/.test(path) || path.startsWith('\\')) {
    return false;
  }
  if (!path.startsWith('/')) {
    return !path.split(/[\\/]/).includes('..');
  }
  const normalized = normalize(path);
  return root === '/' || normalized === root || normalized.startsWith(`${root}/`);
}

// `/a/./b//c/../d/` -> `/a/b/d`; `..` never climbs above `/`.
function normalize(path) {
  const parts = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}
