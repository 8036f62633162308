// Call recording end to end and offline, on the pattern of sip-voice.test.ts: sipp dials the
// agent, the test's own RTP end speaks to it (espeak-ng) and listens; with
// CALLPLANE_CALL_RECORDING=on the call's WAV must hold the caller on the left and the agent on the
// right (each channel cut into utterances by loudness and recognised with pocketsphinx and a
// grammar, in the order they were said), be served to the owning organization and its agent and
// to nobody else, carry the recording notice (autoRecordingNotification `always`) in the audio and
// the transcript, and be swept by maintenance past the retention or once its conversation is gone.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PortPool } from '../../src/media/port-pool.ts';
import { maintenanceJobs } from '../../src/maintenance.ts';
import { recordingStore } from '../../src/modules/voice/recordings.ts';
import { recordingNotice } from '../../src/modules/voice/sip-calls.ts';
import { messageRepo } from '../../src/modules/conversations/repository.ts';
import { roomKey } from '../../src/modules/conversations/present.ts';
import { forEachEngine } from '../helpers/engines.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';
import { startSipp, waitFor, type Sipp } from '../helpers/sip-peers.ts';
import { publishAgent, stt, tts, voicePeer } from '../helpers/voice-peer.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { within } from '../helpers/wait.ts';

const HOST = '127.0.0.1';
const CALLER = '127.0.0.7';
const exitOf = (sipp: Sipp, ms = 30_000) => within(sipp.exited, ms, () => 'still running');
const rms = (f: Int16Array) => Math.sqrt(f.reduce((s, x) => s + x * x, 0) / Math.max(1, f.length));
const loud = (f: Int16Array) => rms(f) > 300;

let llm: FakeLlm;
const env: Record<string, string> = {
  CALLPLANE_LLM_MODEL: 'fake-model', CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true', CALLPLANE_CALL_MAX_SECONDS: '60', CALLPLANE_CALL_RECORDING: 'on',
};
const portMin = 44_000 + 2 * crypto.randomInt(0, 2_500);
const testPorts = new PortPool({ portMin, portMax: portMin + 2 * 19 });
const PHRASES = ['this call is being recorded', 'hello there', 'this call is being recorded hello there', 'we open at nine', 'goodbye',
  'we open at nine goodbye', 'what are your opening hours'];

/** A stereo PCM16 WAV read back field by field: its format and its two channels. */
function readStereo(buf: Buffer) {
  assert.equal(buf.toString('latin1', 0, 4), 'RIFF');
  assert.equal(buf.readUInt32LE(4), buf.length - 8);
  assert.equal(buf.toString('latin1', 8, 16), 'WAVEfmt ');
  assert.deepEqual([buf.readUInt16LE(20), buf.readUInt16LE(22), buf.readUInt32LE(24), buf.readUInt16LE(34)], [1, 2, 8000, 16], 'PCM, stereo, 8 kHz, 16-bit');
  assert.equal(buf.toString('latin1', 36, 40), 'data');
  const n = buf.readUInt32LE(40) / 4;
  assert.equal(44 + n * 4, buf.length);
  const left = new Int16Array(n);
  const right = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    left[i] = buf.readInt16LE(44 + i * 4);
    right[i] = buf.readInt16LE(46 + i * 4);
  }
  return { left, right };
}

/** The audio without its runs of 40 or more samples (5 ms) of exact zero. */
function withoutDigitalSilence(pcm: Int16Array): Int16Array {
  const out = new Int16Array(pcm.length);
  let n = 0;
  for (let i = 0; i < pcm.length;) {
    let j = i;
    while (j < pcm.length && pcm[j] === 0) j++;
    if (j - i >= 40) i = j;
    else {
      for (; i < j; i++) out[n++] = 0;
      if (i < pcm.length) out[n++] = pcm[i++]!;
    }
  }
  return out.subarray(0, n);
}

const LEAD_FRAMES = 3;
const TRAIL_FRAMES = 10;
/**
 * A channel's utterances: runs of loud 20 ms frames, apart by at least `gapFrames` quiet ones. Each
 * is handed to the recogniser as the same audio however far into the call it was said and however
 * busy the machine was: the loud run with 60 ms of digital silence before it and 200 ms after
 * (pocketsphinx heard the agent's notice as the caller's question once 140–200 ms of the call's
 * quiet came before it, which failed about one run in three), and without the frames of digital
 * silence inside it, which the recorder leaves where a frame came late (a sender held up by a busy
 * loop; docs/voice.md, "Recording") — speech itself is never exactly zero for 5 ms.
 */
