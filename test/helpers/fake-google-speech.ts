// A stand-in for Google Cloud Speech-to-Text v1 on loopback: a gRPC server (@grpc/grpc-js) built
// from the proto the official client ships (@google-cloud/speech's
// build/protos/google/cloud/speech/v1/cloud_speech.proto, with google-gax's common protos), for
// tests through the official client pointed at it (an insecure channel: CALLPLANE_GOOGLE_SPEECH_URL
// http://127.0.0.1:<port>).
//
// - Credentials: every call's `authorization` metadata must be `Bearer <JWT>`, a self-signed JWT
//   (RS256) of a service account the double knows (`makeServiceAccount` writes the standard
//   key file, the one GOOGLE_APPLICATION_CREDENTIALS names): signature checked with the account's
//   public key, `iss`/`sub` its email, `kid` its key id, not expired. Otherwise UNAUTHENTICATED;
//   an account marked `denied` gets PERMISSION_DENIED.
// - `StreamingRecognize`: the first message must be `streaming_config`, every later one
//   `audio_content` (at most MAX_CHUNK_BYTES each); otherwise INVALID_ARGUMENT. The audio is
//   decoded (LINEAR16 or MULAW at the config's rate) and speech is found by energy in audio time
//   (10 ms blocks), so results follow what was actually sent: SPEECH_ACTIVITY_BEGIN (when
//   enable_voice_activity_events) as speech starts, interim results every INTERIM_EVERY_S of
//   speech (when interim_results), and once the audio has been quiet for `endSilenceMs`,
//   SPEECH_ACTIVITY_END followed by the final result (is_final), the order Google's docs give
//   ("usually returned before the transcription results"). A half-close finalizes what is being
//   heard (no SPEECH_ACTIVITY_END: the stream closed before speech ended) and ends the call OK.
//   Google's limits: a call older than `maxStreamMs` ends with OUT_OF_RANGE ("Exceeded maximum
//   allowed stream duration"); no audio for `audioTimeoutMs` ends it with OUT_OF_RANGE ("Audio
//   Timeout Error").
// - `Recognize`: one utterance (LINEAR16 or MULAW), answered with the next scripted words when
//   it holds speech.
//
// The words of each utterance heard are the next of `hear` (a test's script), else
// `utterance <n>`. Every call is recorded (metadata, config, audio messages and bytes, what was
// sent, how it ended), and each next call can be told (`plan`, in order) to send its response
// headers late, hold its results back after the first audio, or fail with UNAVAILABLE (what a
// client sees when the connection is lost) after a number of audio messages.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { decodeG711 } from '../../src/media/g711.ts';
import { pcm16FromBytes } from '../../src/media/pcm.ts';

/** A 10 ms block louder than this (RMS) is speech. */
const SPEECH_RMS = 300;
/** Interim results every this much speech (audio time). */
const INTERIM_EVERY_S = 0.25;
/** The most audio one request may carry (Google's documented chunk limit for streaming). */
export const MAX_CHUNK_BYTES = 25_600;
const MAX_KEPT_AUDIO = 4 * 1024 * 1024;

export interface CallPlan {
  /** Send the response headers this long after the call came (default at once). */
  headersDelayMs?: number;
  /** Hold every response back until this long after the first audio message. */
  firstResultDelayMs?: number;
  /** End the call with UNAVAILABLE on receiving this audio message. */
  dropAfterMessages?: number;
}

export interface StreamingCallRecord {
  authorization: string | undefined;
  /** The JWT's claims when it was read (the token itself is not kept). */
  claims?: Record<string, unknown>;
  userAgent: string | undefined;
  /** The streaming_config as the client sent it (proto-loader's camelCase, enums as names). */
  config?: Record<string, unknown>;
  audioMessages: number;
  bytes: number;
  largestMessage: number;
  audio: Buffer[];
  /** Responses sent, in order. */
  sent: Array<Record<string, unknown>>;
  startedAt: number;
  /** How the call ended: the status code sent, or cancelled by the client; halfClosed when the client ended its side first. */
  ended?: { code: number; details: string; by: 'server' | 'client' };
  halfClosed: boolean;
}

