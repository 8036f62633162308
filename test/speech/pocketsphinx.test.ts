// pocketsphinx from Debian, run for real on speech espeak-ng made: with a small grammar it hears
// the phrase and not its distractors, at espeak-ng's 22050 Hz, at its own 16 kHz and through the
// telephone (8 kHz, μ-law there and back, up to 16 kHz); the same audio always gives the same
// text; bounds are refused before anything runs; abort and timeout leave no process behind.
// Without espeak-ng, pocketsphinx or pocketsphinx-en-us they skip locally (saying which package to
// install) and fail under CI=true: test/helpers/system-tools.ts.
// @lane wall
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import alawmulaw from 'alawmulaw';
import { EspeakEngine } from '../../src/speech/espeak.ts';
import { parseOutput, phrasesToJsgf, PocketsphinxEngine } from '../../src/speech/pocketsphinx.ts';
import { resample } from '../../src/speech/resample.ts';
import { pcm16ToBytes } from '../../src/speech/wav.ts';
import { SpeechError, type SpeechGrammar } from '../../src/speech/types.ts';
import { childrenOf, processExists } from '../helpers/children.ts';
import { toolsSkip } from '../helpers/system-tools.ts';

const PHRASES = ['what are your opening hours', 'where are you located', 'I want to speak to a person', 'cancel my appointment', 'yes', 'no'];
const grammar: SpeechGrammar = { kind: 'phrases', phrases: PHRASES };
const tts = new EspeakEngine();
const stt = new PocketsphinxEngine();

/** espeak-ng's speech through a telephone line: 8 kHz, G.711 μ-law out and back. */
function telephone(pcm: Int16Array, rate: number): Int16Array {
  return alawmulaw.mulaw.decode(alawmulaw.mulaw.encode(resample(pcm, rate, 8000)));
}

// This process's own temporary folder (os.tmpdir() reads TMPDIR): the files other test files'
// recognitions have in flight at the same time are not this engine's leftovers.
const ownTemp = mkdtempSync(path.join(os.tmpdir(), 'callplane-sphinx-test-'));
process.env.TMPDIR = ownTemp;
after(() => rmSync(ownTemp, { recursive: true, force: true }));
const tempDirs = () => readdirSync(os.tmpdir()).filter((d) => d.startsWith('callplane-sphinx-'));

