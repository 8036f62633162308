// The call policy (src/modules/voice/call-policy.ts) and the voice settings it reads
// (src/modules/agents/voice-settings.ts), as pure functions: no database, no timers.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { admissionSettings, voiceSettings } from '../../src/modules/agents/voice-settings.ts';
import {
  CAPABILITIES, callAdmission, callOpening, decide, freshCounters, heardVoicemailCue, MAX_TURN_FAILURES, phrasesFor, transferAnnouncement, twilioAnsweredBy,
  voicemailDecision, voicemailPlan, type CallCounters, type CallEvent,
} from '../../src/modules/voice/call-policy.ts';
import { voiceStyle } from '../../src/modules/twilio/voice-twiml.ts';
import { answeredByMachine, callOutcome } from '../../src/providers/carrier.ts';

const en = voiceSettings({});
const es = voiceSettings({ agentLang: 'es-US', agentVoice: 'es-US Female', callerResponseTimeoutHangupCounter: 2, attendedTransfers: true });

function play(settings: typeof en, events: CallEvent[], path: keyof typeof CAPABILITIES = 'sip') {
  let counters: CallCounters = freshCounters();
  return events.map((e) => {
    const r = decide(settings, counters, e, CAPABILITIES[path]);
    counters = r.counters;
    return r.decision;
  });
}

describe('voice settings', () => {
  it('resolves every default and clamps into the field table\'s ranges', () => {
    assert.equal(en.speakingTimeoutMs, 1200);
    assert.equal(en.callerResponseTimeoutMs, 13_000);
    assert.equal(en.noResponsePrompts, 3);
    assert.equal(en.interruptionWords, 3);
    assert.equal(en.interruptionMinimumSpeakingMs, 3000);
    assert.equal(en.language, 'en-US');
    assert.equal(en.recordingNotificationPhrase, 'This call is being recorded.');
    const odd = voiceSettings({ callerResponseTimeoutHangupCounter: 99, speakingTimeout: 5, interruptionWordCount: 2.5, waitOnAnswer: 60_000, agentLang: 'multi', agentVoice: 'en-US Male' });
    assert.equal(odd.noResponsePrompts, 10, 'the schema\'s maximum (it was unbounded on the session path)');
    assert.equal(odd.speakingTimeoutMs, 100);
    assert.equal(odd.interruptionWords, 3, 'not an integer: the default');
    assert.equal(odd.waitOnAnswerMs, 10_000);
    assert.equal(odd.language, 'en-US');
    assert.equal(odd.gender, 'male');
    assert.equal(es.language, 'es-US');
    assert.equal(es.gender, 'female');
  });

  it('`multi` speaks and listens in its voice\'s language on every path (en-US for a voice not in the catalog); Gather listens in the same', () => {
    for (const [voice, language] of [['es-US Female', 'es-US'], ['fr-FR Female', 'fr-FR'], ['en-GB Male', 'en-GB'], ['nobody', 'en-US']] as const) {
      const settings = voiceSettings({ agentLang: 'multi', agentVoice: voice });
      assert.equal(settings.language, language, voice);
      assert.equal(voiceStyle(settings).gatherLanguage, language, voice);
    }
    // A bare tag: the session uses it as given; Twilio's recogniser gets the voice's region for it.
    const bare = voiceSettings({ agentLang: 'es', agentVoice: 'es-MX Female' });
    assert.equal(bare.language, 'es');
    assert.equal(voiceStyle(bare).gatherLanguage, 'es-MX');
  });
});