export interface RecognizeRecord {
  authorization: string | undefined;
  config?: Record<string, unknown>;
  bytes: number;
}

export interface ServiceAccount {
  /** The key file (the standard service-account JSON). */
  file: string;
  email: string;
  keyId: string;
  publicKey: crypto.KeyObject;
}

export interface FakeGoogleSpeech {
  /** host:port. */
  address: string;
  /** http://host:port: an insecure channel. */
  url: string;
  streams: StreamingCallRecord[];
  recognizes: RecognizeRecord[];
  /** What the next utterances say, in order. */
  hear: string[];
  /** How each next streaming call behaves, in order. */
  plan: CallPlan[];
  /** Silence after speech that ends an utterance (default 400 ms of audio). */
  endSilenceMs: number;
  /** Google ends a stream older than this (default 305 s). */
  maxStreamMs: number;
  /** Google ends a stream that got no audio for this long (default 10 s). */
  audioTimeoutMs: number;
  /** Accepts the account's self-signed tokens; `denied` answers PERMISSION_DENIED. */
  trust(account: ServiceAccount, opts?: { denied?: boolean }): void;
  close(): Promise<void>;
}

/** Writes a service-account key file (a fresh RSA key) into `dir`, as Google's console makes them. */
export function makeServiceAccount(dir: string, name = 'callplane-test'): ServiceAccount {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyId = crypto.randomBytes(20).toString('hex');
  const email = `${name}@callplane-test.iam.gserviceaccount.com`;
  const file = path.join(dir, `${name}.json`);
  fs.writeFileSync(file, JSON.stringify({
    type: 'service_account',
    project_id: 'callplane-test',
    private_key_id: keyId,
    private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
    client_email: email,
    client_id: '100000000000000000001',
    auth_uri: 'https://accounts.google.com/o/oauth2/auth',
    token_uri: 'https://oauth2.googleapis.com/token',
    universe_domain: 'googleapis.com',
  }, null, 2), { mode: 0o600 });
  return { file, email, keyId, publicKey };
}

const require = createRequire(import.meta.url);

function loadSpeechService(): grpc.ServiceDefinition {
  const speechProtos = path.resolve(path.dirname(require.resolve('@google-cloud/speech')), '../protos');
  const gaxProtos = path.resolve(path.dirname(require.resolve('google-gax')), '../protos');
  const def = protoLoader.loadSync('google/cloud/speech/v1/cloud_speech.proto', {
    includeDirs: [speechProtos, gaxProtos], keepCase: false, longs: String, enums: String, defaults: false, oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as { google: { cloud: { speech: { v1: { Speech: { service: grpc.ServiceDefinition } } } } } };
  return pkg.google.cloud.speech.v1.Speech.service;
}

function loud(pcm: Int16Array, from: number, to: number): boolean {
  let sum = 0;
  for (let i = from; i < to; i++) sum += pcm[i]! * pcm[i]!;
  return Math.sqrt(sum / Math.max(1, to - from)) > SPEECH_RMS;
}

const duration = (s: number) => ({ seconds: String(Math.floor(s)), nanos: Math.round((s % 1) * 1e9) });

function statusError(code: grpc.status, details: string): grpc.ServiceError {
  return Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() });
}