function utterances(pcm: Int16Array, gapFrames = 30): Array<{ from: number; to: number; pcm: Int16Array }> {
  const frames = Math.floor(pcm.length / 160);
  const out: Array<{ from: number; to: number; pcm: Int16Array }> = [];
  let start = -1;
  let lastLoud = -1;
  for (let i = 0; i <= frames; i++) {
    const isLoud = i < frames && loud(pcm.subarray(i * 160, (i + 1) * 160));
    if (isLoud) {
      if (start < 0) start = i;
      lastLoud = i;
    } else if (start >= 0 && (i - lastLoud > gapFrames || i === frames)) {
      // Short clicks are not speech.
      if (lastLoud - start >= 10) {
        const run = withoutDigitalSilence(pcm.subarray(start * 160, (lastLoud + 1) * 160));
        const padded = new Int16Array(run.length + (LEAD_FRAMES + TRAIL_FRAMES) * 160);
        padded.set(run, LEAD_FRAMES * 160);
        out.push({ from: start, to: lastLoud + 1, pcm: padded });
      }
      start = -1;
    }
  }
  return out;
}

const recognise = async (pcm: Int16Array) => (await stt.transcribe(pcm, 8000, { language: 'en-US', grammar: { kind: 'phrases', phrases: PHRASES } })).text;

describe('the recording notice', () => {
  it('is said always for `always`, for `true` (the default) only when the call is recorded, never for `false`', () => {
    const phrase = 'Calls are recorded for quality.';
    assert.equal(recordingNotice({ autoRecordingNotification: 'always', recordingNotificationPhrase: phrase }, false), phrase);
    assert.equal(recordingNotice({ autoRecordingNotification: 'true', recordingNotificationPhrase: phrase }, true), phrase);
    assert.equal(recordingNotice({ autoRecordingNotification: 'true', recordingNotificationPhrase: phrase }, false), undefined);
    assert.equal(recordingNotice({ autoRecordingNotification: 'false', recordingNotificationPhrase: phrase }, true), undefined);
    assert.equal(recordingNotice({}, true), 'This call is being recorded.', 'the defaults');
    assert.equal(recordingNotice({ autoRecordingNotification: 'always', recordingNotificationPhrase: '  ' }, false), 'This call is being recorded.');
  });
});

