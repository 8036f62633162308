// `npm run check:console` (in .ci/run): holds the built web console (dist/console, `npm run build`)
// to its budget, gzip sizes as a browser downloads them (docs/console.md, "Budget"):
//   first screen — the entry script, the scripts it imports statically, and their CSS;
//   all — every script and stylesheet, every page included (pages load when first visited).
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

export const BUDGET_KB = { firstScreen: 110, all: 400 };

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', 'dist', 'console');
const manifestFile = path.join(root, '.vite', 'manifest.json');
if (!fs.existsSync(manifestFile)) {
  console.error(`check:console: ${manifestFile} is missing; run npm run build first`);
  process.exit(1);
}
const manifest = JSON.parse(fs.readFileSync(manifestFile, 'utf8'));
const gz = (file) => zlib.gzipSync(fs.readFileSync(path.join(root, file)), { level: 9 }).length;

const first = new Set();
const visit = (key) => {
  const chunk = manifest[key];
  if (!chunk || first.has(chunk.file)) return;
  first.add(chunk.file);
  for (const css of chunk.css ?? []) first.add(css);
  for (const imported of chunk.imports ?? []) visit(imported);
};
for (const [key, chunk] of Object.entries(manifest)) if (chunk.isEntry) visit(key);

const all = fs.readdirSync(path.join(root, 'assets')).filter((f) => /\.(js|css)$/.test(f)).map((f) => `assets/${f}`);
const kb = (files) => [...files].reduce((n, f) => n + gz(f), 0) / 1024;
const firstKb = kb(first);
const allKb = kb(all);
console.log(`console bundle (gzip): first screen ${firstKb.toFixed(1)} KB of ${BUDGET_KB.firstScreen} KB; all ${allKb.toFixed(1)} KB of ${BUDGET_KB.all} KB (${all.length} files)`);
if (firstKb > BUDGET_KB.firstScreen || allKb > BUDGET_KB.all) {
  console.error('check:console: over budget. Load the new code with its page (pages/index.ts, lazy), or take a smaller library.');
  process.exit(1);
}
