// Calls whose audio we carry ourselves (SIP): which agent talks, its first words synthesized
// before the call is up, and the call's conversation once it is, started as every call we carry
// is (start-call.ts). The SIP side knows this only as the VoiceCalls of src/media/voice-transport.ts.
//
// An inbound call is answered by the agent it is addressed to: a called user part `camp<id>` or
// `<id>` naming an agent of the organization, else the organization's first agent (numbers and
// registrations belong to the organization, not to one agent). docs/voice.md, "SIP calls".
import type { AccountRow } from '../../db/types.ts';
import type { InboundRefusal, InboundVoiceCall, PreparedVoiceCall, VoiceCalls, VoiceTransport } from '../../media/voice-transport.ts';
import { normalizePhone } from '../../lib/phone.ts';
import { phoneNumberRepo } from '../phone-numbers/repository.ts';
import { accountRepo } from '../accounts/repository.ts';
import type { AgentConfig } from '../agents/validation.ts';
import { admissionSettings, voiceSettings } from '../agents/voice-settings.ts';
import { bedFrom, type BackgroundAudio } from './background-audio.ts';
import { CAPABILITIES, callAdmission, callOpening } from './call-policy.ts';
import { normaliseAddress, type ConversationService, type OpenRequest } from '../conversations/service.ts';
import { conversationRepo } from '../conversations/repository.ts';
import { orgCallSpeaker } from './org-speech.ts';
import type { CallSpeaker } from './speaker.ts';
import { startCall, type StartCallDeps, type StartedCall } from './start-call.ts';
import type { VoicemailPlan } from './call-policy.ts';

export interface VoiceCallsDeps extends StartCallDeps {
  conversations: Pick<ConversationService, 'open' | 'callTranscript' | 'liveConfig'>;
  /** Loads agents' backgroundAudio; without it, none plays. */
  background?: BackgroundAudio;
  /** Where calls' starts and ends are counted (/metrics: callplane_calls_active, callplane_call_duration_seconds). */
  metrics?: { callStarted(direction: string): void; callEnded(direction: string, outcome: string, seconds: number): void };
}

/**
 * What the agent announces first, if anything (the call policy's opening rule): autoRecordingNotification
 * `always` announces on every call, `true` when this call is recorded (we cannot tell where the law
 * requires it), `false` never.
 */
export function recordingNotice(config: AgentConfig, recorded: boolean): string | undefined {
  return callOpening(voiceSettings(config), { recorded }).notice?.text;
}

/** How long synthesizing the greeting may hold up answering; past it, the session speaks it itself. */
const GREETING_WAIT_MS = 3000;

/** Reason phrases of the final responses a CNAM rejection may use (RFC 3261 §21, RFC 8197); others say Rejected. */
const SIP_REASONS: Record<number, string> = {
  403: 'Forbidden', 404: 'Not Found', 480: 'Temporarily Unavailable', 486: 'Busy Here', 488: 'Not Acceptable Here',
  600: 'Busy Everywhere', 603: 'Decline', 607: 'Unwanted',
};

