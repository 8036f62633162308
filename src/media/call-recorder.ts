// One call's recording: a stereo WAV (PCM 16-bit, 8 kHz) with the caller on the left (the
// transport's `audio`) and the agent on the right (its `sent`, where the transport reports it).
// docs/voice.md, "Recording".
//
// Each channel's frames are placed by wall clock since the recording started, so a frame that
// is lost (or a transport that never reports one side) leaves silence where it would have been
// and does not shift that channel against the other. The audio is streamed to `<file>.part` as it
// goes (a window of a few seconds is held, flushed every FLUSH_MS once it is LAG_MS old); on stop
// the RIFF sizes are written and the file is renamed into place.
import fs from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { FRAME_SAMPLES, TELEPHONE_RATE, WAV_HEADER_BYTES, wavHeader } from './pcm.ts';
import type { VoiceTransport } from './voice-transport.ts';

const RATE = TELEPHONE_RATE;
const CHANNELS = 2;
/** How often the settled part of the window is appended to the file. */
const FLUSH_MS = 250;
/** How late a frame may arrive and still be placed; older samples are written out as they are. */
const LAG_MS = 300;
/** Samples per channel held before they are written (a frame far ahead of the clock past this is dropped). */
const WINDOW_SAMPLES = RATE * 3;
/**
 * A channel this far ahead of the wall clock (a burst) is pulled back to it. As long as a frame may
 * arrive late (LAG_MS): a sender that was held up (a busy event loop, a socket that queued packets)
 * catches up with its frames back to back, and those follow each other; pulling them back sooner
 * wrote the burst's later frames over its first ones.
 */
const MAX_AHEAD_SAMPLES = Math.round((LAG_MS * RATE) / 1000);
/** The longest recording the format allows with room to spare (RIFF sizes are 32-bit). */
export const RECORDING_MAX_SECONDS = 86_400;

export interface CallRecorderOptions {
  /** Where the finished WAV goes; the directory is created. */
  file: string;
  /** The recording stops here (the call goes on unrecorded). */
  maxMs: number;
  /** Milliseconds, monotonic (tests drive it); default performance.now. */
  clock?: () => number;
  log?: { warn(obj: object, msg: string): void };
}

export interface RecordingResult {
  file: string;
  /** Length of the recording in milliseconds. */
  durationMs: number;
  /** Size of the file in bytes, header included. */
  bytes: number;
  /** Whether the transport reported the agent's side at all (false: the right channel is silence). */
  agentChannel: boolean;
  /** Why it stopped: the call ended (`ended`), the limit (`max_duration`), or `stopped`. */
  reason: 'ended' | 'max_duration' | 'stopped';
}

/** One channel's writing position: the sample where its next frame goes. */
interface Channel { pos: number; frames: number }

export class CallRecorder {
  readonly file: string;
  readonly #temp: string;
  readonly #transport: VoiceTransport;
  readonly #clock: () => number;
  readonly #maxSamples: number;
  readonly #log: CallRecorderOptions['log'];
  readonly #start: number;
  /** Interleaved samples from sample `#flushed` on (WINDOW_SAMPLES per channel). */
  readonly #window = new Int16Array(WINDOW_SAMPLES * CHANNELS);
  #flushed = 0;
  readonly #channels: [Channel, Channel] = [{ pos: 0, frames: 0 }, { pos: 0, frames: 0 }];
  #handle: Promise<FileHandle | undefined>;
  #writes: Promise<void> = Promise.resolve();
  #dataBytes = 0;
  #failed: Error | undefined;
  #stopping: Promise<RecordingResult | null> | undefined;
  readonly #timer: NodeJS.Timeout;
  readonly #limit: NodeJS.Timeout;
  readonly #onAudio = (frame: Int16Array) => this.#place(0, frame);
  readonly #onSent = (frame: Int16Array) => this.#place(1, frame);
  readonly #onEnded = () => { void this.stop('ended'); };
  /** Resolves with the result once the recording has stopped (the call ended, the limit, or stop()). */
  readonly done: Promise<RecordingResult | null>;
  #resolveDone!: (r: RecordingResult | null) => void;

