// The OpenAI audio routes of the fake model server (test/helpers/fake-llm.ts), for the test suite
// only: POST /v1/audio/transcriptions (multipart: the file and the form fields are recorded and
// checked) and POST /v1/audio/speech (JSON; answers a tone whose length follows the text, as raw
// PCM16 at 24 kHz for `pcm` or as a WAV at `speechWavRate` for `wav`, written in odd-sized pieces
// so clients must reassemble samples). Tests script answers: text, an error status, a delay, a
// stall in the middle of the audio.
import type http from 'node:http';
import { buildWav, pcm16ToBytes } from '../../src/speech/wav.ts';

export interface MultipartPart {
  name: string;
  filename?: string;
  contentType?: string;
  data: Buffer;
}

export interface RecordedAudio {
  route: 'transcriptions' | 'speech';
  headers: http.IncomingHttpHeaders;
  /** Transcriptions: the form's text fields (model, language, prompt, response_format). */
  fields: Record<string, string>;
  /** Transcriptions: the uploaded file. */
  file?: { filename?: string; contentType?: string; data: Buffer };
  /** Speech: the JSON body. */
  body?: { model: string; voice: string; input: string; response_format?: string; speed?: number; [k: string]: unknown };
  at: number;
}

export interface ScriptedAudio {
  /** Transcriptions: the text to answer (default `fake transcript of N bytes`). */
  text?: string;
  status?: number;
  delayMs?: number;
  /** Speech: stop writing for this long after the first piece of audio. */
  stallMs?: number;
}

export interface FakeAudioState {
  audioRequests: RecordedAudio[];
  audioScript: ScriptedAudio[];
  /** The rate of `wav` speech answers (default 22050: not OpenAI's 24000, so clients must read the header). */
  speechWavRate: number;
}

export function parseMultipart(body: Buffer, contentType: string | undefined): MultipartPart[] {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType ?? '');
  if (!m) throw new Error(`not multipart: ${contentType}`);
  const delimiter = Buffer.from(`--${m[1] ?? m[2]}`);
  const parts: MultipartPart[] = [];
  let pos = body.indexOf(delimiter);
  while (pos >= 0) {
    const start = pos + delimiter.length;
    if (body.subarray(start, start + 2).toString() === '--') break;
    const next = body.indexOf(delimiter, start);
    if (next < 0) break;
    // \r\n after the delimiter, headers, \r\n\r\n, the data, \r\n before the next delimiter.
    const part = body.subarray(start + 2, next - 2);
    const split = part.indexOf('\r\n\r\n');
    const headers = part.subarray(0, split).toString('utf8');
    const data = part.subarray(split + 4);
    const disposition = /content-disposition:[^\r\n]*/i.exec(headers)?.[0] ?? '';
    const name = /\bname="([^"]*)"/.exec(disposition)?.[1] ?? '';
    const filename = /\bfilename="([^"]*)"/.exec(disposition)?.[1];
    const type = /content-type:\s*([^\r\n]+)/i.exec(headers)?.[1];
    parts.push({ name, data, ...(filename !== undefined ? { filename } : {}), ...(type ? { contentType: type.trim() } : {}) });
    pos = next;
  }
  return parts;
}

/** A 440 Hz tone at a quarter of full scale: 40 ms per character of text, 0.2–3 s. */
export function fakeSpeechPcm(text: string, rate: number): Int16Array {
  const seconds = Math.min(3, Math.max(0.2, text.length * 0.04));
  const pcm = new Int16Array(Math.round(seconds * rate));
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(8192 * Math.sin((2 * Math.PI * 440 * i) / rate));
  return pcm;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function fail(res: http.ServerResponse, status: number) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message: `scripted failure ${status}`, type: 'server_error' } }));
}

/** Answers the audio routes; false when the request is for another route. */
export async function handleAudio(req: http.IncomingMessage, body: Buffer, res: http.ServerResponse, state: FakeAudioState): Promise<boolean> {
  if (req.method !== 'POST') return false;
  if (req.url === '/v1/audio/transcriptions') {
    const parts = parseMultipart(body, req.headers['content-type']);
    const fields: Record<string, string> = {};
    let file: RecordedAudio['file'];
    for (const p of parts) {
      if (p.filename !== undefined) file = { filename: p.filename, contentType: p.contentType, data: p.data };
      else fields[p.name] = p.data.toString('utf8');
    }
    state.audioRequests.push({ route: 'transcriptions', headers: req.headers, fields, ...(file ? { file } : {}), at: Date.now() });
    const step = state.audioScript.shift() ?? {};
    if (step.delayMs) await sleep(step.delayMs);
    if (step.status) {
      fail(res, step.status);
      return true;
    }
    if (!file || !fields.model) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'file and model are required', type: 'invalid_request_error' } }));
      return true;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ text: step.text ?? `fake transcript of ${file.data.length} bytes` }));
    return true;
  }
  if (req.url === '/v1/audio/speech') {
    const json = JSON.parse(body.toString('utf8')) as NonNullable<RecordedAudio['body']>;
    state.audioRequests.push({ route: 'speech', headers: req.headers, fields: {}, body: json, at: Date.now() });
    const step = state.audioScript.shift() ?? {};
    if (step.delayMs) await sleep(step.delayMs);
    const format = json.response_format ?? 'mp3';
    if (step.status || (format !== 'pcm' && format !== 'wav')) {
      fail(res, step.status ?? 400);
      return true;
    }
    const rate = format === 'pcm' ? 24_000 : state.speechWavRate;
    const bytes = format === 'pcm' ? pcm16ToBytes(fakeSpeechPcm(json.input, rate)) : buildWav(fakeSpeechPcm(json.input, rate), rate);
    res.writeHead(200, { 'content-type': format === 'pcm' ? 'audio/pcm' : 'audio/wav' });
    // Odd-sized pieces, the first smaller than a WAV header.
    const sizes = [21, 1001];
    let at = 0;
    for (let k = 0; at < bytes.length; k++) {
      const n = sizes[Math.min(k, sizes.length - 1)]!;
      res.write(bytes.subarray(at, at + n));
      at += n;
      if (k === 1 && step.stallMs) await sleep(step.stallMs);
      else await new Promise((r) => setImmediate(r));
      if (res.destroyed) return true;
    }
    res.end();
    return true;
  }
  return false;
}
