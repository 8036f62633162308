// Twilio's messaging webhook (a text to one of our numbers; docs/conversations.md, "Text messages
// (SMS)"): checked here — the number's organization and agent, by its signature (verify.ts) — then
// handed to the text channel (src/modules/conversations/sms.ts), which records it and queues the
// agent's answer. Afterwards the webhook, as its exact bytes, goes to the organization's
// twilioSMS relay, if it has one.
import type { RelayService } from '../webhooks/relays/service.ts';
import type { InboundSmsResult, SmsService } from '../conversations/sms.ts';
import { twilioNumberHolder, type TwilioRequest, type TwilioVerifyDeps } from './verify.ts';

type Log = { warn(obj: object, msg: string): void };

/** The webhook as it came, for a relay to forward unchanged. */
export interface PostedWebhook {
  headers: Record<string, string | undefined>;
  contentType: string | undefined;
  /** The form exactly as posted. */
  rawBody: Buffer;
}

export interface TwilioTextsDeps extends TwilioVerifyDeps {
  sms: Pick<SmsService, 'receive'>;
  relays: Pick<RelayService, 'forwardVerified'>;
}

export function twilioTexts(deps: TwilioTextsDeps) {
  return {
    /**
     * A text to one of our numbers: the organization found by `To` and checked by its signature,
     * then recorded and answered by the text channel (the same MessageSid again records nothing),
     * then forwarded to the organization's twilioSMS relay.
     */
    async receive(req: TwilioRequest, posted: PostedWebhook, log: Log): Promise<InboundSmsResult> {
      const { orgId, agentId } = await twilioNumberHolder(deps, req, log, 'twilio sms');
      const result = await deps.sms.receive(orgId, agentId, req.params, log);
      try {
        await deps.relays.forwardVerified(orgId, 'twilioSMS', posted);
      } catch (err) {
        log.warn({ err, orgId }, 'handing the text message to the twilioSMS relay failed');
      }
      return result;
    },
  };
}

export type TwilioTexts = ReturnType<typeof twilioTexts>;
