// AI disclosure and recording consent on calls (issue 37, docs/campaigns.md "Disclosure and
// consent"): the real call start (start-call.ts), voice session and opening over the fake voice
// transport, with the process's recording store: the agent's aiDisclosure is the first thing said
// and recorded, before the greeting; recordingConsent `ask` asks after the greeting and a "no"
// stops and discards the recording (recorded on the conversation's state), a "yes" keeps it;
// `announce` says the recording notice on a recorded call. An organization with redaction on and
// keepRecordings false is not recorded at all.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { voiceSettings } from '../../src/modules/agents/voice-settings.ts';
import { conversationRepo, messageRepo } from '../../src/modules/conversations/repository.ts';
import { CAPABILITIES, consentAnswer } from '../../src/modules/voice/call-policy.ts';
import { readCallState } from '../../src/modules/voice/call-state.ts';
import { startCall } from '../../src/modules/voice/start-call.ts';
import { agentOnCall } from '../helpers/agent-call.ts';
import { FakeVoiceTransport, ScriptedStt, ShortTts } from '../helpers/fake-voice-transport.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness } from '../helpers/harness.ts';
import { waitFor } from '../helpers/sip-peers.ts';

const sorted = <T>(xs: T[]): T[] => [...xs].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
const DISCLOSURE = 'You are speaking with an AI assistant of Acme Dental.';

describe('the caller\'s answer to the consent question', () => {
  it('reads a no as no, a yes (and "no problem") as yes, anything else as unclear', () => {
    for (const t of ['No.', 'no thanks', 'Nope', 'I do not want to be recorded', "I'd rather not", 'please don\'t']) assert.equal(consentAnswer(t), 'no', t);
    for (const t of ['Yes', 'yeah sure', 'okay', 'No problem', 'that\'s fine', 'sure go ahead']) assert.equal(consentAnswer(t), 'yes', t);
    for (const t of ['', 'what are your hours', 'hmm']) assert.equal(consentAnswer(t), 'unclear', t);
  });
});

for (const engine of SKIPPED_ENGINES) describe(`disclosure and consent on calls [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});

for (const engine of ENGINES) {
  describe(`disclosure and consent on calls [${engine}]`, () => {
    let h: Harness;
    before(async () => { h = await startHarness(engine, { CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }); });
    after(async () => { await h?.close(); });

    /** A call to an agent configured with `config`; the caller says `answer` once the agent listens, then hangs up. */
    async function call(config: Record<string, unknown>, answer: string, before?: (orgToken: string) => Promise<void>) {
      const { db, org, live, opened, http, turns } = await agentOnCall(h, { welcomeMessage: 'Hello there', speakingTimeout: 400, callerResponseTimeout: 60, ...config });
      await before?.(org.token);
      const transport = new FakeVoiceTransport();
      const tts = new ShortTts();
      const settings = voiceSettings(live);
      const deps = {
        db, conversations: h.services.conversations, turns, stt: new ScriptedStt([answer]), tts, now: Date.now,
        recording: { store: h.services.recordings, maxMs: 60_000 },
      };
      const id = opened.conversation.id;
      const started = await startCall(deps, transport, { conversation: opened.conversation, room: opened.room, config: live, settings, capabilities: CAPABILITIES.sip, opening: {} });
      await waitFor('listening', () => started.session.phase === 'listening', 10_000, 5);
      const file = h.services.recordings.fileOf(org.id, id)!;
      // The recorder opens its file beside the call's start: give it a moment under load (2 s; a call not recorded never makes one).
      const recordingWhileListening = await waitFor('the recording under way', () => fs.existsSync(`${file}.part`), 2000, 10).then(() => true, () => false);
      transport.utter(settings.speakingTimeoutMs, 600);
      await waitFor('the answer heard', async () => (await messageRepo.ofConversation(db, id)).some((m) => m.direction === 'inbound'), 10_000, 20);
      await waitFor('listening again', () => started.session.phase === 'listening', 10_000, 5);
      transport.end('test over');
      await started.done;
      await http.close();
      const rows = await messageRepo.ofConversation(db, id);
      const lines = rows.filter((m) => m.direction === 'outbound').map((m) => [m.data ? JSON.parse(m.data).kind : null, m.text]);
      const state = readCallState((await conversationRepo.find(db, id))!.state);
      return { lines, said: tts.said.map((s) => s.text), state, file, recordingWhileListening, kept: fs.existsSync(file) };
    }

    it('the disclosure is said and recorded first, before the greeting; with consent `ask`, a "no" stops and discards the recording', async () => {
      const r = await call({ aiDisclosure: DISCLOSURE, recordingConsent: 'ask' }, 'No, I do not want to be recorded.');
      // In the order said (lines recorded within one millisecond may list in either order).
      assert.deepEqual(r.said.slice(0, 3), [DISCLOSURE, 'Hello there', 'This call may be recorded. Is that all right with you?']);
      assert.deepEqual(sorted(r.lines.slice(0, 3)), sorted([['ai_disclosure', DISCLOSURE], ['welcome', 'Hello there'], ['consent_question', 'This call may be recorded. Is that all right with you?']]));
      assert.ok(r.recordingWhileListening, 'the call was being recorded when the question was asked');
      assert.equal(r.state.recordingConsent?.answer, 'no');
      assert.equal(r.state.recordingConsent?.recordingStopped, true);
      assert.equal(r.kept, false, 'no recording is kept');
      assert.ok(!fs.existsSync(`${r.file}.part`));
      assert.equal(r.state.recording, undefined, 'no recording is noted');
    });

    it('a "yes" keeps the recording; the answer is recorded', async () => {
      const r = await call({ aiDisclosure: DISCLOSURE, recordingConsent: 'ask', recordingConsentQuestion: 'May we record this call?' }, 'Yes, that is fine.');
      assert.deepEqual(r.said.slice(0, 3), [DISCLOSURE, 'Hello there', 'May we record this call?']);
      assert.deepEqual(sorted(r.lines.slice(0, 3).map((l) => l[0])), ['ai_disclosure', 'consent_question', 'welcome']);
      assert.deepEqual([r.state.recordingConsent?.answer, r.state.recordingConsent?.recordingStopped], ['yes', false]);
      assert.equal(r.kept, true);
      assert.ok(r.state.recording && r.state.recording.bytes > 44);
    });

    it('`announce` says the recording notice after the disclosure even with autoRecordingNotification false; no disclosure set: the greeting comes first', async () => {
      const r = await call({ aiDisclosure: DISCLOSURE, recordingConsent: 'announce', autoRecordingNotification: 'false' }, 'hello');
      assert.deepEqual(r.said.slice(0, 3), [DISCLOSURE, 'This call is being recorded.', 'Hello there']);
      assert.deepEqual(sorted(r.lines.slice(0, 3).map((l) => l[0])), ['ai_disclosure', 'recording_notice', 'welcome']);
      assert.equal(r.state.recordingConsent, undefined);
      const plain = await call({ autoRecordingNotification: 'false' }, 'hello');
      assert.equal(plain.said[0], 'Hello there');
      assert.deepEqual(plain.lines[0], ['welcome', 'Hello there']);
    });

    it('an organization with redaction on and keepRecordings false is not recorded', async () => {
      const r = await call({}, 'hello', async (token) => {
        const set = await h.call('POST', '/api/v2/compliance/settings', { token, body: { redactPersonalData: true, keepRecordings: false } });
        assert.equal(set.status, 200, JSON.stringify(set.body));
      });
      assert.equal(r.recordingWhileListening, false);
      assert.equal(r.kept, false);
    });
  });
}