  constructor(transport: VoiceTransport, o: CallRecorderOptions) {
    if (!(o.maxMs > 0) || o.maxMs > RECORDING_MAX_SECONDS * 1000) throw new RangeError(`a recording lasts 1 ms to ${RECORDING_MAX_SECONDS} s (got ${o.maxMs} ms)`);
    this.file = o.file;
    this.#temp = `${o.file}.part`;
    this.#transport = transport;
    this.#clock = o.clock ?? (() => performance.now());
    this.#maxSamples = Math.floor((o.maxMs * RATE) / 1000);
    this.#log = o.log;
    this.#start = this.#clock();
    this.done = new Promise((r) => { this.#resolveDone = r; });
    const temp = this.#temp;
    this.#handle = (async () => {
      await fs.promises.mkdir(path.dirname(o.file), { recursive: true });
      const h = await fs.promises.open(temp, 'w', 0o640);
      // Sizes are filled in on stop; until then the header says "empty".
      await h.write(wavHeader(RATE, CHANNELS, 0), 0, WAV_HEADER_BYTES, 0);
      return h;
    })().catch((err: Error) => { this.#fail(err); return undefined; });
    transport.on('audio', this.#onAudio);
    transport.on('sent', this.#onSent);
    transport.on('ended', this.#onEnded);
    this.#timer = setInterval(() => this.#flush(this.#now() - Math.round((LAG_MS * RATE) / 1000)), FLUSH_MS);
    this.#limit = setTimeout(() => { void this.stop('max_duration'); }, o.maxMs);
    // The flush timer holds nothing open; the limit does, as the call it records does.
    this.#timer.unref();
  }

  /** Samples since the recording started, by the clock. */
  #now(): number {
    return Math.floor(((this.#clock() - this.#start) * RATE) / 1000);
  }

  /**
   * Places a frame that has just arrived. Its slot is where the clock says it began; the channel's
   * position follows frame after frame, and moves to the slot when the frame came a whole frame
   * or more after it (frames were lost: silence stays in between) or when the channel ran ahead
   * of the clock (a burst).
   */
  #place(side: 0 | 1, frame: Int16Array): void {
    if (this.#stopping || frame.length === 0 || frame.length > RATE) return;
    const ch = this.#channels[side];
    ch.frames++;
    const slot = Math.max(0, this.#now() - frame.length);
    if (slot - ch.pos >= FRAME_SAMPLES || ch.pos - slot > MAX_AHEAD_SAMPLES) ch.pos = slot;
    const at = ch.pos;
    ch.pos += frame.length;
    // Too late (already written out) or past the limit: those samples are left out.
    const from = Math.max(at, this.#flushed);
    const to = Math.min(at + frame.length, this.#maxSamples);
    // Far ahead of the flush timer (a stalled timer, a clock that jumped): half the window out at once.
    if (to > this.#flushed + WINDOW_SAMPLES) this.#flush(to - WINDOW_SAMPLES / 2);
    for (let s = from; s < to; s++) this.#window[(s - this.#flushed) * CHANNELS + side] = frame[s - at]!;
  }

  /** Appends the window up to sample `upTo` (exclusive) to the file and slides the window on. */
  #flush(upTo: number): void {
    const end = Math.min(upTo, this.#maxSamples, this.#flushed + WINDOW_SAMPLES);
    const n = end - this.#flushed;
    if (n <= 0) return;
    const chunk = Buffer.alloc(n * CHANNELS * 2);
    for (let i = 0; i < n * CHANNELS; i++) chunk.writeInt16LE(this.#window[i]!, i * 2);
    this.#window.copyWithin(0, n * CHANNELS);
    this.#window.fill(0, (WINDOW_SAMPLES - n) * CHANNELS);
    this.#flushed = end;
    const offset = WAV_HEADER_BYTES + this.#dataBytes;
    this.#dataBytes += chunk.length;
    this.#writes = this.#writes.then(async () => {
      const h = await this.#handle;
      if (!h || this.#failed) return;
      await h.write(chunk, 0, chunk.length, offset);
    }).catch((err: Error) => this.#fail(err));
  }

  #fail(err: Error): void {
    if (this.#failed) return;
    this.#failed = err;
    this.#log?.warn({ file: this.file, err: err.message }, 'call recording failed; the call goes on unrecorded');
  }

  /**
   * Stops recording (idempotent): writes what is held, fills in the sizes and renames the file into
   * place. Null when the recording could not be written (the partial file is removed).
   */
  stop(reason: RecordingResult['reason'] = 'stopped'): Promise<RecordingResult | null> {
    this.#stopping ??= (async () => {
      clearInterval(this.#timer);
      clearTimeout(this.#limit);
      this.#transport.off('audio', this.#onAudio);
      this.#transport.off('sent', this.#onSent);
      this.#transport.off('ended', this.#onEnded);
      // Everything up to now, or to where a channel has got, within the limit.
      const end = Math.min(this.#maxSamples, Math.max(this.#now(), ...this.#channels.map((c) => c.pos)));
      while (this.#flushed < end && !this.#failed) this.#flush(end);
      await this.#writes;
      const h = await this.#handle;
      let result: RecordingResult | null = null;
      if (h) {
        try {
          if (!this.#failed) await h.write(wavHeader(RATE, CHANNELS, this.#dataBytes), 0, WAV_HEADER_BYTES, 0);
          await h.close();
          if (!this.#failed) {
            await fs.promises.rename(this.#temp, this.file);
            result = {
              file: this.file, durationMs: Math.round((this.#flushed * 1000) / RATE), bytes: WAV_HEADER_BYTES + this.#dataBytes,
              agentChannel: this.#channels[1].frames > 0, reason,
            };
          }
        } catch (err) {
          this.#fail(err as Error);
        }
      }
      if (!result) await fs.promises.rm(this.#temp, { force: true }).catch(() => {});
      this.#resolveDone(result);
      return result;
    })();
    return this.#stopping;
  }
}
