#!/usr/bin/env node
// The callplane command. It runs the compiled CLI (dist/, which `npm ci` builds through the
// `prepare` script, or `npm run build`) in this same process: a signal sent to `callplane`
// reaches the server itself, and no parent is left behind holding it.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dist = path.join(path.dirname(path.dirname(fileURLToPath(import.meta.url))), 'dist');
const main = path.join(dist, 'main.js');
if (!fs.existsSync(main)) {
  console.error(`callplane: ${main} is missing; build it with \`npm run build\` (npm ci does so)`);
  process.exit(1);
}
// Stack traces name the TypeScript sources, as `npm start` (node --enable-source-maps) does.
process.setSourceMapsEnabled(true);
// Help, doctor and the commands through the API (tokens, tasks, agents, calls) start without
// loading the service's code; everything else is dist/main.js.
// (A dist/ built before src/cli/ existed has no commands.js: dist/main.js then says what it knows.)
const commands = path.join(dist, 'cli', 'commands.js');
const { runClientCommand } = fs.existsSync(commands) ? await import(pathToFileURL(commands).href) : { runClientCommand: async () => false };
if (!(await runClientCommand(process.argv.slice(2)))) await import(pathToFileURL(main).href);