export async function startFakeGoogleSpeech(): Promise<FakeGoogleSpeech> {
  const accounts = new Map<string, { account: ServiceAccount; denied: boolean }>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
    return t;
  };
  const cancel = (t: NodeJS.Timeout | undefined) => {
    if (!t) return;
    clearTimeout(t);
    timers.delete(t);
  };
  let utterances = 0;
  const server = new grpc.Server();
  const fake: FakeGoogleSpeech = {
    address: '', url: '', streams: [], recognizes: [], hear: [], plan: [], endSilenceMs: 400, maxStreamMs: 305_000, audioTimeoutMs: 10_000,
    trust(account, opts = {}) {
      accounts.set(account.email, { account, denied: opts.denied === true });
    },
    close: async () => {
      for (const t of timers) clearTimeout(t);
      server.forceShutdown();
      await Promise.resolve();
    },
  };
  const nextWords = () => fake.hear.shift() ?? `utterance ${++utterances}`;

  /** The refusal for a call's metadata, or its token's claims when it is accepted. */
  function authorize(md: grpc.Metadata): { error: grpc.ServiceError } | { claims: Record<string, unknown> } {
    const unauthenticated = statusError(grpc.status.UNAUTHENTICATED,
      'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.');
    const header = md.get('authorization')[0];
    const m = typeof header === 'string' ? /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/.exec(header) : null;
    if (!m) return { error: unauthenticated };
    let head: Record<string, unknown>;
    let claims: Record<string, unknown>;
    try {
      head = JSON.parse(Buffer.from(m[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
      claims = JSON.parse(Buffer.from(m[2]!, 'base64url').toString('utf8')) as Record<string, unknown>;
    } catch {
      return { error: unauthenticated };
    }
    const known = typeof claims.iss === 'string' ? accounts.get(claims.iss) : undefined;
    if (!known || head.alg !== 'RS256' || head.kid !== known.account.keyId || claims.sub !== claims.iss) return { error: unauthenticated };
    const signed = crypto.verify('sha256', Buffer.from(`${m[1]}.${m[2]}`), known.account.publicKey, Buffer.from(m[3]!, 'base64url'));
    if (!signed || typeof claims.exp !== 'number' || claims.exp * 1000 < Date.now()) return { error: unauthenticated };
    if (known.denied) {
      return { error: statusError(grpc.status.PERMISSION_DENIED, `Permission 'speech.recognize' denied for ${known.account.email} (or it may not exist).`) };
    }
    return { claims };
  }

  function audioFormat(config: Record<string, unknown> | undefined): { encoding: 'LINEAR16' | 'MULAW'; rate: number } | string {
    const encoding = config?.encoding;
    const rate = Number(config?.sampleRateHertz);
    if (encoding !== 'LINEAR16' && encoding !== 'MULAW') return `Invalid recognition 'config': encoding ${String(encoding)} is not served here.`;
    if (!Number.isInteger(rate) || rate < 8000 || rate > 48_000) return 'Invalid recognition \'config\': sample_rate_hertz must be 8000–48000.';
    if (typeof config?.languageCode !== 'string' || config.languageCode === '') return 'Invalid recognition \'config\': language_code is required.';
    return { encoding, rate };
  }

  const decode = (encoding: 'LINEAR16' | 'MULAW', data: Buffer) => (encoding === 'MULAW' ? decodeG711('PCMU', data) : pcm16FromBytes(data));

  function streamingRecognize(call: grpc.ServerDuplexStream<Record<string, unknown>, Record<string, unknown>>): void {
    const md = call.metadata;
    const auth = md.get('authorization')[0];
    const record: StreamingCallRecord = {
      authorization: typeof auth === 'string' ? auth : undefined,
      userAgent: md.get('x-goog-api-client')[0] as string | undefined,
      audioMessages: 0, bytes: 0, largestMessage: 0, audio: [], sent: [], startedAt: Date.now(), halfClosed: false,
    };
    fake.streams.push(record);
    const plan = fake.plan.shift() ?? {};
    const checked = authorize(md);
    let over = false;
    const finish = (code: grpc.status, details: string) => {
      if (over) return;
      over = true;
      cancel(lifetime);
      cancel(idle);
      record.ended = { code, details, by: 'server' };
      if (code === grpc.status.OK) call.end();
      else call.emit('error', statusError(code, details));
    };
    call.on('cancelled', () => {
      if (over) return;
      over = true;
      cancel(lifetime);
      cancel(idle);
      record.ended = { code: grpc.status.CANCELLED, details: 'cancelled by the client', by: 'client' };
    });
    if ('error' in checked) {
      record.ended = { code: checked.error.code, details: checked.error.details, by: 'server' };
      over = true;
      call.emit('error', checked.error);
      return;
    }
    record.claims = checked.claims;
    const sendHeaders = () => {
      if (!over) call.sendMetadata(new grpc.Metadata());
    };
    if (plan.headersDelayMs) later(plan.headersDelayMs, sendHeaders);
    else sendHeaders();
    const lifetime = later(fake.maxStreamMs, () => finish(grpc.status.OUT_OF_RANGE, `Exceeded maximum allowed stream duration of ${Math.round(fake.maxStreamMs / 1000)} seconds.`));
    let idle: NodeJS.Timeout | undefined;
    const touch = () => {
      cancel(idle);
      idle = later(fake.audioTimeoutMs, () => finish(grpc.status.OUT_OF_RANGE, 'Audio Timeout Error: Long duration elapsed without audio. Audio should be sent close to real time.'));
    };
    touch();

    let format: { encoding: 'LINEAR16' | 'MULAW'; rate: number } | undefined;
    let language = '';
    let interim = false;
    let vadEvents = false;
    let holdUntil: number | undefined;
    const held: Array<() => void> = [];
    const send = (msg: Record<string, unknown>) => {
      const go = () => {
        if (over) return;
        record.sent.push(msg);
        call.write(msg);
      };
      const wait = holdUntil === undefined ? 0 : holdUntil - Date.now();
      if (wait <= 0 && held.length === 0) return go();
      held.push(go);
      if (held.length === 1) later(Math.max(0, wait), () => { for (const h of held.splice(0)) h(); });
    };
    let carry = new Int16Array(0);
    let samples = 0;
    let speaking = false;
    let segStart = 0;
    let lastLoud = 0;
    let lastInterim = 0;
    let words = '';
    const now = () => samples / (format?.rate ?? 8000);
    const event = (type: string) => {
      if (vadEvents) send({ speechEventType: type, speechEventTime: duration(now()) });
    };
    const result = (transcript: string, isFinal: boolean) => send({
      results: [{
        alternatives: [{ transcript, confidence: isFinal ? 0.93 : 0 }], isFinal, stability: isFinal ? 0 : 0.6,
        resultEndTime: duration(isFinal ? lastLoud : now()), languageCode: language.toLowerCase(),
      }],
      speechEventType: 'SPEECH_EVENT_UNSPECIFIED',
    });
    const partial = (text: string, spokenS: number) => {
      const all = text.split(' ');
      return all.slice(0, Math.min(all.length - 1, Math.max(1, Math.floor(spokenS / 0.3)))).join(' ');
    };
    const block = (isLoud: boolean) => {
      const t = now();
      if (isLoud) {
        lastLoud = t;
        if (!speaking) {
          speaking = true;
          segStart = t;
          lastInterim = t;
          words = nextWords();
          event('SPEECH_ACTIVITY_BEGIN');
        }
      }
      if (!speaking) return;
      if (interim && t - lastInterim >= INTERIM_EVERY_S) {
        lastInterim = t;
        result(partial(words, t - segStart), false);
      }
      if (!isLoud && t - lastLoud >= fake.endSilenceMs / 1000) {
        speaking = false;
        event('SPEECH_ACTIVITY_END');
        result(words, true);
      }
    };

    call.on('data', (req: Record<string, unknown>) => {
      if (over) return;
      if (record.config === undefined) {
        const sc = req.streamingConfig as Record<string, unknown> | undefined;
        if (!sc || req.audioContent !== undefined) return finish(grpc.status.INVALID_ARGUMENT, 'The first StreamingRecognizeRequest must contain a streaming_config.');
        record.config = sc;
        const f = audioFormat(sc.config as Record<string, unknown> | undefined);
        if (typeof f === 'string') return finish(grpc.status.INVALID_ARGUMENT, f);
        format = f;
        language = String((sc.config as Record<string, unknown>).languageCode);
        interim = sc.interimResults === true;
        vadEvents = sc.enableVoiceActivityEvents === true;
        return;
      }
      const data = req.audioContent as Buffer | undefined;
      if (!Buffer.isBuffer(data) || req.streamingConfig !== undefined) return finish(grpc.status.INVALID_ARGUMENT, 'Only the first StreamingRecognizeRequest may contain a streaming_config; the others carry audio_content.');
      record.audioMessages++;
      record.bytes += data.length;
      record.largestMessage = Math.max(record.largestMessage, data.length);
      if (record.bytes <= MAX_KEPT_AUDIO) record.audio.push(Buffer.from(data));
      if (data.length > MAX_CHUNK_BYTES) return finish(grpc.status.INVALID_ARGUMENT, `Request audio_content is ${data.length} bytes; at most ${MAX_CHUNK_BYTES}.`);
      holdUntil ??= Date.now() + (plan.firstResultDelayMs ?? 0);
      touch();
      if (plan.dropAfterMessages !== undefined && record.audioMessages >= plan.dropAfterMessages) {
        return finish(grpc.status.UNAVAILABLE, 'Connection dropped');
      }
      const pcm = decode(format!.encoding, data);
      const all = new Int16Array(carry.length + pcm.length);
      all.set(carry);
      all.set(pcm, carry.length);
      const n = format!.rate / 100;
      let i = 0;
      for (; i + n <= all.length; i += n) {
        samples += n;
        block(loud(all, i, i + n));
      }
      carry = all.slice(i);
    });
    call.on('end', () => setImmediate(() => {
      // A cancel also ends the request stream: it is the client's cancel, not a half-close.
      if (over || call.cancelled) return;
      record.halfClosed = true;
      if (speaking) {
        speaking = false;
        result(words, true);
      }
      // What is held back goes first; then the call ends.
      send({ totalBilledTime: duration(Math.ceil(now() / 15) * 15), results: [], speechEventType: 'SPEECH_EVENT_UNSPECIFIED' });
      const end = () => finish(grpc.status.OK, 'OK');
      const wait = holdUntil === undefined ? 0 : holdUntil - Date.now();
      if (wait > 0 || held.length > 0) later(Math.max(0, wait) + 1, end);
      else end();
    }));
  }

  function recognize(call: grpc.ServerUnaryCall<Record<string, unknown>, Record<string, unknown>>, cb: grpc.sendUnaryData<Record<string, unknown>>): void {
    const auth = call.metadata.get('authorization')[0];
    const config = call.request.config as Record<string, unknown> | undefined;
    const content = (call.request.audio as { content?: Buffer } | undefined)?.content;
    const record: RecognizeRecord = { authorization: typeof auth === 'string' ? auth : undefined, config, bytes: content?.length ?? 0 };
    fake.recognizes.push(record);
    const checked = authorize(call.metadata);
    if ('error' in checked) return cb(checked.error);
    const f = audioFormat(config);
    if (typeof f === 'string') return cb(statusError(grpc.status.INVALID_ARGUMENT, f));
    if (!content) return cb(statusError(grpc.status.INVALID_ARGUMENT, 'RecognitionAudio needs content.'));
    const pcm = decode(f.encoding, content);
    const n = f.rate / 100;
    let speech = false;
    for (let i = 0; i + n <= pcm.length && !speech; i += n) speech = loud(pcm, i, i + n);
    const seconds = pcm.length / f.rate;
    cb(null, {
      results: speech ? [{ alternatives: [{ transcript: nextWords(), confidence: 0.91 }], resultEndTime: duration(seconds), languageCode: String(config?.languageCode).toLowerCase() }] : [],
      totalBilledTime: duration(Math.ceil(seconds)),
    });
  }

  server.addService(loadSpeechService(), {
    streamingRecognize,
    recognize,
    longRunningRecognize: (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb(statusError(grpc.status.UNIMPLEMENTED, 'not served by the double')),
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  });
  fake.address = `127.0.0.1:${port}`;
  fake.url = `http://${fake.address}`;
  return fake;
}
