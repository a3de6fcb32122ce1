// Stages a copy of an installed npm package whose whole dependency tree is bundled
// (`bundleDependencies`), so that the loopback registry of the launcher tests can serve it
// with no other package there: `npx -y` then installs it from its own tarball.
//
// Usage: node stage-bundled.js PACKAGE_DIR NODE_MODULES_ROOT STAGE_DIR
//
// PACKAGE_DIR is the installed package (tests/npm/node_modules/@scope/name), NODE_MODULES_ROOT
// the node_modules it was installed in, STAGE_DIR an empty directory that receives the
// package with node_modules holding every package it needs (found the way Node resolves
// them: the package's own node_modules, then each parent's).
'use strict';
const fs = require('fs');
const path = require('path');

const [packageDir, root, stage] = process.argv.slice(2).map((p) => path.resolve(p));
if (!packageDir || !root || !stage) {
  console.error('usage: node stage-bundled.js PACKAGE_DIR NODE_MODULES_ROOT STAGE_DIR');
  process.exit(2);
}

const manifest = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));

// Where `name` resolves from a package at `from`: its node_modules, then its parents', up to
// the root's.
function resolve(from, name) {
  for (let dir = from; dir.startsWith(root); dir = path.dirname(dir)) {
    const candidate = path.join(dir, dir === root ? '' : 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (dir === root) break;
  }
  return null;
}

// Every package directory the tree needs, then the top-level directories holding them (a
// nested one is copied with its parent).
const needed = new Set();
const queue = [packageDir];
while (queue.length) {
  const dir = queue.pop();
  const m = manifest(dir);
  const wanted = {
    ...(m.dependencies || {}),
    ...(m.optionalDependencies || {}),
    ...(m.peerDependencies || {}),
  };
  for (const name of Object.keys(wanted)) {
    const found = resolve(dir, name);
    if (!found) {
      if ((m.dependencies || {})[name]) {
        console.error(`${m.name}: dependency ${name} is not installed under ${root}`);
        process.exit(1);
      }
      continue; // an optional or peer dependency that is not installed
    }
    if (!needed.has(found)) {
      needed.add(found);
      queue.push(found);
    }
  }
}
const topLevel = new Set();
for (const dir of needed) {
  const parts = path.relative(root, dir).split(path.sep);
  topLevel.add(parts[0].startsWith('@') ? path.join(parts[0], parts[1]) : parts[0]);
}

fs.mkdirSync(path.join(stage, 'node_modules'), { recursive: true });
for (const entry of fs.readdirSync(packageDir)) {
  if (entry !== 'node_modules') {
    fs.cpSync(path.join(packageDir, entry), path.join(stage, entry), { recursive: true });
  }
}
for (const rel of topLevel) {
  fs.cpSync(path.join(root, rel), path.join(stage, 'node_modules', rel), {
    recursive: true,
    dereference: true,
  });
}
// The published copy: every package it needs is a bundled dependency (npm then installs
// none of them from the registry), and no install-time scripts.
const m = manifest(packageDir);
const bundled = [...topLevel].sort();
m.dependencies = Object.fromEntries(
  bundled.map((rel) => [rel, manifest(path.join(root, rel)).version]),
);
m.bundleDependencies = bundled;
delete m.optionalDependencies;
delete m.peerDependencies;
delete m.devDependencies;
delete m.scripts;
delete m.publishConfig;
fs.writeFileSync(path.join(stage, 'package.json'), JSON.stringify(m, null, 2) + '\n');
console.log(`${m.name}@${m.version}: ${bundled.length} bundled packages`);
