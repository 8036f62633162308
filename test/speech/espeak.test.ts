// espeak-ng from Debian, run for real: audible speech of a plausible length at its own rate, the
// voice picked from a BCP-47 language and a gender, bounds refused before anything runs, and an
// abort that leaves no process behind. Without the espeak-ng package they skip locally (saying
// which package to install) and fail under CI=true: test/helpers/system-tools.ts.
// @lane wall
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { VOICES } from '../../src/modules/agents/catalog.ts';
import { EspeakEngine, espeakVoice } from '../../src/speech/espeak.ts';
import { MAX_SYNTHESIS_CHARS, SpeechError } from '../../src/speech/types.ts';
import { childrenOf } from '../helpers/children.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

const rms = (pcm: Int16Array) => Math.sqrt(pcm.reduce((s, v) => s + v * v, 0) / Math.max(1, pcm.length));

describe('espeak-ng', { skip: toolsSkip('espeak-ng') }, () => {
  const engine = new EspeakEngine();
  before(() => engine.check());

  it('speaks "what are your opening hours" as audible PCM16 at 22050 Hz, 1 to 4 seconds long', async () => {
    const r = await engine.synthesize('what are your opening hours', { language: 'en-US' });
    assert.equal(r.engine, 'espeak-ng');
    assert.equal(r.sampleRate, 22050);
    const seconds = r.pcm16.length / r.sampleRate;
    assert.ok(seconds >= 1 && seconds <= 4, `duration ${seconds} s`);
    const level = rms(r.pcm16);
    assert.ok(level > 500, `RMS ${level} is audible`);
    assert.equal(engine.offline, true);
  });

  it('maps BCP-47 languages and genders to espeak-ng voices', () => {
    assert.equal(espeakVoice('en-US'), 'en-us');
    assert.equal(espeakVoice('en-US', { gender: 'female' }), 'en-us+f3');
    assert.equal(espeakVoice('en-GB', { gender: 'male' }), 'en-gb+m3');
    assert.equal(espeakVoice('es-MX', { gender: 'female' }), 'es-419+f3');
    assert.equal(espeakVoice('es-US'), 'es-419');
    assert.equal(espeakVoice('es-ES'), 'es');
    assert.equal(espeakVoice('fr-FR'), 'fr-fr');
    assert.equal(espeakVoice('de-DE', { gender: 'female' }), 'de+f3');
    assert.equal(espeakVoice('it-IT'), 'it');
    assert.equal(espeakVoice('en_us'), 'en-us');
    assert.equal(espeakVoice('en-US', { gender: 'male', voice: 'klatt' }), 'en-us+klatt', 'a named variant wins over the gender');
    assert.throws(() => espeakVoice('en-US', { voice: '-x --stdin' }), SpeechError);
    assert.throws(() => espeakVoice('english'), SpeechError);
  });

  it('speaks every catalog voice (agentVoice: its language and gender), and the female voice is higher', async () => {
    for (const v of VOICES) {
      const r = await engine.synthesize('hello, one two three', { language: v.lang, gender: v.gender });
      assert.ok(r.pcm16.length > r.sampleRate * 0.5 && rms(r.pcm16) > 300, v.id);
    }
    // Zero crossings per second rise with the pitch (and the formants) of the voice.
    const crossings = (pcm: Int16Array) => pcm.reduce((n, v, i) => n + (i > 0 && (v >= 0) !== (pcm[i - 1]! >= 0) ? 1 : 0), 0) / pcm.length;
    const f = await engine.synthesize('what are your opening hours', { language: 'en-US', gender: 'female' });
    const m = await engine.synthesize('what are your opening hours', { language: 'en-US', gender: 'male' });
    assert.ok(crossings(f.pcm16) > crossings(m.pcm16), 'the female variant is higher');
  });

  it('speaks faster at a higher speed', async () => {
    const slow = await engine.synthesize('what are your opening hours on sunday', { language: 'en-US', speed: 0.75 });
    const fast = await engine.synthesize('what are your opening hours on sunday', { language: 'en-US', speed: 1.5 });
    assert.ok(fast.pcm16.length < slow.pcm16.length * 0.8, `${fast.pcm16.length} vs ${slow.pcm16.length}`);
  });

  it('reads text starting with "-" as text, not as an option, and gives no samples for blank text', async () => {
    const r = await engine.synthesize('--version -v xx', { language: 'en-US' });
    assert.ok(r.pcm16.length > r.sampleRate * 0.5);
    const blank = await engine.synthesize('  \n\t ', { language: 'en-US' });
    assert.equal(blank.pcm16.length, 0);
  });

  it('refuses text past the bound, a bad speed and an unknown language, naming the engine', async () => {
    await assert.rejects(engine.synthesize('a'.repeat(MAX_SYNTHESIS_CHARS + 1), { language: 'en-US' }),
      (e: unknown) => e instanceof SpeechError && e.kind === 'input' && /espeak-ng/.test(e.message) && /at most 2000/.test(e.message));
    // Exactly at the bound is spoken (about 100 s of audio).
    const long = await engine.synthesize('word '.repeat(MAX_SYNTHESIS_CHARS / 5), { language: 'en-US' });
    assert.ok(long.pcm16.length / long.sampleRate > 30);
    await assert.rejects(engine.synthesize('hi', { language: 'en-US', speed: 3 }), (e: unknown) => e instanceof SpeechError && e.kind === 'input');
    await assert.rejects(engine.synthesize('hi', { language: 'xx-YY' }), (e: unknown) => e instanceof SpeechError && e.kind === 'input' && /voice does not exist/.test(e.message));
  });

  it('an abort kills espeak-ng and nothing is left running or unreaped', async () => {
    const ac = new AbortController();
    const p = engine.synthesize('what are your opening hours '.repeat(60), { language: 'en-US', signal: ac.signal });
    // synthesize() has spawned the child by the time it returns its promise; it needs about
    // 100 ms for this text, and the abort comes now.
    const running = childrenOf().filter((c) => c.comm === 'espeak-ng');
    assert.equal(running.length, 1, 'espeak-ng is running');
    ac.abort();
    await assert.rejects(p, (e: unknown) => e instanceof Error && e.name === 'AbortError');
    assert.deepEqual(childrenOf().filter((c) => c.comm === 'espeak-ng'), []);
    // Aborted before it starts: refused at once.
    await assert.rejects(engine.synthesize('hi', { language: 'en-US', signal: AbortSignal.abort() }), (e: unknown) => e instanceof Error && e.name === 'AbortError');
  });

  it('says which Debian package to install when the program is missing', async () => {
    const missing = new EspeakEngine({ command: 'espeak-ng-not-installed-here' });
    await assert.rejects(missing.check(), (e: unknown) => e instanceof SpeechError && e.kind === 'unavailable' && /apt-get install espeak-ng/.test(e.message));
    await assert.rejects(missing.synthesize('hi', { language: 'en-US' }), /apt-get install espeak-ng/);
  });
});
