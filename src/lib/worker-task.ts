// Parsing whose cost grows with what a caller sends (a PDF's text, an audio file) runs here, off
// the event loop: one `worker_threads` Worker per task, with a V8 heap limit (`resourceLimits`)
// and a wall-clock limit after which it is terminated. The worker is gone when the task ends,
// whatever the outcome, so nothing it allocated outlives it. At most MAX_PARSE_WORKERS run at
// once in a process (so several huge uploads cannot multiply memory); up to MAX_PARSE_WAITING
// more wait their turn in order, and beyond that a task is refused at once as `busy`.
//
// The worker's entry module calls `serveWorkerTask(fn)`; the caller names that module with
// `workerEntry(import.meta.url, './x-worker')`, which resolves it next to the caller with the
// caller's own extension: `.ts` under tsx (see startWorker), `.js` in the built dist/.
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData, type Transferable, type WorkerOptions } from 'node:worker_threads';

/** Parse workers running at once in a process. */
export const MAX_PARSE_WORKERS = 2;
/** Tasks waiting for a worker; one more is refused as `busy`. */
export const MAX_PARSE_WAITING = 16;

export type WorkerLimit = 'memory' | 'time' | 'busy' | 'stopped';

/** The task passed a limit of the worker (its heap, its time), found every worker busy, or was stopped by stopWorkerTasks(). */
export class WorkerLimitError extends Error {
  constructor(readonly limit: WorkerLimit, message: string) { super(message); }
}

/** The task's own function threw: its message and `code` (when it set one) come back here. */
export class WorkerTaskError extends Error {
  constructor(message: string, readonly code: string | undefined) { super(message); }
}

export interface WorkerTaskOptions {
  /** V8 old-generation heap of the worker, MB (`resourceLimits.maxOldGenerationSizeMb`). */
  maxHeapMb: number;
  /** Wall-clock limit from the worker's start, ms; then it is terminated. */
  timeoutMs: number;
  /** Buffers moved (not copied) into the worker; the caller must not use them afterwards. */
  transfer?: readonly Transferable[];
}

/** The worker module `name` (`./pdf-worker`) beside the module at `base` (its import.meta.url), with the same extension. */
export function workerEntry(base: string, name: string): URL {
  return new URL(name + extname(fileURLToPath(base)), base);
}

/**
 * A worker on `entry`. Under tsx (tests, `tsx src/main.ts`) the worker registers tsx's loader
 * before it loads the entry: the `--import tsx` a worker inherits registers it on the main
 * thread only (tsx 4 on Node 20). The built service's `.js` entries load as they are.
 */
export function startWorker(entry: URL, options: WorkerOptions): Worker {
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, options);
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(boot, { ...options, eval: true });
}

type Reply<O> = { ok: true; value: O; transfer?: Transferable[] } | { ok: false; message: string; code?: string };

let running = 0;
const waiting: Array<{ go(): void; refuse(err: Error): void }> = [];
/** Stops each running task (terminating its worker). */
const stoppers = new Set<() => void>();

async function acquire(): Promise<void> {
  if (running < MAX_PARSE_WORKERS) {
    running++;
    return;
  }
  if (waiting.length >= MAX_PARSE_WAITING) {
    throw new WorkerLimitError('busy', `the server is busy reading ${running + waiting.length} other files; try again in a few seconds`);
  }
  // The slot is handed over by release(): `running` stays as it is.
  await new Promise<void>((go, refuse) => waiting.push({ go, refuse }));
}

function release(): void {
  const next = waiting.shift();
  if (next) next.go();
  else running--;
}

/** Runs `input` through the worker module at `entry` and returns what its function returned. */
export async function runWorkerTask<I, O>(entry: URL, input: I, opts: WorkerTaskOptions): Promise<O> {
  await acquire();
  let exited: Promise<unknown> = Promise.resolve();
  try {
    return await new Promise<O>((resolve, reject) => {
      const worker = startWorker(entry, {
        workerData: input,
        transferList: opts.transfer ? [...opts.transfer] : undefined,
        resourceLimits: { maxOldGenerationSizeMb: opts.maxHeapMb, maxYoungGenerationSizeMb: Math.min(32, Math.max(4, opts.maxHeapMb >> 3)), stackSizeMb: 4 },
        stdout: false, stderr: false,
      });
      // Referenced, like any pending I/O: the process waits for the answer (at most timeoutMs).
      exited = new Promise((done) => worker.once('exit', done));
      let settled = false;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        stoppers.delete(stop);
        fn();
        void worker.terminate();
      };
      const timer = setTimeout(() => settle(() => reject(new WorkerLimitError('time', `took longer than ${opts.timeoutMs / 1000} seconds`))), opts.timeoutMs);
      const stop = () => settle(() => reject(new WorkerLimitError('stopped', 'the server is shutting down')));
      stoppers.add(stop);
      worker.on('message', (reply: Reply<O>) => settle(() => {
        if (reply.ok) resolve(reply.value);
        else reject(new WorkerTaskError(reply.message, reply.code));
      }));
      worker.on('error', (err: Error & { code?: string }) => settle(() => {
        if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') reject(new WorkerLimitError('memory', `needed more than ${opts.maxHeapMb} MB of memory`));
        else reject(new WorkerTaskError(err.message, err.code));
      }));
      worker.on('exit', (code) => settle(() => reject(new WorkerTaskError(`the worker stopped (exit code ${code}) before it answered`, undefined))));
    });
  } finally {
    // The slot is free once the thread (and all it allocated) is gone.
    await exited;
    release();
  }
}

/**
 * Terminates every running task's worker (each rejects with `stopped`) and refuses the tasks
 * still waiting: the HTTP server calls it as it closes, so an upload being read does not hold a
 * graceful stop for its whole time limit.
 */
export function stopWorkerTasks(): void {
  for (const w of waiting.splice(0)) w.refuse(new WorkerLimitError('stopped', 'the server is shutting down'));
  for (const stop of [...stoppers]) stop();
}

/** In a worker module: runs `fn` on the task's input, answers, and lets the worker end. */
export function serveWorkerTask<I, O>(fn: (input: I) => Promise<O> | O, transferOf?: (value: O) => Transferable[]): void {
  if (isMainThread || !parentPort) throw new Error('serveWorkerTask runs in a worker thread');
  const port = parentPort;
  Promise.resolve().then(() => fn(workerData as I)).then(
    (value) => port.postMessage({ ok: true, value } satisfies Reply<O>, transferOf ? transferOf(value) : []),
    (err: unknown) => {
      const e = err as { message?: unknown; code?: unknown };
      port.postMessage({
        ok: false, message: typeof e?.message === 'string' ? e.message : String(err),
        ...(typeof e?.code === 'string' ? { code: e.code } : {}),
      } satisfies Reply<O>);
    },
  );
}
