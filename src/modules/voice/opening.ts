// How a spoken call opens, for the voice session (session.ts), rendering the call policy's opening
// (call-policy.ts callOpening): the keys on answer, the pause, the recording notice, then the
// greeting (synthesized before the call was up when it could be); the background bed from the end
// of the greeting when it should start there; and on an outbound call whose voicemail plan holds
// the greeting, the screen's verdict first — a machine gets the policy's decision (hang up, or the
// message after the beep) instead of a greeting. docs/voice.md, "Voice sessions" and "Voicemail".
import type { AudioBed, VoiceTransport } from '../../media/voice-transport.ts';
import { voicemailDecision, type AgentLine, type CallOpening } from './call-policy.ts';
import type { VoicemailScreen } from './voicemail.ts';

const RATE = 8000;

export interface OpeningInput {
  /** How the call opens (call-policy.ts callOpening): keys, a pause, the recording notice, the greeting. */
  opening: CallOpening;
  /** The greeting already synthesized (8 kHz PCM16), so it starts the moment the call is up. */
  greetingAudio?: Int16Array;
  /** Background audio, once loaded (absent where the path cannot play it): mixed under the agent from the start or after the greeting. */
  background?: Promise<{ bed: AudioBed; afterGreeting: boolean } | null>;
  /** An outbound call's voicemail screen (voicemail.ts): fed the answering side's frames; the greeting waits for its verdict when its plan says so. */
  voicemail?: VoicemailScreen;
}

/** What the opening does through the session. */
export interface OpeningCall {
  readonly transport: VoiceTransport;
  ended(): boolean;
  /** The call will end (a machine answered): the session is ending from now on. */
  ending(): void;
  /** A line of the call: recorded, then spoken to its end (`audio` when it is synthesized already). */
  say(line: AgentLine, audio?: Int16Array): Promise<void>;
  hangup(outcome: 'voicemail', detail: string): Promise<void>;
  warn(err: unknown, msg: string): void;
}

/**
 * Prepares the opening: background audio plays once it has loaded (from the start, or once the
 * greeting is over), and the voicemail screen hears every frame from now on. `run` plays the
 * opening and resolves true when the call goes on to listen, false when it ended meanwhile (on a
 * machine, or hung up).
 */
export function prepareOpening(call: OpeningCall, input: OpeningInput): { run(): Promise<boolean> } {
  const { transport } = call;
  const { opening } = input;
  let greeted = false;
  let bedAfterGreeting: AudioBed | undefined;
  void input.background?.then((b) => {
    if (!b || call.ended()) return;
    if (b.afterGreeting && !greeted) bedAfterGreeting = b.bed;
    else transport.background?.(b.bed);
  }, () => {});

  const screen = input.voicemail;
  if (screen) transport.on('audio', (frame) => { if (!call.ended()) screen.push(frame); });
  const callEnded = new Promise<undefined>((resolve) => transport.once('ended', () => resolve(undefined)));

  /** True when the call ended on the screen's verdict (a machine), false when it goes on. */
  async function screened(s: VoicemailScreen): Promise<boolean> {
    const answeredBy = await Promise.race([s.verdict, callEnded]);
    if (answeredBy === undefined || call.ended()) return true;
    const decision = voicemailDecision(s.plan, answeredBy);
    if (decision.next === 'go-on') return false;
    call.ending();
    if (decision.next === 'leave-message') {
      await Promise.race([s.greetingEnd, callEnded]);
      if (call.ended()) return true;
      s.messageStarts();
      await call.say(decision.say);
    }
    await call.hangup(decision.outcome, decision.detail);
    return true;
  }

  return {
    async run() {
      const digits = opening.digits.replace(/[^0-9*#A-D]/g, '');
      if (digits) await transport.sendDigits(digits).catch((err: unknown) => call.warn(err, 'voice session: the keys on answer could not be sent'));
      const held = screen?.plan.holdGreeting === true;
      if (held && await screened(screen!)) return false;
      // A greeting held for the screen has listened already: no pause on top.
      if (opening.pauseMs > 0 && !held) transport.play(new Int16Array(Math.round((opening.pauseMs / 1000) * RATE)));
      // The AI disclosure comes before anything else the agent says (docs/campaigns.md).
      if (opening.disclosure) await call.say(opening.disclosure);
      if (opening.notice) await call.say(opening.notice);
      if (opening.greeting) await call.say(opening.greeting, input.greetingAudio);
      if (opening.consentQuestion) await call.say(opening.consentQuestion);
      greeted = true;
      if (bedAfterGreeting && !call.ended()) transport.background?.(bedAfterGreeting);
      return true;
    },
  };
}
