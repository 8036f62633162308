// Uploads built to cost far more to read than they weigh, on both engines: a PDF whose one page
// is a Flate stream of a million `BT … Tj ET`, four whose stream unpacks to a gigabyte each, sent
// at once, and HTML with a hundred thousand unclosed tags. Each is answered within seconds (a 413
// naming the limit it passed, or the text) while a second client times /healthz, and the
// process's peak memory stays bounded (docs/knowledge.md, "Reading limits"). Then the built
// service: /healthz answers during such an upload, and SIGTERM still stops it cleanly.
//
// The bounds are generous on purpose (a busy machine). Before the text was read in a worker, the
// first PDF held /healthz for 10–12 s, the four gigabyte streams for 7–11 s while the process grew
// by 1–5 GB, the HTML for 13 s; now /healthz stays within tens of milliseconds.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { ensureBuilt, DIST_MAIN, ROOT } from '../helpers/dist.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { freePort, within } from '../helpers/wait.ts';

/** A one-page PDF whose content stream is `content`, Flate-compressed, with a correct xref table. */
function flatePdf(content: Buffer): Buffer {
  const z = zlib.deflateSync(content, { level: 9 });
  const objects: Buffer[] = [
    Buffer.from('<< /Type /Catalog /Pages 2 0 R >>'),
    Buffer.from('<< /Type /Pages /Kids [3 0 R] /Count 1 >>'),
    Buffer.from('<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>'),
    Buffer.concat([Buffer.from(`<< /Length ${z.length} /Filter /FlateDecode >>\nstream\n`), z, Buffer.from('\nendstream')]),
    Buffer.from('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>'),
  ];
  const parts: Buffer[] = [Buffer.from('%PDF-1.4\n')];
  let size = parts[0]!.length;
  const offsets: number[] = [];
  objects.forEach((o, i) => {
    offsets.push(size);
    const obj = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`), o, Buffer.from('\nendobj\n')]);
    parts.push(obj);
    size += obj.length;
  });
  parts.push(Buffer.from(`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`
    + `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${size}\n%%EOF\n`));
  return Buffer.concat(parts);
}

/** `lines` text operators, each showing `chars` characters (a million of 8: 114 KB, unpacking to 38 MB). */
function textBomb(lines: number, chars: number): Buffer {
  return flatePdf(Buffer.from(`BT /F1 12 Tf 10 10 Td (${'x'.repeat(chars)}) Tj ET\n`.repeat(lines), 'latin1'));
}

/** A content stream of `mb` MB of spaces (no text at all): about 1 KB per MB. */
function spaceBomb(mb: number): Buffer {
  return flatePdf(Buffer.alloc(mb * 1024 * 1024, 0x20));
}

function form(filename: string, content: string | Buffer, type: string): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----callplane${crypto.randomBytes(8).toString('hex')}`;
  const payload = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n`),
    Buffer.from(content), Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

/** The process's peak resident memory (VmHWM), MB, since the last resetPeak(). */
function peakMb(): number {
  return Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
}
/** Resets VmHWM to the current resident memory (Linux: clear_refs 5). */
function resetPeak(): void {
  fs.writeFileSync('/proc/self/clear_refs', '5');
}
const rssMb = () => process.memoryUsage().rss / 1024 / 1024;

/** Slowest /healthz allowed while an upload is read: it answers in a few ms when the loop is free. */
const HEALTH_BOUND_MS = 1000;
/**
 * A refusal (or an answer) costs at most this much CPU time (the whole process's, the parse worker's
 * included), from the upload's start: unlike the time on the clock, it does not grow when the other
 * test files of the run share the cores. Measured on 2 cores under a load of ~25: the 114 KB PDF
 * bomb's refusal took 4.5 s of CPU (7.9 s on the clock); on the clock it once took 15.4 s under the
 * suite's own load against the former bound of 15 s.
 */
const ANSWER_CPU_BOUND_MS = 10_000;
/** And within this on the clock: only a hang, not a busy machine, gets this far. */
const ANSWER_BOUND_MS = 60_000;
/** Peak memory may grow by at most this while uploads are read (two parse workers at most). */
const MEMORY_BOUND_MB = 600;

const report = (r: { ms: number; cpuMs: number; slowestHealthMs: number; healthAnswers: number; growthMb: number }) =>
  `answered in ${Math.round(r.ms)} ms (${Math.round(r.cpuMs)} ms of CPU); ${r.healthAnswers} /healthz, slowest ${Math.round(r.slowestHealthMs)} ms; peak memory +${Math.round(r.growthMb)} MB`;

forEachEngine('knowledge upload limits', (h) => {
  let token = '';
  let kbId = '';
  before(async () => {
    const o = await h().organization((await h().reseller()).id);
    token = o.token;
    kbId = (await h().call('POST', '/api/v2/kb/knowledgebase', { token, body: { name: 'limits' } })).body.knowledgeBase.id;
  });
  const upload = (filename: string, content: string | Buffer, type: string) => {
    const { payload, headers } = form(filename, content, type);
    return h().call('POST', `/api/v2/kb/knowledgebase/${kbId}/documents/upload`, { token, payload: payload as unknown as string, headers });
  };

  /** Runs `work` while another client asks /healthz in a loop; the answers' times and the peak memory growth. */
  async function whileTimingHealth<T>(work: () => Promise<T>) {
    const times: number[] = [];
    let done = false;
    // Each probe counts from before its pause: a pause that ends late (the loop was held) counts too.
    const health = (async () => {
      while (!done) {
        const t0 = performance.now();
        await new Promise((res) => setTimeout(res, 20));
        const r = await h().call('GET', '/healthz', { token: null });
        assert.equal(r.status, 200);
        times.push(performance.now() - t0 - 20);
      }
    })();
    const before = rssMb();
    resetPeak();
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    let result: T;
    let ms: number;
    let cpuMs: number;
    try {
      result = await work();
      ms = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      cpuMs = (cpu.user + cpu.system) / 1000;
    } finally {
      done = true;
      // The probe in flight when the answer came is counted too (it is the one a held loop delays).
      await health;
    }
    return { result, ms, cpuMs, slowestHealthMs: Math.max(...times), healthAnswers: times.length, growthMb: peakMb() - before };
  }

  it('a 114 KB PDF of a million `BT … Tj ET` (8 million characters): 413 naming the character limit, within seconds, /healthz answering', async (t) => {
    const pdf = textBomb(1_000_000, 8);
    assert.ok(pdf.length < 120_000, String(pdf.length));
    const r = await whileTimingHealth(() => upload('bomb.pdf', pdf, 'application/pdf'));
    t.diagnostic(report(r));
    assert.ok(r.slowestHealthMs < HEALTH_BOUND_MS, `slowest /healthz ${Math.round(r.slowestHealthMs)} ms`);
    assert.ok(r.healthAnswers >= 3, `only ${r.healthAnswers} /healthz answers`);
    assert.ok(r.cpuMs < ANSWER_CPU_BOUND_MS, `answered after ${Math.round(r.cpuMs)} ms of CPU`);
    assert.ok(r.ms < ANSWER_BOUND_MS, `answered after ${Math.round(r.ms)} ms`);
    assert.ok(r.growthMb < MEMORY_BOUND_MB, `peak memory grew by ${Math.round(r.growthMb)} MB`);
    assert.equal(r.result.status, 413, JSON.stringify(r.result.body));
    assert.equal(r.result.body.success, false);
    assert.match(r.result.body.message, /at most 2000000 characters/);
  });

  it('four 1 MB PDFs whose streams unpack to a gigabyte each, at once: 413 naming the unpacking limit, memory bounded; then an ordinary PDF is read', async (t) => {
    const pdf = spaceBomb(1024);
    assert.ok(pdf.length < 1_200_000, String(pdf.length));
    const r = await whileTimingHealth(() => Promise.all([1, 2, 3, 4].map((i) => upload(`space-${i}.pdf`, pdf, 'application/pdf'))));
    t.diagnostic(report(r));
    assert.ok(r.growthMb < MEMORY_BOUND_MB, `peak memory grew by ${Math.round(r.growthMb)} MB`);
    assert.ok(r.slowestHealthMs < HEALTH_BOUND_MS, `slowest /healthz ${Math.round(r.slowestHealthMs)} ms`);
    assert.ok(r.ms < 2 * ANSWER_BOUND_MS, `answered after ${Math.round(r.ms)} ms`);
    for (const res of r.result) {
      assert.equal(res.status, 413, JSON.stringify(res.body));
      assert.match(res.body.message, /must unpack to at most 64 MB in one stream/);
    }
    // The workers are gone and their slots free: an ordinary PDF is read as before.
    const ok = await upload('ok.pdf', flatePdf(Buffer.from('BT /F1 12 Tf 72 720 Td (The lighthouse is open on Sundays.) Tj ET')), 'application/pdf');
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assert.ok(ok.body.document.characters > 20);
  });

  it('200 KB of unclosed HTML tags is read in linear time, off the event loop', async (t) => {
    const r = await whileTimingHealth(() => upload('tags.html', `${'<a'.repeat(100_000)} the harbour ferry leaves at noon`, 'text/html'));
    t.diagnostic(report(r));
    assert.ok(r.slowestHealthMs < HEALTH_BOUND_MS, `slowest /healthz ${Math.round(r.slowestHealthMs)} ms`);
    assert.ok(r.ms < ANSWER_BOUND_MS, `answered after ${Math.round(r.ms)} ms`);
    assert.equal(r.result.status, 201, JSON.stringify(r.result.body));
    const found = await h().call('POST', `/api/v2/kb/knowledgebase/${kbId}/search`, { token, body: { query: 'ferry' } });
    assert.match(found.body.results[0].content, /harbour ferry/);
  });
});

describe('the built service, SIGTERM while a PDF bomb is read', () => {
  const dirs: string[] = [];
  before(() => ensureBuilt());
  after(() => { for (const d of dirs) fs.rmSync(d, { recursive: true, force: true }); });

  it('answers /healthz during the upload and stops with exit code 0 within seconds', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-kb-'));
    dirs.push(dataDir);
    const port = await freePort();
    const child = spawn(process.execPath, ['--enable-source-maps', DIST_MAIN, 'serve'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: os.tmpdir(), HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', CALLPLANE_METRICS_PORT: '0', CALLPLANE_SIP_PORT: '0', DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (b) => { out += b; });
    child.stderr.on('data', (b) => { out += b; });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 30_000;
      while (!/"msg":"ready"/.test(out)) {
        assert.ok(Date.now() < deadline && child.exitCode === null, `not ready:\n${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const admin = /cpl_[A-Za-z0-9_-]{43}/.exec(out)![0];
      const base = `http://127.0.0.1:${port}/api/v2`;
      const api = async (method: string, p: string, body?: unknown, init: RequestInit = {}) => {
        const res = await fetch(`${base}${p}${p.includes('?') ? '&' : '?'}token=${admin}`, {
          method, ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }), ...init,
        });
        return { status: res.status, body: await res.json() as any };
      };
      const partner = (await api('GET', '/account')).body;
      const reseller = (await api('POST', `/createReseller?targetPartnerId=${partner.id}`, { resellerName: 'R' })).body.reseller;
      const org = (await api('POST', `/createOrganization?targetResellerId=${reseller.id}`, { orgName: 'O' })).body.organization;
      const kb = (await api('POST', `/kb/knowledgebase?targetAccountId=${org.id}`, { name: 'kb' })).body.knowledgeBase;
      const upload = (pdf: Buffer) => {
        const { payload, headers } = form('bomb.pdf', pdf, 'application/pdf');
        return api('POST', `/kb/knowledgebase/${kb.id}/documents/upload?targetAccountId=${org.id}`, undefined, { body: new Uint8Array(payload), headers });
      };

      // The built worker entry (.js) loads and refuses the bomb.
      const refused = await upload(textBomb(1_000_000, 8));
      assert.equal(refused.status, 413, JSON.stringify(refused.body));
      assert.match(refused.body.message, /characters/);

      // SIGTERM while one is being read: /healthz answers meanwhile; the read is stopped (503) and
      // the process exits cleanly, well before shutdown would be forced (15 s, exit code 1).
      const pending = upload(textBomb(1_000_000, 8)).catch((err: Error) => ({ status: 0, body: { message: err.message } }));
      await new Promise((r) => setTimeout(r, 300));
      const t0 = Date.now();
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.equal(health.status, 200);
      assert.ok(Date.now() - t0 < HEALTH_BOUND_MS, `/healthz took ${Date.now() - t0} ms`);
      const t1 = Date.now();
      child.kill('SIGTERM');
      const code = await within(exited, 20_000, () => 'timeout' as const);
      assert.equal(code, 0, `exit ${String(code)}; output:\n${out.slice(-3000)}`);
      assert.ok(Date.now() - t1 < 10_000, `stopped after ${Date.now() - t1} ms`);
      const answer = await pending;
      assert.equal(answer.status, 503, JSON.stringify(answer.body));
      assert.match(answer.body.message, /shutting down/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
