#!/usr/bin/env node
// Runs the TypeScript entry point through tsx, so `npx callplane …` works without a build step.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'src/main.ts'), ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(r.status ?? 1);
