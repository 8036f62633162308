// The compiled callplane (dist/) that `npm start` and bin/callplane.js run. `npm ci` builds it
// (the `prepare` script); tests that start the real command call ensureBuilt() first, which
// builds again only when a source is newer than the last build, so they never run stale code.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DIST_MAIN = path.join(ROOT, 'dist', 'main.js');
const STAMP = path.join(ROOT, 'dist', '.tsbuildinfo');

function newestMtime(p: string): number {
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const name of fs.readdirSync(p)) newest = Math.max(newest, newestMtime(path.join(p, name)));
  return newest;
}

/** True when dist/ is missing or older than src/ or the compiler settings. */
export function distIsStale(): boolean {
  if (!fs.existsSync(DIST_MAIN) || !fs.existsSync(STAMP)) return true;
  const sources = Math.max(newestMtime(path.join(ROOT, 'src')), ...['tsconfig.json', 'tsconfig.build.json', 'package.json'].map((f) => newestMtime(path.join(ROOT, f))));
  return sources > fs.statSync(STAMP).mtimeMs;
}

/** Builds dist/ (as `npm run build` does) when it is missing or stale. */
export function ensureBuilt(): void {
  if (!distIsStale()) return;
  try {
    execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'pipe' });
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`building dist/ failed:\n${String(e.stdout ?? '')}${String(e.stderr ?? '')}`, { cause: err });
  }
  // tsc leaves the build info untouched when nothing changed; mark the build as current.
  const now = new Date();
  fs.utimesSync(STAMP, now, now);
}