describe('the call policy', () => {
  it('silence: the prompts in the agent\'s language, then goodbye and no_response after callerResponseTimeoutHangupCounter asks', () => {
    const d = play(es, [{ kind: 'silence' }, { kind: 'silence' }, { kind: 'silence' }]);
    assert.deepEqual(d.map((x) => x.next), ['listen', 'listen', 'hangup']);
    assert.deepEqual(d[0], { next: 'listen', say: { text: '¿Sigue ahí?', kind: 'still_there' } });
    assert.deepEqual(d[2], { next: 'hangup', say: { text: phrasesFor('es-US').noResponseGoodbye, kind: 'no_response' }, outcome: 'no_response', detail: '3 silences in a row' });
    assert.deepEqual(play(voiceSettings({ callerResponseTimeoutHangupCounter: 0 }), [{ kind: 'silence' }])[0]!.next, 'hangup', 'no asks at all');
  });

  it('what the caller says resets the silences; an empty result is a silence; keys are answered as [DTMF n]', () => {
    const d = play(en, [{ kind: 'silence' }, { kind: 'silence' }, { kind: 'heard', text: ' hello ' }, { kind: 'silence' }, { kind: 'silence' }, { kind: 'silence' }, { kind: 'heard', text: '' }]);
    assert.deepEqual(d.map((x) => x.next), ['listen', 'listen', 'answer', 'listen', 'listen', 'listen', 'hangup']);
    assert.deepEqual(d[2], { next: 'answer', text: 'hello' });
    assert.deepEqual(play(en, [{ kind: 'key', digit: '#' }])[0], { next: 'answer', text: '[DTMF #]' });
  });

  it('failed and slow turns: an apology each time, MAX_TURN_FAILURES in a row end the call failed; a reply resets the count', () => {
    const fail: CallEvent = { kind: 'turnFailed', reason: 'model down' };
    const d = play(en, [fail, { kind: 'turnTooSlow', limitMs: 1500 }, { kind: 'replied', effects: [] }, fail, fail, fail]);
    assert.deepEqual(d.map((x) => x.next), ['listen', 'listen', 'listen', 'listen', 'listen', 'hangup']);
    assert.equal(MAX_TURN_FAILURES, 3);
    assert.deepEqual(d[1], { next: 'listen', say: { text: phrasesFor('en').apology, kind: 'apology' } });
    assert.deepEqual(d[5], { next: 'hangup', say: { text: phrasesFor('en').failedGoodbye, kind: 'failed' }, outcome: 'failed', detail: 'model down' });
    // The limit a slow turn ran past is the one it was given (a process may shorten the policy's).
    const slow = play(en, [{ kind: 'turnTooSlow', limitMs: 1500 }, { kind: 'turnTooSlow', limitMs: 1500 }, { kind: 'turnTooSlow', limitMs: 1500 }]);
    assert.deepEqual(slow[2], { next: 'hangup', say: { text: phrasesFor('en').failedGoodbye, kind: 'failed' }, outcome: 'failed', detail: 'the turn took longer than 1500 ms' });
  });

  it('a reply\'s effects: end hangs up ended_by_agent; a transfer goes where the path can dial, else the caller hears so; a failed transfer is said', () => {
    assert.deepEqual(play(en, [{ kind: 'replied', effects: [{ kind: 'end', reason: 'bye' }] }])[0], { next: 'hangup', outcome: 'ended_by_agent', detail: 'bye' });
    const transfer: CallEvent = { kind: 'replied', effects: [{ kind: 'transfer', destination: 'ext:200', name: 'sales' }] };
    assert.deepEqual(play(es, [transfer], 'sip')[0], { next: 'transfer', destination: 'ext:200', name: 'sales', attended: true });
    assert.deepEqual(play(es, [transfer], 'gather')[0], { next: 'listen', say: { text: phrasesFor('es').cannotTransfer, kind: 'transfer_refused' } });
    assert.deepEqual(play(es, [transfer], 'media-stream')[0]!.next, 'listen');
    assert.deepEqual(play(es, [{ kind: 'transferFailed', reason: 'busy' }])[0], { next: 'listen', say: { text: phrasesFor('es').transferFailed, kind: 'transfer_failed' } });
    assert.equal(transferAnnouncement('es-US', 'ventas'), 'Hola, tengo en la línea una llamada para ventas. Le comunico ahora.');
    assert.equal(transferAnnouncement('en-US', undefined), 'Hello, I have a caller for you on the line. Connecting you now.');
  });

  it('the opening: the task\'s greeting over welcomeMessage, waitOnAnswer over waitToGreet, the notice when recorded (true) or always', () => {
    const s = voiceSettings({ welcomeMessage: ' Hello. ', postAnswerDtmf: '1,2#', autoRecordingNotification: 'true' });
    assert.deepEqual(callOpening(s, { recorded: false }), { pauseMs: 0, digits: '1,2#', greeting: { text: 'Hello.', kind: 'welcome' } });
    assert.deepEqual(callOpening(s, { taskGreeting: 'Hi, it is Ana about Tuesday.', waitToGreet: true, recorded: true }), {
      pauseMs: 2000, digits: '1,2#', notice: { text: 'This call is being recorded.', kind: 'recording_notice' }, greeting: { text: 'Hi, it is Ana about Tuesday.', kind: 'welcome' },
    });
    assert.equal(callOpening(voiceSettings({ waitOnAnswer: 1500 }), { waitToGreet: true, recorded: false }).pauseMs, 1500);
    assert.ok(callOpening(voiceSettings({ autoRecordingNotification: 'always' }), { recorded: false }).notice);
    assert.equal(callOpening(voiceSettings({ autoRecordingNotification: 'false' }), { recorded: true }).notice, undefined);
    assert.equal(callOpening(voiceSettings({}), { recorded: false }).greeting, undefined, 'nothing to say: no greeting');
  });

  it('says what each path cannot do in one place', () => {
    assert.equal(CAPABILITIES.gather.bargeIn, false);
    assert.equal(CAPABILITIES.gather.keys, false);
    assert.equal(CAPABILITIES.gather.backgroundAudio, false);
    assert.equal(CAPABILITIES.sip.canTransferTo('ext:200'), true);
    assert.equal(CAPABILITIES['media-stream'].canTransferTo('ext:200'), false);
    assert.equal(CAPABILITIES['media-stream'].canTransferTo('+14155550100'), true);
  });
});

