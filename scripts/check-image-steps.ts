// Keeps the Dockerfile from rotting where the image is not built (docs/deploy.md): reads its
// steps and checks them against this checkout and this Debian machine.
//   - every package its `apt-get install` lines name has a candidate in Debian (apt-cache policy);
//   - every COPY source exists, and `npm ci` has its package-lock.json;
//   - what the runtime stage starts exists after `npm run build` (dist/main.js: tsconfig.build.json's
//     outDir; the console in dist/console), and the bin/ and sdk/ it imports are copied;
//   - it runs as a non-root user, has a HEALTHCHECK on /healthz and stops with SIGTERM.
// scripts/build-image.sh builds and starts the image itself (Buildah, chroot isolation).
//
//   npx tsx scripts/check-image-steps.ts [--no-apt]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface Step { stage: number; instruction: string; args: string }

/** The Dockerfile's instructions, continuation lines joined and comments dropped. */
export function dockerfileSteps(text: string): Step[] {
  const lines = text.split('\n').filter((l) => !/^\s*#/.test(l));
  const joined = lines.join('\n').replace(/\\\n/g, ' ');
  const steps: Step[] = [];
  let stage = -1;
  for (const raw of joined.split('\n')) {
    const m = /^\s*([A-Z]+)\s+(.*)$/.exec(raw);
    if (!m) continue;
    if (m[1] === 'FROM') stage++;
    steps.push({ stage, instruction: m[1]!, args: m[2]!.trim() });
  }
  return steps;
}

/** The packages of every `apt-get install` in RUN steps (options left out). */
export function aptPackages(steps: Step[]): string[] {
  const out = new Set<string>();
  for (const s of steps.filter((x) => x.instruction === 'RUN')) {
    for (const cmd of s.args.split(/&&|;/)) {
      const m = /apt-get\s+install\s+(.*)$/.exec(cmd.trim());
      if (!m) continue;
      for (const word of m[1]!.split(/\s+/)) if (word && !word.startsWith('-')) out.add(word);
    }
  }
  return [...out];
}

/** What is wrong with the Dockerfile's steps (empty: nothing). `apt`: also ask apt-cache about its packages. */
export function checkImageSteps(opts: { apt: boolean }): string[] {
  const problems: string[] = [];
  const steps = dockerfileSteps(fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
  const stages = Math.max(...steps.map((s) => s.stage)) + 1;
  if (stages < 2) problems.push('the Dockerfile is not multi-stage');
  const from = steps.filter((s) => s.instruction === 'FROM').map((s) => s.args);
  const arg = steps.find((s) => s.instruction === 'ARG' && s.args.startsWith('NODE_IMAGE='))?.args.split('=')[1];
  if (!arg || !/^node:20-bookworm-slim$/.test(arg)) problems.push(`NODE_IMAGE's default is ${arg}: node:20-bookworm-slim expected`);
  if (!from.every((f) => f.startsWith('${NODE_IMAGE}'))) problems.push(`every stage starts from NODE_IMAGE (${from.join('; ')})`);

  // COPY sources of the build context, and what the build stage's npm steps need.
  const dockerignore = fs.readFileSync(path.join(ROOT, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  for (const s of steps.filter((x) => x.instruction === 'COPY' && !x.args.startsWith('--from'))) {
    const parts = s.args.split(/\s+/);
    for (const src of parts.slice(0, -1)) {
      if (!fs.existsSync(path.join(ROOT, src))) problems.push(`COPY ${src}: no such file in the checkout`);
      if (dockerignore.includes(src)) problems.push(`COPY ${src}: .dockerignore leaves it out of the build context`);
    }
  }
  const runs = steps.filter((x) => x.instruction === 'RUN').map((x) => x.args).join(' && ');
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  if (!/npm ci\b/.test(runs)) problems.push('no `npm ci` step');
  if (!fs.existsSync(path.join(ROOT, 'package-lock.json'))) problems.push('npm ci needs package-lock.json');
  for (const m of runs.matchAll(/npm run (\S+)/g)) if (!pkg.scripts[m[1]!]) problems.push(`npm run ${m[1]}: no such script in package.json`);
  if (!/npm prune --omit=dev/.test(runs)) problems.push('the runtime would carry the dev dependencies (npm prune --omit=dev)');

  // What the runtime stage starts is what the build makes.
  const tsconfig = fs.readFileSync(path.join(ROOT, 'tsconfig.build.json'), 'utf8');
  if (!/"outDir":\s*"dist"/.test(tsconfig)) problems.push('tsconfig.build.json no longer builds into dist/: the image starts /app/dist/main.js');
  if (!/dist\/console/.test(fs.readFileSync(path.join(ROOT, 'console', 'vite.config.mjs'), 'utf8'))) problems.push('the console is no longer built into dist/console');
  const runtime = steps.filter((s) => s.stage === stages - 1);
  const copiedFromBuild = runtime.filter((s) => s.instruction === 'COPY' && s.args.startsWith('--from=build')).map((s) => s.args.split(/\s+/)[1]);
  for (const want of ['/src/node_modules', '/src/dist', '/src/bin', '/src/sdk', '/src/package.json']) {
    if (!copiedFromBuild.includes(want)) problems.push(`the runtime stage does not copy ${want} (dist/cli imports ../../sdk/client.js)`);
  }
  const entry = runtime.find((s) => s.instruction === 'ENTRYPOINT')?.args ?? '';
  if (!entry.includes('/app/dist/main.js')) problems.push(`ENTRYPOINT does not start /app/dist/main.js: ${entry}`);
  const user = runtime.find((s) => s.instruction === 'USER')?.args;
  if (!user || user === 'root' || user === '0') problems.push('the runtime runs as root');
  const health = runtime.find((s) => s.instruction === 'HEALTHCHECK')?.args ?? '';
  if (!health.includes('/healthz')) problems.push('no HEALTHCHECK on /healthz');
  if (runtime.find((s) => s.instruction === 'STOPSIGNAL')?.args !== 'SIGTERM') problems.push('STOPSIGNAL is not SIGTERM (the drain)');
  const packages = aptPackages(runtime);
  for (const want of ['espeak-ng', 'pocketsphinx', 'pocketsphinx-en-us']) if (!packages.includes(want)) problems.push(`the runtime does not install ${want} (the offline speech engines)`);

  if (opts.apt) {
    for (const p of aptPackages(steps)) {
      const policy = execFileSync('apt-cache', ['policy', p], { encoding: 'utf8' });
      const candidate = /Candidate:\s*(\S+)/.exec(policy)?.[1];
      if (!candidate || candidate === '(none)') problems.push(`apt-get install ${p}: no candidate in Debian's archive (apt-cache policy)`);
    }
  }
  return problems;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const problems = checkImageSteps({ apt: !process.argv.includes('--no-apt') });
  for (const p of problems) console.error(`Dockerfile: ${p}`);
  if (problems.length) process.exit(1);
  console.log('Dockerfile: its steps match this checkout and Debian\'s packages');
}
