// The call lines already synthesized (the greeting first among them), so a call's first sound
// follows the answer at once instead of after a synthesis: 8 kHz PCM16 keyed by the text, the
// engine, the voice, the language, the format and whose key made it (the process's, shared by every
// organization, or one organization's own), least recently used first out past a bound in bytes. Filled on first use (a call that speaks a line not held yet synthesizes it and keeps it),
// so the first call of an agent's published greeting pays for it and every later one does not;
// a process restart starts empty. Only the call's own lines go through it (the welcome, the
// recording notice, "are you still there?"), never the model's replies. docs/voice.md, "The
// greeting cache".

/** 32 MB: about 35 minutes of 8 kHz PCM16, a few hundred greetings. */
export const GREETING_CACHE_BYTES = 32 * 1024 * 1024;

export interface GreetingKey {
  text: string;
  /** The engine's name (TextToSpeech.name). */
  engine: string;
  /** The engine's own voice id, or what picks its default (`female`, `male`). */
  voice: string;
  language: string;
  /** How the audio is kept: `pcm16/8000` (what calls carry). */
  format: string;
  /**
   * Whose key made it: `process` (the process's key or an offline engine: one audio for every
   * organization) or `organization <id>` (its own key: that organization's calls only). Absent: the process's.
   */
  keyOwner?: string;
}

export class GreetingCache {
  private readonly entries = new Map<string, Int16Array>();
  private held = 0;
  readonly stats = { hits: 0, misses: 0, evictions: 0 };

  constructor(readonly maxBytes: number = GREETING_CACHE_BYTES) {}

  /** Bytes held now. */
  get bytes(): number { return this.held; }
  get size(): number { return this.entries.size; }

  static keyOf(k: GreetingKey): string {
    return JSON.stringify([k.keyOwner ?? 'process', k.engine, k.voice, k.language, k.format, k.text]);
  }

  /** The audio held for `key` (now the most recently used), or undefined. */
  get(key: GreetingKey): Int16Array | undefined {
    const k = GreetingCache.keyOf(key);
    const pcm = this.entries.get(k);
    if (!pcm) return undefined;
    this.entries.delete(k);
    this.entries.set(k, pcm);
    return pcm;
  }

  /** Keeps `pcm` for `key`, dropping the least recently used past the bound; audio larger than the bound is not kept. */
  set(key: GreetingKey, pcm: Int16Array): void {
    if (pcm.byteLength > this.maxBytes) return;
    const k = GreetingCache.keyOf(key);
    const old = this.entries.get(k);
    if (old) {
      this.entries.delete(k);
      this.held -= old.byteLength;
    }
    this.entries.set(k, pcm);
    this.held += pcm.byteLength;
    for (const [oldest, audio] of this.entries) {
      if (this.held <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.held -= audio.byteLength;
      this.stats.evictions++;
    }
  }

  /** The audio for `key`: held, or made by `make` and kept (a failure is not kept). */
  async through(key: GreetingKey, make: () => Promise<Int16Array>): Promise<Int16Array> {
    const held = this.get(key);
    if (held) {
      this.stats.hits++;
      return held;
    }
    this.stats.misses++;
    const pcm = await make();
    if (pcm.length > 0) this.set(key, pcm);
    return pcm;
  }
}