describe('pocketsphinx', { skip: toolsSkip('espeak-ng', 'pocketsphinx') }, () => {
  before(async () => {
    await tts.check();
    await stt.check();
  });

  it('hears "what are your opening hours" from espeak-ng among distractors, resampled 22050 → 16000 Hz', async () => {
    const s = await tts.synthesize('what are your opening hours', { language: 'en-US' });
    assert.equal(s.sampleRate, 22050);
    const wide = resample(s.pcm16, s.sampleRate, 16_000);
    const r = await stt.transcribe(wide, 16_000, { language: 'en-US', grammar });
    assert.equal(r.text, 'what are your opening hours');
    assert.equal(r.engine, 'pocketsphinx');
    assert.equal(r.confidence, undefined, 'a grammar gives no confidence');
    assert.equal(stt.offline, true);
    // Given espeak-ng's own rate it resamples by itself.
    assert.equal((await stt.transcribe(s.pcm16, s.sampleRate, { language: 'en-US', grammar })).text, 'what are your opening hours');
  });

  it('tells every phrase of the grammar from the others, in female and male voices', async () => {
    for (const gender of ['female', 'male'] as const) {
      for (const phrase of PHRASES) {
        const s = await tts.synthesize(phrase, { language: 'en-US', gender });
        const r = await stt.transcribe(s.pcm16, s.sampleRate, { language: 'en-US', grammar });
        assert.equal(r.text, phrase.toLowerCase(), `${gender}: ${phrase}`);
      }
    }
  });

  it('still hears it over the telephone: 8 kHz, μ-law encoded and decoded, up to 16 kHz', async () => {
    for (const gender of ['female', 'male'] as const) {
      const s = await tts.synthesize('what are your opening hours', { language: 'en-US', gender });
      const line = telephone(s.pcm16, s.sampleRate);
      assert.equal(line.length, Math.round(s.pcm16.length * 8000 / 22050));
      const up = resample(line, 8000, 16_000);
      assert.equal((await stt.transcribe(up, 16_000, { language: 'en-US', grammar })).text, 'what are your opening hours', gender);
      // The 8 kHz audio as it comes off the line, and as little-endian bytes.
      assert.equal((await stt.transcribe(line, 8000, { language: 'en-US', grammar })).text, 'what are your opening hours');
      assert.equal((await stt.transcribe(pcm16ToBytes(line), 8000, { language: 'en-US', grammar })).text, 'what are your opening hours');
    }
  });

  it('gives the same text for the same audio, and nothing for silence', async () => {
    const s = await tts.synthesize('cancel my appointment', { language: 'en-GB', gender: 'female' });
    const line = telephone(s.pcm16, s.sampleRate);
    const texts = new Set<string>();
    for (let i = 0; i < 3; i++) texts.add((await stt.transcribe(line, 8000, { language: 'en-US', grammar })).text);
    assert.deepEqual([...texts], ['cancel my appointment']);
    assert.equal((await stt.transcribe(new Int16Array(16_000), 8000, { language: 'en-US', grammar })).text, '');
    assert.equal((await stt.transcribe(new Int16Array(0), 8000, { language: 'en-US', grammar })).text, '');
  });

  it('decodes free speech with the language model when there is no grammar, with a confidence', async () => {
    const s = await tts.synthesize('what are your opening hours', { language: 'en-US' });
    const r = await stt.transcribe(s.pcm16, s.sampleRate, { language: 'en-US' });
    assert.match(r.text, /\bopening\b/);
    assert.ok(r.confidence !== undefined && r.confidence > 0 && r.confidence <= 1, `confidence ${r.confidence}`);
  });

  it('takes a JSGF grammar as it is', async () => {
    const s = await tts.synthesize('where are you located', { language: 'en-US' });
    const jsgf = '#JSGF V1.0;\ngrammar place;\npublic <q> = where are you ( located | open ) | what time is it ;\n';
    assert.equal((await stt.transcribe(s.pcm16, s.sampleRate, { language: 'en-US', grammar: { kind: 'jsgf', jsgf } })).text, 'where are you located');
  });

  it('refuses more than 30 s of audio, odd bytes, bad rates, other languages and bad grammars', async () => {
    const isInput = (re: RegExp) => (e: unknown) => e instanceof SpeechError && e.kind === 'input' && e.engine === 'pocketsphinx' && re.test(e.message);
    await assert.rejects(stt.transcribe(new Int16Array(8000 * 30 + 8), 8000, { language: 'en-US' }), isInput(/at most 30 s/));
    await assert.rejects(stt.transcribe(Buffer.alloc(3), 8000, { language: 'en-US' }), isInput(/odd number of bytes/));
    await assert.rejects(stt.transcribe(new Int16Array(10), 4000, { language: 'en-US' }), isInput(/sample rate/));
    await assert.rejects(stt.transcribe(new Int16Array(10), 8000, { language: 'de-DE' }), isInput(/English only.*pocketsphinx-en-us/));
    await assert.rejects(stt.transcribe(new Int16Array(10), 8000, { language: 'en-US', grammar: { kind: 'phrases', phrases: ['open 24 hours'] } }), isInput(/'24'.*spell numbers out/));
    await assert.rejects(stt.transcribe(new Int16Array(10), 8000, { language: 'en-US', grammar: { kind: 'phrases', phrases: [] } }), isInput(/1 to 500 phrases/));
    await assert.rejects(stt.transcribe(new Int16Array(10), 8000, { language: 'en-US', grammar: { kind: 'jsgf', jsgf: '#JSGF V1.0;\ngrammar a;\nimport <b.*>;\npublic <a> = yes;\n' } }), isInput(/import/));
    // A word the dictionary lacks is found by the program itself.
    const s = await tts.synthesize('yes', { language: 'en-US' });
    await assert.rejects(stt.transcribe(s.pcm16, s.sampleRate, { language: 'en-US', grammar: { kind: 'phrases', phrases: ['yes', 'flurbix zorp'] } }), isInput(/flurbix/));
    assert.deepEqual(tempDirs(), [], 'its temporary files are gone');
  });

  it('builds a grammar from phrases: lowercase, punctuation gone, duplicates once', () => {
    assert.equal(phrasesToJsgf(['Yes!', 'yes', "Don't know.", 'no, thanks']),
      "#JSGF V1.0;\ngrammar callplane;\npublic <utterance> = yes | don't know | no thanks ;\n");
  });

  it('reads the hypothesis and word lines it prints', () => {
    const out = 'what are your\n<s> 0.000 0.030 0.999200\nwhat 0.040 0.430 0.5\n<sil> 1.1 1.2 0.3\nare 0.440 0.680 0.25\n[NOISE] 1.0 1.1 0.1\nyour 0.7 0.8 0.75\n</s> 3.0 3.3 1.0\nhours\nhours(2) 1.0 1.5 1e-1\n';
    const r = parseOutput(out);
    assert.equal(r.text, 'what are your hours');
    assert.ok(Math.abs(r.confidence! - (0.5 + 0.25 + 0.75 + 0.1) / 4) < 1e-9);
    assert.deepEqual(parseOutput(''), { text: '' });
  });

  it('an abort kills pocketsphinx at once and the process is reaped', async () => {
    const s = await tts.synthesize('what are your opening hours on sunday and monday please. '.repeat(12), { language: 'en-US' });
    const long = s.pcm16.subarray(0, 29 * s.sampleRate);
    let pid = 0;
    const watched = new PocketsphinxEngine({ onSpawn: (p) => { pid = p; } });
    const ac = new AbortController();
    const p = watched.transcribe(long, s.sampleRate, { language: 'en-US', signal: ac.signal });
    while (pid === 0) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(processExists(pid), 'decoding 29 s without a grammar takes seconds: it is still running');
    const t0 = performance.now();
    ac.abort();
    await assert.rejects(p, (e: unknown) => e instanceof Error && e.name === 'AbortError');
    assert.ok(performance.now() - t0 < 1000, 'the abort answers at once');
    assert.equal(processExists(pid), false, 'the child exited and was reaped (no zombie)');
    assert.deepEqual(childrenOf().filter((c) => c.comm.startsWith('pocketsphinx')), []);
    assert.deepEqual(tempDirs(), []);
  });

  it('stops a transcription that runs past its time limit', async () => {
    const s = await tts.synthesize('what are your opening hours on sunday and monday please. '.repeat(12), { language: 'en-US' });
    const slow = new PocketsphinxEngine({ timeoutMs: 300 });
    await assert.rejects(slow.transcribe(s.pcm16.subarray(0, 29 * s.sampleRate), s.sampleRate, { language: 'en-US' }),
      (e: unknown) => e instanceof SpeechError && e.kind === 'timeout' && /300 ms/.test(e.message));
    assert.deepEqual(childrenOf().filter((c) => c.comm.startsWith('pocketsphinx')), []);
  });

  it('says which Debian package to install when the program or the model is missing', async () => {
    const noProgram = new PocketsphinxEngine({ command: 'pocketsphinx-not-installed-here' });
    await assert.rejects(noProgram.check(), (e: unknown) => e instanceof SpeechError && e.kind === 'unavailable' && /apt-get install pocketsphinx\b/.test(e.message));
    const noModel = new PocketsphinxEngine({ modelDir: '/nonexistent/model' });
    await assert.rejects(noModel.check(), (e: unknown) => e instanceof SpeechError && /apt-get install pocketsphinx-en-us/.test(e.message));
  });
});