export function voiceCalls(deps: VoiceCallsDeps): VoiceCalls {
  const { db } = deps;
  /** The calls of this process whose sessions run (a stopping worker waits for them, then wraps them up). */
  const live = new Set<StartedCall>();

  /** The greeting as 8 kHz audio in the call's voice (from the greeting cache when it holds it), or undefined when it could not be made in time (the session retries). */
  async function synthesize(text: string | undefined, speaker: CallSpeaker): Promise<Int16Array | undefined> {
    if (!text) return undefined;
    const signal = AbortSignal.timeout(GREETING_WAIT_MS);
    try {
      return await speaker.audio(text, { signal, line: true });
    } catch (err) {
      // A provider's voice too slow for the greeting is not asked again on this call: the
      // configured voice says it once the call is up (and the call's state says why).
      if (signal.aborted) speaker.failed(new Error(`the greeting was not synthesized within ${GREETING_WAIT_MS} ms`));
      deps.log?.warn({ err: (err as Error).message }, 'voice call: the greeting could not be synthesized ahead');
      return undefined;
    }
  }

  async function prepare(agent: AccountRow, call: Omit<OpenRequest, 'agent' | 'channel' | 'fresh' | 'carrierRef'>, opts: { greeting?: string; waitToGreet?: boolean; voicemail?: VoicemailPlan }): Promise<PreparedVoiceCall> {
    const config = await deps.conversations.liveConfig(agent);
    const settings = voiceSettings(config);
    const greeting = callOpening(settings, { taskGreeting: opts.greeting, recorded: false }).greeting?.text;
    const spec = settings.backgroundAudio;
    const background = spec && deps.background
      ? deps.background.load(spec.url).then((pcm) => ({ bed: bedFrom(pcm, spec), afterGreeting: spec.startAfterGreeting }), (err: Error) => {
        deps.log?.warn({ agent: agent.id, err: err.message }, 'voice call: the background audio could not be loaded');
        return null;
      })
      : undefined;
    const speaker = await orgCallSpeaker(deps, settings, deps.now, agent.org_id);
    const greetingAudio = await synthesize(greeting, speaker);
    return {
      start(transport: VoiceTransport, { callId }) {
        let started: StartedCall | undefined;
        const direction = call.direction;
        const since = deps.now();
        deps.metrics?.callStarted(direction);
        let outcome = 'failed';
        const done = (async () => {
          const opened = await db.transaction().execute((tx) => deps.conversations.open(tx, { ...call, agent, channel: 'sip', fresh: true, carrierRef: callId }, deps.now()));
          started = await startCall(deps, transport, {
            conversation: opened.conversation, room: opened.room, config, settings, capabilities: CAPABILITIES.sip,
            opening: { taskGreeting: opts.greeting, waitToGreet: opts.waitToGreet }, greetingAudio, background, speaker,
            voicemail: opts.voicemail ? { plan: opts.voicemail } : undefined,
          });
          live.add(started);
          try {
            await started.done;
          } finally {
            live.delete(started);
          }
          outcome = (await conversationRepo.find(db, opened.conversation.id))?.outcome ?? 'ended';
        })().finally(() => deps.metrics?.callEnded(direction, outcome, (deps.now() - since) / 1000));
        // The call's end is the session's business; a failure to open is logged and the call hung up.
        const guarded = done.catch(async (err: Error) => {
          deps.log?.warn({ callId, err: err.message }, 'voice call: the session could not start');
          await transport.hangup('failed').catch(() => {});
        });
        return { done: guarded, answeredBy: () => started?.answeredBy() };
      },
    };
  }

  return {
    get active() {
      return live.size;
    },

    async wrapUpAll() {
      await Promise.allSettled([...live].map((c) => c.session.wrapUp()));
      await Promise.allSettled([...live].map((c) => c.done));
    },

    async inbound(call: InboundVoiceCall): Promise<PreparedVoiceCall | InboundRefusal | null> {
      // A callee that is a held number (docs/numbers.md, Arriving): its agent, if the organization
      // that admitted the call holds it; another organization's number, or one not active, is a 404.
      const number = /^\+?\d{8,15}$/.test(call.callee) ? normalizePhone(call.callee.startsWith('+') ? call.callee : `+${call.callee}`) : undefined;
      const held = number?.ok ? await phoneNumberRepo.findByNumber(db, number.e164) : undefined;
      if (held && (held.org_id !== call.orgId || held.state !== 'active')) {
        return { refuse: { status: 404, reason: 'Not Found', why: held.org_id !== call.orgId ? 'the callee is a number another organization holds' : `the callee is a number in state ${held.state}` } };
      }
      let agent = held?.agent_id != null ? await accountRepo.findById(db, held.agent_id) : undefined;
      if (held && (!agent || agent.kind !== 'agent' || agent.org_id !== call.orgId)) {
        deps.log?.warn({ orgId: call.orgId, number: held.number }, 'inbound SIP call: the agent holding the called number is gone: the organization\'s first agent answers');
        agent = undefined;
      }
      const named = held ? undefined : /^(?:camp)?(\d{1,10})$/i.exec(call.callee)?.[1];
      if (named) agent = await accountRepo.findById(db, Number(named));
      if (!agent || agent.kind !== 'agent' || agent.org_id !== call.orgId) {
        const id = await accountRepo.firstAgentId(db, call.orgId);
        agent = id === null ? undefined : await accountRepo.findById(db, id);
      }
      if (!agent) return null;
      const admission = callAdmission(admissionSettings(await deps.conversations.liveConfig(agent)), { callerName: call.callerName, callerNumber: call.caller });
      if (admission.action === 'reject') {
        return { refuse: { status: admission.code, reason: SIP_REASONS[admission.code] ?? 'Rejected', why: `the caller matched ${admission.rule}` } };
      }
      if (admission.action === 'transfer') {
        // No transfer before answering on SIP here: the call is answered and handed on at once (REFER), without the agent.
        const destination = admission.destination;
        return {
          start(transport, { callId }) {
            const done = transport.transfer(destination).catch(async (err: Error) => {
              deps.log?.warn({ callId, destination, err: err.message }, 'inbound SIP call: the cnamAutoTransferRegex transfer failed');
              await transport.hangup('failed').catch(() => {});
            });
            deps.log?.warn({ callId, destination }, 'inbound SIP call transferred before the agent answered (cnamAutoTransferRegex)');
            return { done };
          },
        };
      }
      const { address, kind } = normaliseAddress(call.caller);
      const prepared = await prepare(agent, { direction: 'inbound', counterpart: address, counterpartKind: kind, displayName: call.callerName ?? null, callerVerified: call.callerVerified === true }, {});
      return admission.ringMs > 0 ? { ...prepared, ringMs: admission.ringMs } : prepared;
    },

    async outbound(call) {
      const agent = await accountRepo.findById(db, call.agentId);
      if (!agent || agent.kind !== 'agent' || agent.org_id !== call.orgId) return null;
      const { address, kind } = normaliseAddress(call.to);
      return prepare(agent, { direction: 'outbound', counterpart: address, counterpartKind: kind, taskId: call.taskId }, {
        greeting: call.greeting, waitToGreet: call.waitToGreet, voicemail: call.voicemail,
      });
    },
  };
}
