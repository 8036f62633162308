// Voicemail on gathered Twilio calls (docs/voice.md, "Voicemail"; a streamed call is screened from
// its own audio in media-streams.ts instead): Twilio's answering-machine detection, asked for when
// a task's call is placed (src/providers/twilio/carrier.ts: MachineDetection with AsyncAmd),
// posts AnsweredBy to our signed callback (task-callbacks.ts checks it, keeps
// it on the task and hands it here). Who answered is recorded on the call's conversation once, and the call
// policy's decision is rendered on the call in progress through Twilio's Calls API: hang up, or
// say the message (after the greeting's end, which DetectMessageEnd waits for) and hang up, or go on.
import type { CarrierOptions } from '../../providers/index.ts';
import type { Config } from '../../config.ts';
import type { Db, TaskRow } from '../../db/types.ts';
import { Invalid } from '../../http/errors.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { HANGUP, say, twimlDocument } from '../../providers/twilio/twiml.ts';
import { accountRepo } from '../accounts/repository.ts';
import { voiceSettings } from '../agents/voice-settings.ts';
import { twilioCarrierOf } from '../numbering-providers/carriers.ts';
import { twilioAnsweredBy, voicemailDecision } from '../voice/call-policy.ts';
import { conversationRepo } from '../conversations/repository.ts';
import { recordAgentLine, type ConversationService } from '../conversations/service.ts';
import { voiceStyle } from './voice-twiml.ts';
import { recordAnsweredBy, voicemailPlanFor } from '../voice/voicemail.ts';

type Log = { warn(obj: object, msg: string): void };

export interface TwilioAmdDeps {
  db: Db;
  box: SecretBox;
  config: Config;
  carrierOptions?: CarrierOptions;
  conversations: Pick<ConversationService, 'liveConfig' | 'end'>;
  now: () => number;
}

export function twilioAmd(deps: TwilioAmdDeps) {
  const { db } = deps;
  return {
    /**
     * Twilio's AnsweredBy for a running task's call (signature, task and CallSid already checked).
     * A verdict after the first (a repeated callback) changes nothing.
     */
    async answeredBy(task: TaskRow, callSid: string, value: string, log: Log): Promise<void> {
      const seen = twilioAnsweredBy(value);
      if (!seen) throw new Invalid(`AnsweredBy ${JSON.stringify(value.slice(0, 40))} is not a value Twilio sends`);
      // The conversation opened when Twilio fetched the call's TwiML, at answer (AMD reports after that).
      const c = await conversationRepo.byCarrierRef(db, task.org_id, callSid);
      if (!c) {
        log.warn({ taskId: task.id, callSid }, 'twilio AMD: the call has no conversation yet; the verdict is kept on the task only');
        return;
      }
      const first = await recordAnsweredBy(db, c.id, seen.answeredBy, deps.now());
      if (!first || c.ended_at !== null) return;
      const decision = voicemailDecision(await voicemailPlanFor(deps, task), seen.answeredBy);
      if (decision.next === 'go-on') return;
      const carrier = await twilioCarrierOf(deps, task.org_id);
      if (!carrier) return;
      if (decision.next === 'hangup') {
        await deps.conversations.end(c.id, decision.outcome, decision.detail);
        await carrier.endCall(callSid);
        return;
      }
      // The message (DetectMessageEnd reported the greeting's end), said by Twilio, then the end.
      const agent = await accountRepo.findById(db, c.account_id);
      const settings = voiceSettings(agent ? await deps.conversations.liveConfig(agent) : {});
      await db.transaction().execute((tx) => recordAgentLine(tx, c, decision.say, deps.now()));
      await deps.conversations.end(c.id, decision.outcome, decision.detail);
      await carrier.redirectCall(callSid, twimlDocument(say(voiceStyle(settings).say, decision.say.text), HANGUP));
    },
  };
}

export type TwilioAmd = ReturnType<typeof twilioAmd>;
