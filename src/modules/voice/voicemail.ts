// Voicemail on outbound calls (docs/voice.md, "Voicemail"): what a call task does when a machine
// answers (the call policy's voicemailPlan, for the task and its agent), and the screen of a call
// whose audio we carry (SIP, and Twilio calls that stream): the answering side's frames go to the
// audio detector (src/speech/answering-machine.ts) from the moment of answer, with one early
// transcription of a long first utterance for the policy's cue phrases; the verdict is recorded on
// the conversation once (answered_by, answered_by_at), and the voice session renders the policy's
// decision.
import type { AnsweredBy, Db, TaskRow } from '../../db/types.ts';
import { AnsweringMachineDetector, type AmdEvent } from '../../speech/answering-machine.ts';
import type { SpeechToText } from '../../speech/types.ts';
import { accountRepo } from '../accounts/repository.ts';
import { voiceSettings } from '../agents/voice-settings.ts';
import { CAPABILITIES, heardVoicemailCue, voicemailPlan, VOICEMAIL_ACTIONS, type PathCapabilities, type TaskVoicemail, type VoicemailPlan } from './call-policy.ts';

type CallPath = PathCapabilities['path'];
import { conversationRepo } from '../conversations/repository.ts';
import type { ConversationService } from '../conversations/service.ts';

type Log = { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };

/** A task's stored `voicemail` (JSON `{action, message}`), or null for none or one that does not read. */
export function taskVoicemail(stored: string | null | undefined): TaskVoicemail | null {
  if (!stored) return null;
  try {
    const o = JSON.parse(stored) as Record<string, unknown>;
    const action = VOICEMAIL_ACTIONS.find((a) => a === o.action);
    return action ? { action, message: typeof o.message === 'string' ? o.message : null } : null;
  } catch {
    return null;
  }
}

/** The plan of a call task: its own choice over its agent's live voicemailAction. */
export async function voicemailPlanFor(deps: { db: Db; conversations: Pick<ConversationService, 'liveConfig'> }, task: Pick<TaskRow, 'account_id' | 'voicemail'>): Promise<VoicemailPlan> {
  const agent = await accountRepo.findById(deps.db, task.account_id);
  const settings = voiceSettings(agent ? await deps.conversations.liveConfig(agent) : {});
  return voicemailPlan(settings, taskVoicemail(task.voicemail));
}

/**
 * The plan of a task's call about to be placed on `path`, with who decides there: the policy's
 * CAPABILITIES[path].voicemailDetection (the carrier asks Twilio for its detection only when it is
 * `carrier`).
 */
export async function placedCallVoicemail(deps: { db: Db; conversations: Pick<ConversationService, 'liveConfig'> }, task: Pick<TaskRow, 'account_id' | 'voicemail'>, path: CallPath): Promise<VoicemailPlan & { detection: PathCapabilities['voicemailDetection'] }> {
  return { ...await voicemailPlanFor(deps, task), detection: CAPABILITIES[path].voicemailDetection };
}

/** Records who answered, once (the first verdict stands); true when this one was recorded. */
export function recordAnsweredBy(db: Db, conversationId: string, answeredBy: AnsweredBy, at: number): Promise<boolean> {
  return conversationRepo.setAnsweredBy(db, conversationId, answeredBy, at);
}

/** Audio kept for the cue transcription, and when it runs: a first utterance this long that no other signal has decided yet. */
const CUE_AUDIO_MS = 8000;
const CUE_AFTER_MS = 1200;
const RATE = 8000;

export interface VoicemailScreen {
  readonly plan: VoicemailPlan;
  /** One frame of the answering side's audio (8 kHz). */
  push(frame: Int16Array): void;
  /** Who answered, once decided. */
  readonly verdict: Promise<AnsweredBy>;
  /** A machine's greeting is over (the beep, or silence after it): a message can be left. */
  readonly greetingEnd: Promise<void>;
  /** The verdict so far. */
  readonly answeredBy: AnsweredBy | undefined;
  /** The session is about to leave the message (the call records it from here). */
  messageStarts(): void;
  /** Whether a message was left. */
  readonly messageLeft: boolean;
}

export interface ScreenDeps {
  db: Db;
  stt?: SpeechToText;
  now: () => number;
  log?: Log;
}

/** The screen of one answered outbound call whose audio we carry. */
export function screenCall(deps: ScreenDeps, opts: {
  conversationId: string; plan: VoicemailPlan; language: string; onMessage?: () => void;
  /** Where else the verdict is kept (a streamed Twilio call's task), before the call acts on it. */
  onVerdict?: (answeredBy: AnsweredBy) => Promise<unknown>;
}): VoicemailScreen {
  const detector = new AnsweringMachineDetector();
  let resolveVerdict!: (a: AnsweredBy) => void;
  let resolveEnd!: () => void;
  const verdict = new Promise<AnsweredBy>((r) => { resolveVerdict = r; });
  const greetingEnd = new Promise<void>((r) => { resolveEnd = r; });
  let answeredBy: AnsweredBy | undefined;
  let messageLeft = false;
  const heard: Int16Array[] = [];
  let heardSamples = 0;
  let transcribing = false;

  const apply = (events: AmdEvent[]) => {
    for (const ev of events) {
      if (ev.type === 'verdict') {
        answeredBy = ev.answeredBy;
        deps.log?.info?.({ conversation: opts.conversationId, answeredBy: ev.answeredBy, reason: ev.reason, afterMs: ev.atMs }, 'voicemail screen: decided who answered');
        const at = deps.now();
        void Promise.all([recordAnsweredBy(deps.db, opts.conversationId, ev.answeredBy, at), opts.onVerdict?.(ev.answeredBy)])
          .catch((err: Error) => deps.log?.warn({ conversation: opts.conversationId, err: err.message }, 'voicemail screen: the verdict could not be recorded'))
          .finally(() => resolveVerdict(ev.answeredBy));
      } else resolveEnd();
    }
  };

  /** One transcription of the first long utterance, off the event loop (the recogniser is a program or a service): a cue phrase makes it a machine. */
  const listenForCues = () => {
    if (transcribing || !deps.stt || detector.verdict !== undefined) return;
    transcribing = true;
    const pcm = new Int16Array(heardSamples);
    let at = 0;
    for (const f of heard) { pcm.set(f, at); at += f.length; }
    deps.stt.transcribe(pcm, RATE, { language: opts.language, signal: AbortSignal.timeout(5000) }).then((t) => {
      if (detector.verdict === undefined && heardVoicemailCue(t.text, opts.language)) apply(detector.cue());
    }, (err: Error) => deps.log?.warn({ conversation: opts.conversationId, err: err.message }, 'voicemail screen: the cue transcription failed'));
  };

  return {
    plan: opts.plan,
    verdict,
    greetingEnd,
    get answeredBy() { return answeredBy; },
    get messageLeft() { return messageLeft; },
    push(frame) {
      if (detector.done) return;
      if (heardSamples < (CUE_AUDIO_MS / 1000) * RATE) { heard.push(frame.slice()); heardSamples += frame.length; }
      apply(detector.push(frame));
      if (detector.speakingMs >= CUE_AFTER_MS) listenForCues();
    },
    messageStarts() {
      messageLeft = true;
      opts.onMessage?.();
    },
  };
}
