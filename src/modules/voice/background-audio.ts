// An agent's backgroundAudio on calls whose audio we carry: the file fetched from its http(s)
// URL through the same guard as every outbound request (no private addresses unless allowed),
// bounded in size and time, decoded in a worker thread (WAV or MP3, src/media/audio-file.ts), kept for a while per
// URL so a busy agent's calls do not fetch it each time, and mixed under the agent's voice at its
// gain, looped or once. docs/voice.md, "Background audio".
import { request, type Dispatcher } from 'undici';
import { readAudioFile } from '../../media/audio-file.ts';
import { FRAME_SAMPLES } from '../../media/pcm.ts';
import type { AudioBed } from '../../media/voice-transport.ts';
import { checkTargetUrl, type TargetPolicy } from '../../webhooks/ssrf.ts';
import type { BackgroundSetting } from '../agents/voice-settings.ts';

/** Largest file fetched. */
export const MAX_BACKGROUND_BYTES = 10 * 1024 * 1024;
const FETCH_TIMEOUT_MS = 10_000;
const CACHE_MS = 10 * 60_000;
const CACHE_ENTRIES = 16;

/** The bed a call mixes under the agent: the audio at the spec's gain, looped or played once. */
export function bedFrom(pcm: Int16Array, spec: Pick<BackgroundSetting, 'loop' | 'gain'>): AudioBed {
  const factor = 10 ** (spec.gain / 20);
  let pos = 0;
  return {
    next() {
      if (pos >= pcm.length) {
        if (!spec.loop) return null;
        pos = 0;
      }
      const frame = new Int16Array(FRAME_SAMPLES);
      for (let i = 0; i < FRAME_SAMPLES; i++) {
        if (pos >= pcm.length) {
          if (!spec.loop) break;
          pos = 0;
        }
        const v = Math.round(pcm[pos++]! * factor);
        frame[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
      }
      return frame;
    },
  };
}

export interface BackgroundAudioDeps {
  /** The guarded dispatcher of outbound requests (src/webhooks/ssrf.ts). */
  http: Dispatcher;
  policy: TargetPolicy;
  now: () => number;
}

/** Fetches and decodes background audio, keeping recent files per URL. */
export function backgroundAudio(deps: BackgroundAudioDeps) {
  const cache = new Map<string, { at: number; pcm: Promise<Int16Array> }>();

  async function fetchAudio(url: string): Promise<Int16Array> {
    const checked = checkTargetUrl(url, deps.policy);
    if (!checked.ok) throw new Error(`backgroundAudio: ${checked.message}`);
    const res = await request(checked.url, {
      method: 'GET', dispatcher: deps.http, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      headers: { accept: 'audio/wav, audio/mpeg, audio/*' },
    });
    if (res.statusCode !== 200) {
      await res.body.dump();
      throw new Error(`backgroundAudio: ${url} answered ${res.statusCode}`);
    }
    const declared = Number(res.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_BACKGROUND_BYTES) {
      await res.body.dump();
      throw new Error(`backgroundAudio: ${url} is larger than ${MAX_BACKGROUND_BYTES} bytes`);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > MAX_BACKGROUND_BYTES) {
        res.body.destroy();
        throw new Error(`backgroundAudio: ${url} is larger than ${MAX_BACKGROUND_BYTES} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
    return readAudioFile(Buffer.concat(chunks));
  }

  return {
    /** The file at `url` as 8 kHz PCM16 (from the cache when fetched in the last ten minutes). */
    load(url: string): Promise<Int16Array> {
      const now = deps.now();
      const hit = cache.get(url);
      if (hit && now - hit.at < CACHE_MS) return hit.pcm;
      const pcm = fetchAudio(url);
      cache.set(url, { at: now, pcm });
      // A failure is not kept: the next call tries again.
      pcm.catch(() => { if (cache.get(url)?.pcm === pcm) cache.delete(url); });
      while (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
      return pcm;
    },
  };
}

export type BackgroundAudio = ReturnType<typeof backgroundAudio>;
