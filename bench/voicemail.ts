// Voicemail detection, measured (docs/performance.md, "Voicemail detection"): the generated set
// (test/helpers/voicemail-audio.ts: espeak-ng machine greetings in four voices followed by
// synthesized beeps, and people answering) goes through the SIP audio path offline — G.711 μ-law
// and back, 20 ms frames — into the detector the voice session runs (src/speech/answering-machine.ts).
// Prints how many were right, how long after the greeting's end a machine was decided and its
// greeting's end found (when a message would start), how long after answer a person was decided,
// and the CPU per second of audio. `npm run bench:voicemail` (needs espeak-ng).
import { performance } from 'node:perf_hooks';
import { decodeG711, encodeG711 } from '../src/media/g711.ts';
import { AnsweringMachineDetector, type AmdEvent } from '../src/speech/answering-machine.ts';
import { voicemailSet, type Clip } from '../test/helpers/voicemail-audio.ts';
import { percentile } from './lib.ts';

const FRAME = 160;

export interface ClipResult {
  clip: Clip;
  verdict?: Extract<AmdEvent, { type: 'verdict' }>;
  end?: Extract<AmdEvent, { type: 'greetingEnd' }>;
  cpuMs: number;
}

/** One clip through μ-law and the detector, 20 ms at a time. */
export function runClip(clip: Clip): ClipResult {
  const line = decodeG711('PCMU', encodeG711('PCMU', clip.pcm));
  const d = new AnsweringMachineDetector();
  const r: ClipResult = { clip, cpuMs: 0 };
  const t0 = performance.now();
  for (let i = 0; i + FRAME <= line.length && !d.done; i += FRAME) {
    for (const ev of d.push(line.subarray(i, i + FRAME))) {
      if (ev.type === 'verdict') r.verdict = ev;
      else r.end = ev;
    }
  }
  r.cpuMs = performance.now() - t0;
  return r;
}

async function main(): Promise<void> {
  const clips = await voicemailSet();
  const results = clips.map(runClip);
  const machines = results.filter((r) => r.clip.truth === 'machine');
  const people = results.filter((r) => r.clip.truth === 'human');
  const right = (r: ClipResult) => r.verdict?.answeredBy === r.clip.truth;
  const line = (label: string, raw: number[]) => { const xs = [...raw].sort((a, b) => a - b); return xs.length ? `${label} p50 ${percentile(xs, 50)} ms, p95 ${percentile(xs, 95)} ms, max ${xs[xs.length - 1]} ms` : `${label}: none`; };
  for (const r of results.filter((x) => !right(x))) {
    console.log(`wrong: ${r.clip.name}: ${r.verdict?.answeredBy ?? 'nothing'} (${r.verdict?.reason ?? ''} at ${r.verdict?.atMs ?? '-'} ms; speech ended ${r.clip.speechEndMs} ms)`);
  }
  const machineRight = machines.filter(right);
  const total = results.filter(right).length;
  console.log(`voicemail detection on ${results.length} generated calls (${machines.length} machines, ${people.length} people), μ-law, 20 ms frames`);
  console.log(`right: ${total}/${results.length} (${((100 * total) / results.length).toFixed(1)} %); machines ${machineRight.length}/${machines.length}, people ${people.filter(right).length}/${people.length}`);
  const reasons = new Map<string, number>();
  for (const r of machineRight) reasons.set(r.verdict!.reason, (reasons.get(r.verdict!.reason) ?? 0) + 1);
  console.log(`machines decided by: ${[...reasons].map(([k, n]) => `${k} ${n}`).join(', ')}`);
  // Decided before the greeting ended counts as 0 (a negative lateness).
  console.log(line('machine decided, after the greeting\'s end:', machineRight.map((r) => Math.max(0, r.verdict!.atMs - r.clip.speechEndMs))));
  console.log(line('machine greeting end found (message starts), after the greeting\'s end:', machineRight.filter((r) => r.end).map((r) => r.end!.atMs - r.clip.speechEndMs)));
  console.log(line('machine greeting end found, after the beep\'s end:', machineRight.filter((r) => r.end && r.clip.beepEndMs).map((r) => r.end!.atMs - r.clip.beepEndMs!)));
  const beeps = machineRight.filter((r) => r.end?.reason === 'beep').length;
  console.log(`beeps heard: ${beeps}/${machines.length}`);
  console.log(line('person decided, after answer:', people.filter(right).map((r) => r.verdict!.atMs)));
  console.log(line('person decided, after their first words:', people.filter(right).map((r) => r.verdict!.atMs - r.clip.speechEndMs)));
  const audioS = results.reduce((s, r) => s + r.clip.pcm.length / 8000, 0);
  const cpu = results.reduce((s, r) => s + r.cpuMs, 0);
  console.log(`CPU: ${(cpu / audioS).toFixed(2)} ms per second of audio (${((cpu / audioS) / 50 * 1000).toFixed(1)} µs per 20 ms frame)`);
  // The same greetings with no beep after them (some machines have none): only the audio decides
  // here; the voice session's cue transcription ("leave a message"…) is not in this bench.
  const bare = (await voicemailSet({ noBeep: true })).filter((c) => c.truth === 'machine').map(runClip);
  const bareRight = bare.filter(right);
  console.log(`machines with no beep, from the audio alone: ${bareRight.length}/${bare.length} machine; ${line('decided after answer:', bareRight.map((r) => r.verdict!.atMs))}`);
}

if (process.argv[1]?.endsWith('voicemail.ts')) await main();
