// `callplane tasks import FILE.csv`: the file goes to POST /api/v2/tasks/csv as multipart, read
// from disk as the upload goes (never held whole; the service reads it as it arrives and inserts
// as it reads, so the bytes sent follow the rows handled), with a progress bar; then the per-row
// report the API answers.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ok } from '../../sdk/client.js';
import { accountId, API_OPTIONS, apiClient } from './api-client.ts';
import { ProgressBar, type ProgressStream } from './progress.ts';
import { HELP, UsageError } from './usage.ts';

const CHUNK = 64 * 1024;

/** The multipart body around the file, streamed from disk; `onSent` counts the file's bytes taken. */
function multipartBody(file: string, fileSize: number, onSent: (bytes: number) => void) {
  const boundary = `callplane-${crypto.randomBytes(12).toString('hex')}`;
  const name = path.basename(file).replace(/["\r\n\\]/g, '_');
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="csv"; filename="${name}"\r\nContent-Type: text/csv\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  let fd: number | undefined;
  let sent = 0;
  let stage: 'head' | 'file' | 'tail' | 'done' = 'head';
  const buffer = Buffer.alloc(CHUNK);
  const stream = new ReadableStream<Uint8Array>({
    type: 'bytes',
    async pull(controller) {
      if (stage === 'head') {
        fd = fs.openSync(file, 'r');
        stage = 'file';
        controller.enqueue(new Uint8Array(head));
        return;
      }
      if (stage === 'file') {
        const n = await new Promise<number>((resolve, reject) => fs.read(fd!, buffer, 0, CHUNK, null, (e, read) => (e ? reject(e) : resolve(read))));
        if (n > 0) {
          sent += n;
          onSent(sent);
          controller.enqueue(new Uint8Array(buffer.subarray(0, n)));
          return;
        }
        fs.closeSync(fd!);
        fd = undefined;
        stage = 'tail';
      }
      if (stage === 'tail') {
        stage = 'done';
        controller.enqueue(new Uint8Array(tail));
        return;
      }
      controller.close();
    },
    cancel() {
      if (fd !== undefined) fs.closeSync(fd);
    },
  });
  return { stream, contentType: `multipart/form-data; boundary=${boundary}`, length: head.length + fileSize + tail.length };
}

export async function tasksCommand(argv: string[], out: NodeJS.WritableStream = process.stdout, err: ProgressStream = process.stderr): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv, allowPositionals: true,
    options: { ...API_OPTIONS, account: { type: 'string' }, 'dry-run': { type: 'boolean' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) return void out.write(HELP.tasks + '\n'), 0;
  const [action, ...rest] = positionals;
  if (action !== 'import') throw new UsageError(action ? `unknown tasks action '${action}'` : 'tasks needs an action: import', HELP.tasks);
  if (rest.length !== 1) throw new UsageError('tasks import takes one CSV file', HELP.tasks);
  const file = rest[0];
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as Error).message}`);
  }
  if (!stat.isFile()) throw new UsageError(`${file} is not a file`);
  const client = apiClient(values);
  const bar = new ProgressBar(stat.size, `${values['dry-run'] ? 'checking' : 'uploading'} ${path.basename(file)}`, err);
  bar.update(0);
  const body = multipartBody(file, stat.size, (n) => bar.update(n));
  const report = await ok(client.POST('/api/v2/tasks/csv', {
    params: { query: { targetAccountId: accountId(values.account), ...(values['dry-run'] ? { dryRun: true } : {}) } },
    // The typed body names the form's field; what is sent is the stream built above.
    body: { csv: path.basename(file) },
    bodySerializer: () => body.stream,
    headers: { 'content-type': body.contentType, 'content-length': String(body.length) },
    duplex: 'half',
  }));
  bar.update(stat.size);
  bar.finish(report.complete ? 'read to the end' : 'reading stopped early');
  if (values.json) {
    out.write(JSON.stringify(report, null, 2) + '\n');
  } else {
    out.write(`${report.message ?? ''}\n`);
    out.write(`rows: ${report.rows}, valid: ${report.valid}, refused: ${report.invalid}, ${report.dryRun ? 'dry run: nothing queued' : `queued: ${report.inserted}`}\n`);
    for (const e of report.errors) out.write(`line ${e.line}: refused: ${e.message}\n`);
    if (report.errorsTruncated) out.write(`… more refused rows than listed (the first ${report.errors.length} are shown)\n`);
    for (const w of report.warnings) out.write(`line ${w.line}: warning: ${w.message}\n`);
    if (report.warningsTruncated) out.write(`… more warnings than listed (the first ${report.warnings.length} are shown)\n`);
    if (!report.complete) out.write('reading stopped before the end of the file: upload the lines from the last error\'s line again\n');
  }
  return report.invalid === 0 && report.complete ? 0 : 1;
}