describe('call recording', { skip: toolsSkip('sipp', 'espeak-ng', 'pocketsphinx') }, () => {
  before(async () => {
    await tts.check();
    await stt.check();
    llm = await startFakeLlm();
    env.CALLPLANE_LLM_BASE_URL = llm.baseUrl;
  });
  after(async () => { await llm.close(); });

  forEachEngine('call recording', (h) => {
    const publish = (token: string, config: Record<string, unknown>) => publishAgent(h(), token, config);
    const fetchRecording = async (url: string, token: string) => {
      const res = await h().app.inject({ method: 'GET', url, query: { token } });
      return { status: res.statusCode, headers: res.headers, raw: res.rawPayload, body: res.body };
    };

    it('records a SIP call in stereo (the caller left, the agent right, aligned), announces it, and serves it to its organization only', async () => {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const called = await h().agent(o.id);
      const otherAgent = await h().agent(o.id);
      await publish(called.token, {
        welcomeMessage: 'Hello there.', speakingTimeout: 700, callerResponseTimeout: 60, actions: ['hangup'],
        autoRecordingNotification: 'always', recordingNotificationPhrase: 'This call is being recorded.',
      });
      assert.equal((await h().call('POST', '/api/v2/sip/ipWhitelist', { token: o.token, body: { ip: CALLER, label: 'PBX' } })).status, 201);
      const end = await voicePeer(testPorts);
      // When each of the agent's frames reached the caller, and when the caller began to ask: the
      // caller's own clock, against which the recording's alignment is checked.
      const arrivals: number[] = [];
      end.rtp.on('audio', () => arrivals.push(performance.now()));
      let askedAt: number;
      let answerHeardAfterMs: number | undefined;
      const sipp = await startSipp({
        host: CALLER, scenario: 'uac-voice.xml',
        vars: { to: `sip:camp${called.id}@127.0.0.1:${h().sip!.endpoint!.port}`, media_host: HOST, media_port: String(end.rtp.port) },
        extra: [`127.0.0.1:${h().sip!.endpoint!.port}`],
      });
      try {
        // The notice, then the greeting; then the caller asks and the agent answers; a key ends it.
        // (A second of quiet: on a busy machine the agent's sender can pause half a second mid-greeting.)
        await end.agentSpoke(0, 1000);
        llm.script.push({ text: 'We open at nine.' });
        const from = end.heard.length;
        await end.say('what are your opening hours');
        askedAt = performance.now();
        await end.agentSpoke(from + 50);
        const answered = end.heard.findIndex((f, i) => i >= from + 50 && loud(f));
        answerHeardAfterMs = arrivals[answered]! - askedAt;
        llm.script.push({ text: 'Goodbye.', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }] });
        end.rtp.sendDigits('5');
        assert.equal(await exitOf(sipp), 0, sipp.output());
      } finally {
        await sipp.stop();
        await end.rtp.close();
      }

      const db = h().database.db;
      // The recording is noted in the conversation's state once the call has ended.
      const c = await waitFor('the recording to be noted', async () => {
        const row = await db.selectFrom('conversations').selectAll().where('org_id', '=', o.id).where('channel', '=', 'sip').executeTakeFirst();
        return row?.ended_at != null && (JSON.parse(row.state) as { recording?: unknown }).recording ? row : undefined;
      }, 20_000);
      const state = JSON.parse(c.state) as { transport: string; speech: { offline: boolean }; recording: Record<string, unknown> };
      assert.equal(state.transport, 'sip', 'what was there stays');
      assert.equal(state.speech.offline, true);
      const file = path.join(h().config.dataDir, 'recordings', String(o.id), `${c.id}.wav`);
      assert.equal(state.recording.file, path.join('recordings', String(o.id), `${c.id}.wav`));
      assert.deepEqual([state.recording.agentChannel, state.recording.stoppedBy], [true, 'ended']);
      assert.deepEqual(state.recording.channels, { left: 'caller', right: 'agent' });
      const wav = fs.readFileSync(file);
      assert.equal(state.recording.bytes, wav.length);
      assert.equal(fs.existsSync(`${file}.part`), false);

      // Left: only the caller's question. Right: the notice and greeting, the answer, goodbye; in time order around it.
      const { left, right } = readStereo(wav);
      assert.ok(Math.abs(Number(state.recording.durationMs) - (left.length / 8)) <= 1);
      const callerSaid = utterances(left);
      const agentSaid = utterances(right);
      const heardLeft = await Promise.all(callerSaid.map((u) => recognise(u.pcm)));
      const heardRight = await Promise.all(agentSaid.map((u) => recognise(u.pcm)));
      if (process.env.VOICE_DEBUG) console.log(JSON.stringify({ answerHeardAfterMs, left: callerSaid.map((u, i) => [u.from, u.to, heardLeft[i]]), right: agentSaid.map((u, i) => [u.from, u.to, heardRight[i]]) }));
      assert.deepEqual(heardLeft, ['what are your opening hours'], `left: ${JSON.stringify(callerSaid.map((u) => [u.from, u.to]))}`);
      assert.equal(heardRight.join(' '), 'this call is being recorded hello there we open at nine goodbye', `right: ${JSON.stringify(agentSaid.map((u) => [u.from, u.to]))}`);
      // The answer and the goodbye may come close enough to be one utterance.
      const answer = agentSaid[heardRight.findIndex((t) => t.startsWith('we open at nine'))]!;
      const question = callerSaid[0]!;
      assert.ok(agentSaid[0]!.to <= question.from, 'the greeting ends before the caller asks');
      // The answer follows the question's end by the end-of-turn wait (speakingTimeout 700 ms) and
      // the turn, never before it; and the two channels share one time line: the answer starts as far
      // after the question's start in the file as the caller heard it after asking (within 400 ms:
      // the caller's audio reaches the recorder through the jitter buffer, and espeak's own lead-in).
      // How long the turn took is not this test's business (it grows with the machine's load).
      assert.ok(answer.from >= question.to + 30, `question ends at frame ${question.to}, answer starts at ${answer.from}`);
      const inFileMs = (answer.from - question.from) * 20;
      assert.ok(answerHeardAfterMs !== undefined);
      assert.ok(Math.abs(inFileMs - answerHeardAfterMs) <= 400, `the answer starts ${inFileMs} ms after the question in the file, ${Math.round(answerHeardAfterMs)} ms after it on the caller's clock`);
      // While the caller speaks, the agent's channel is quiet (and the other way round).
      assert.ok(rms(right.subarray(question.from * 160, question.to * 160)) < 100);
      assert.ok(rms(left.subarray(answer.from * 160, answer.to * 160)) < 100);

      // The notice is in the transcript, before the greeting.
      const transcript = await messageRepo.ofConversation(db, c.id);
      assert.deepEqual(transcript.slice(0, 2).map((m) => [m.direction, m.text, (JSON.parse(m.data ?? '{}') as { kind?: string }).kind]),
        [['outbound', 'This call is being recorded.', 'recording_notice'], ['outbound', 'Hello there.', 'welcome']]);

      // Served as audio/wav to the organization and to the agent whose call it was; 404 to anyone else.
      const room = await db.selectFrom('conversation_rooms').selectAll().where('id', '=', c.room_id).executeTakeFirstOrThrow();
      const url = `/api/v2/conversation/${encodeURIComponent(roomKey(room))}/${c.id}/recording`;
      const served = await fetchRecording(url, o.token);
      assert.equal(served.status, 200, served.body.slice(0, 200));
      assert.match(String(served.headers['content-type']), /^audio\/wav/);
      assert.equal(Number(served.headers['content-length']), wav.length);
      assert.ok(served.raw.equals(wav));
      assert.equal((await fetchRecording(url, called.token)).status, 200);
      const o2 = await h().organization(r.id);
      for (const token of [o2.token, otherAgent.token]) {
        const refused = await fetchRecording(url, token);
        assert.equal(refused.status, 404);
        assert.equal((JSON.parse(refused.body) as { success: boolean }).success, false);
      }
      // The transcript's own route is untouched by the extra one.
      assert.equal((await h().call('GET', `/api/v2/conversation/${encodeURIComponent(roomKey(room))}/${c.id}`, { token: o.token })).status, 200);

      // No recording: 404 in our envelope.
      fs.rmSync(file);
      const gone = await fetchRecording(url, o.token);
      assert.equal(gone.status, 404);
      assert.deepEqual(Object.keys(JSON.parse(gone.body) as object).slice(0, 2), ['success', 'message']);
    });

    it('maintenance deletes recordings past the retention, crashed partial files and those whose conversation is gone, and keeps the rest', async () => {
      const db = h().database.db;
      // A conversation that exists (the call above made it; the sweep only asks whether it exists).
      const c = await db.selectFrom('conversations').select(['id', 'org_id']).executeTakeFirst();
      assert.ok(c, 'the call of the test above left a conversation');
      const dir = path.join(h().config.dataDir, 'recordings', String(c.org_id));
      fs.mkdirSync(dir, { recursive: true });
      const old = new Date(Date.now() - 31 * 86_400_000);
      const write = (name: string, at?: Date) => {
        fs.writeFileSync(path.join(dir, name), 'x');
        if (at) fs.utimesSync(path.join(dir, name), at, at);
      };
      write(`${c.id}.wav`); // recent, and its conversation exists: kept
      write(`${crypto.randomUUID()}.wav`); // its conversation was deleted (or never was)
      write(`${crypto.randomUUID()}.wav.part`, old); // a crashed worker's
      write(`${crypto.randomUUID()}.wav.part`); // being written now
      write('notes.txt', old); // not ours to judge by name, but past the retention all the same
      const job = maintenanceJobs(h().database, {
        taskRetentionDays: 30,
        sweepRecordings: () => recordingStore({ db, dir: path.join(h().config.dataDir, 'recordings'), retentionDays: 30, maxSeconds: 3600 }).sweep(),
      }).find((j) => j.name === 'prune-call-recordings');
      assert.ok(job);
      assert.equal(await job.run(), 3);
      const left = fs.readdirSync(dir).sort();
      assert.equal(left.length, 2, left.join());
      assert.ok(left.includes(`${c.id}.wav`));
      assert.ok(left.some((n) => n.endsWith('.wav.part')));
      assert.equal(await job.run(), 0);
      // Past the retention the kept one goes too.
      fs.utimesSync(path.join(dir, `${c.id}.wav`), old, old);
      assert.equal(await job.run(), 1);
      assert.ok(!fs.existsSync(path.join(dir, `${c.id}.wav`)));
    });
  }, env, {
    worker: true, sip: { pollMs: 100 },
  });
});
