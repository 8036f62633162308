// The worker thread that parses an imported suite's text (document.ts starts it through
// src/lib/worker-task.ts): YAML (aliases bounded, so a small document cannot expand to a huge one)
// or JSON. What it answers is checked on the main thread (checkSuite).
import { parse } from 'yaml';
import { serveWorkerTask } from '../../lib/worker-task.ts';
import type { ParseTask } from './document.ts';

class SyntaxRefusal extends Error {
  readonly code = 'syntax';
}

serveWorkerTask<ParseTask, unknown>(({ text, format }) => {
  try {
    return format === 'json' ? JSON.parse(text) as unknown : parse(text, { maxAliasCount: 100, prettyErrors: false }) as unknown;
  } catch (err) {
    throw new SyntaxRefusal((err as Error).message);
  }
});
