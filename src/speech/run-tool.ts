// Runs an offline speech program (espeak-ng, pocketsphinx_continuous) as a child process with
// the bounds a call needs: input on stdin, output read up to a limit, a time limit, and an abort
// signal. Whatever stops it early (time limit, abort, too much output) kills the child with
// SIGKILL and waits for it to exit before answering, so no child outlives the request and none is
// left a zombie (Node reaps it when it exits).
import { spawn } from 'node:child_process';
import { SpeechError } from './types.ts';

export interface ToolOptions {
  /** The engine's name, for errors. */
  engine: string;
  /** The Debian package that installs the program, named when it is missing. */
  debianPackage: string;
  stdin?: Buffer | string;
  timeoutMs: number;
  /** More output than this stops the program (the request fails). */
  maxStdoutBytes: number;
  signal?: AbortSignal;
  /** Called with the child's process id once it is started (tests watch it exit). */
  onSpawn?: (pid: number) => void;
}

export interface ToolResult {
  stdout: Buffer;
  /** The start and the end of what it wrote to stderr (at most 64 KiB of each). */
  stderr: string;
  code: number | null;
  signal: NodeJS.Signals | null;
}

const STDERR_KEEP = 64 * 1024;

export function runTool(command: string, args: readonly string[], opts: ToolOptions): Promise<ToolResult> {
  opts.signal?.throwIfAborted();
  return new Promise<ToolResult>((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let outBytes = 0;
    let errHead = '';
    let errTail = '';
    /** Why we stopped it, when we did. */
    let stopped: { error: Error } | undefined;
    let spawnError: NodeJS.ErrnoException | undefined;

    const stop = (error: Error) => {
      if (stopped) return;
      stopped = { error };
      child.kill('SIGKILL');
    };
    const timer = setTimeout(() => stop(new SpeechError(opts.engine, 'timeout', `${command} took longer than ${opts.timeoutMs} ms and was stopped`)), opts.timeoutMs);
    const onAbort = () => {
      // The signal's reason, as fetch and Node's own APIs reject with (an AbortError by default).
      const reason: unknown = opts.signal?.reason;
      stop(reason instanceof Error ? reason : new DOMException('This operation was aborted', 'AbortError'));
    };
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    child.on('spawn', () => {
      if (child.pid !== undefined) opts.onSpawn?.(child.pid);
    });
    child.on('error', (err: NodeJS.ErrnoException) => {
      // ENOENT and EACCES arrive here instead of 'spawn'; 'close' still follows.
      spawnError ??= err;
    });
    child.stdout.on('data', (c: Buffer) => {
      if (stopped) return;
      outBytes += c.length;
      if (outBytes > opts.maxStdoutBytes) {
        stop(new SpeechError(opts.engine, 'failed', `${command} wrote more than ${opts.maxStdoutBytes} bytes and was stopped`));
        return;
      }
      out.push(c);
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (s: string) => {
      if (errHead.length < STDERR_KEEP) errHead += s;
      else errTail = (errTail + s).slice(-STDERR_KEEP);
    });
    // The program may exit before reading all of its input (EPIPE): its exit says what happened.
    child.stdin.on('error', () => {});
    child.stdin.end(opts.stdin ?? '');

    child.on('close', (code, signal) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      if (spawnError) {
        reject(spawnError.code === 'ENOENT'
          ? new SpeechError(opts.engine, 'unavailable', `${command} is not installed (install the Debian package: apt-get install ${opts.debianPackage})`)
          : new SpeechError(opts.engine, 'unavailable', `${command} could not be started: ${spawnError.message}`));
        return;
      }
      if (stopped) {
        reject(stopped.error);
        return;
      }
      const stderr = errTail ? `${errHead}\n…\n${errTail}` : errHead;
      resolve({ stdout: Buffer.concat(out), stderr, code, signal });
    });
  });
}

/** The ERROR and FATAL lines of a program's log, or its last line, to put in an error message. */
export function errorLines(stderr: string): string {
  const lines = stderr.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  const errors = lines.filter((l) => /^(ERROR|FATAL|Error)\b/.test(l));
  const picked = errors.length ? errors.slice(0, 3) : lines.slice(-1);
  return picked.join('; ').slice(0, 500) || 'no message';
}