describe('call admission (before the agent answers, every path)', () => {
  const caller = { callerName: 'SPAM LIKELY', callerNumber: '+14155550142' };
  it('answers at once by default; preAnswerRingTime rings first (seconds to ms, clamped to 1..60)', () => {
    assert.deepEqual(callAdmission(admissionSettings({}), caller), { action: 'answer', ringMs: 0 });
    assert.deepEqual(callAdmission(admissionSettings({ preAnswerRingTime: 4 }), caller), { action: 'answer', ringMs: 4000 });
    assert.equal(admissionSettings({ preAnswerRingTime: 600 }).ringMs, 60_000);
    assert.equal(admissionSettings({ preAnswerRingTime: 'x' } as never).ringMs, 0);
  });
  it('cnamAutoRejectRegex on the caller name or number rejects with cnamAutoRejectCode (603 by default); it wins over a transfer', () => {
    assert.deepEqual(callAdmission(admissionSettings({ cnamAutoRejectRegex: '^SPAM' }), caller), { action: 'reject', code: 603, rule: 'cnamAutoRejectRegex' });
    assert.deepEqual(callAdmission(admissionSettings({ cnamAutoRejectRegex: '^\\+1415', cnamAutoRejectCode: 486 }), caller), { action: 'reject', code: 486, rule: 'cnamAutoRejectRegex' });
    assert.equal(callAdmission(admissionSettings({ cnamAutoRejectRegex: '^SPAM' }), { callerNumber: '+14155550142' }).action, 'answer');
    assert.equal(callAdmission(admissionSettings({ cnamAutoRejectRegex: '(' }), caller).action, 'answer', 'a regex that no longer compiles matches nothing');
    assert.equal(callAdmission(admissionSettings({
      cnamAutoRejectRegex: 'LIKELY', cnamAutoTransferRegex: 'SPAM', cnamAutoTransferDestination: '+14155550100',
    }), caller).action, 'reject');
  });
  it('cnamAutoTransferRegex sends the call to cnamAutoTransferDestination; without a destination the agent answers', () => {
    assert.deepEqual(callAdmission(admissionSettings({ cnamAutoTransferRegex: 'SPAM', cnamAutoTransferDestination: 'ext:200', preAnswerRingTime: 3 }), caller),
      { action: 'transfer', destination: 'ext:200', rule: 'cnamAutoTransferRegex' });
    assert.deepEqual(callAdmission(admissionSettings({ cnamAutoTransferRegex: 'SPAM' }), caller), { action: 'answer', ringMs: 0 });
    assert.equal(callAdmission(admissionSettings({ cnamAutoTransferRegex: 'HAM', cnamAutoTransferDestination: 'ext:200' }), caller).action, 'answer');
  });
});

describe('voicemail: the plan, the decision, the cues (decided once for every path)', () => {
  it('the task\'s action and message win over the agent\'s; the message falls back to voicemailMessage, then welcomeMessage; nothing to leave hangs up', () => {
    const agent = voiceSettings({ voicemailAction: 'hangup', voicemailMessage: '  Call us back.  ', welcomeMessage: 'Hello from Acme.' });
    assert.deepEqual(voicemailPlan(agent), { action: 'hangup', message: null, holdGreeting: true });
    assert.deepEqual(voicemailPlan(agent, { action: 'leave-message' }), { action: 'leave-message', message: 'Call us back.', holdGreeting: true });
    assert.deepEqual(voicemailPlan(agent, { action: 'leave-message', message: 'Task message.' }).message, 'Task message.');
    assert.deepEqual(voicemailPlan(voiceSettings({ welcomeMessage: 'Hello from Acme.' }), { action: 'leave-message' }).message, 'Hello from Acme.');
    assert.deepEqual(voicemailPlan(voiceSettings({}), { action: 'leave-message' }), { action: 'hangup', message: null, holdGreeting: true });
    assert.deepEqual(voicemailPlan(voiceSettings({})), { action: 'continue', message: null, holdGreeting: false }, 'the default changes nothing');
    // A stored configuration holding a value the field no longer takes (as read from the database).
    assert.equal(voiceSettings(JSON.parse('{"voicemailAction":"nonsense"}') as Record<string, unknown>).voicemailAction, 'continue');
  });

  it('a machine is hung up on, left the message, or talked to; a person or unknown always goes on', () => {
    const leave = voicemailPlan(voiceSettings({ voicemailAction: 'leave-message', voicemailMessage: 'Call us back.' }));
    assert.deepEqual(voicemailDecision(leave, 'machine'), {
      next: 'leave-message', say: { text: 'Call us back.', kind: 'voicemail_message' }, outcome: 'voicemail', detail: 'a voicemail answered: the message was left',
    });
    assert.deepEqual(voicemailDecision(voicemailPlan(voiceSettings({ voicemailAction: 'hangup' })), 'machine'), { next: 'hangup', outcome: 'voicemail', detail: 'a voicemail answered: hung up' });
    assert.deepEqual(voicemailDecision(voicemailPlan(voiceSettings({ voicemailAction: 'continue' })), 'machine'), { next: 'go-on' });
    for (const who of ['human', 'unknown'] as const) assert.deepEqual(voicemailDecision(leave, who), { next: 'go-on' });
  });

  it('Twilio\'s AnsweredBy values; which path decides', () => {
    assert.deepEqual(twilioAnsweredBy('machine_end_beep'), { answeredBy: 'machine', greetingEnded: true });
    assert.deepEqual(twilioAnsweredBy('machine_end_silence'), { answeredBy: 'machine', greetingEnded: true });
    assert.deepEqual(twilioAnsweredBy('machine_start'), { answeredBy: 'machine', greetingEnded: false });
    assert.deepEqual(twilioAnsweredBy('fax'), { answeredBy: 'machine', greetingEnded: false });
    assert.deepEqual(twilioAnsweredBy('human'), { answeredBy: 'human', greetingEnded: false });
    assert.deepEqual(twilioAnsweredBy('unknown'), { answeredBy: 'unknown', greetingEnded: false });
    assert.equal(twilioAnsweredBy('robot'), null);
    assert.deepEqual([CAPABILITIES.gather.voicemailDetection, CAPABILITIES['media-stream'].voicemailDetection, CAPABILITIES.sip.voicemailDetection], ['carrier', 'audio', 'audio']);
  });

  it('cue phrases in the agent\'s language and in English, as words', () => {
    assert.ok(heardVoicemailCue('Please leave a message after the tone.', 'en-US'));
    assert.ok(heardVoicemailCue('The person you are calling is NOT AVAILABLE', 'en-GB'));
    assert.ok(heardVoicemailCue('Por favor deje su mensaje después del tono', 'es-MX'));
    assert.ok(heardVoicemailCue('Veuillez laisser un message après le bip', 'fr-FR'));
    assert.ok(heardVoicemailCue('Bitte hinterlassen Sie eine Nachricht nach dem Signalton', 'de-DE'));
    assert.ok(heardVoicemailCue('you have reached the voicemail of sam', 'es-US'), 'English is heard whatever the language');
    assert.ok(!heardVoicemailCue('hello? yes, speaking', 'en-US'));
    assert.ok(!heardVoicemailCue('unavailableish', 'en-US'), 'a cue is whole words');
  });

  it('a completed call a machine answered is the task outcome voicemail (the one status mapping)', () => {
    assert.equal(callOutcome('completed', { provider: 'twilio', answeredBy: 'machine_end_beep' })!.result.outcome, 'voicemail');
    assert.equal(callOutcome('completed', { provider: 'sip', answeredBy: 'machine' })!.result.outcome, 'voicemail');
    assert.equal(callOutcome('completed', { provider: 'twilio', answeredBy: 'human' })!.result.outcome, 'completed');
    assert.equal(callOutcome('busy', { provider: 'twilio', answeredBy: 'machine_start' })!.result.outcome, 'busy');
    assert.equal(answeredByMachine('fax'), true);
  });
});
