// Spoken conversations over Twilio (docs/conversations.md, Voice over Twilio). When a task's call
// is answered, Twilio fetches its TwiML (task-callbacks.ts hands it here): the
// call's conversation opens and the agent greets and listens (<Gather input="speech">). Each time
// the caller has spoken — or stayed silent — Twilio posts the gather action (routes.ts): what
// was said is recorded, the agent's turn runs inline on its live configuration, and the answer is
// TwiML that says the reply and listens again, hangs up, or dials a transfer. The call's final
// status callback ends the conversation if nothing else did. With CALLPLANE_TWILIO_VOICE=stream the
// answer is <Connect><Stream> instead and the call is a voice session over a Media Stream
// (media-streams.ts).
import type { Config } from '../../config.ts';
import { bool } from '../../db/flags.ts';
import type { AccountRow, ConversationOutcome, ConversationRow, Db, RoomRow, TaskRow } from '../../db/types.ts';
import { Conflict, Invalid } from '../../http/errors.ts';
import type { SecretBox } from '../../lib/crypto.ts';
import { TWILIO } from '../../providers/index.ts';
import { first } from '../../providers/twilio/form.ts';
import { accountRepo } from '../accounts/repository.ts';
import { admissionSettings, voiceSettings, type VoiceSettings } from '../agents/voice-settings.ts';
import { providerSettings } from '../numbering-providers/carriers.ts';
import { gatherUrl as gatherUrlOf, whisperUrl } from '../../providers/twilio/paths.ts';
import type { CallConversations } from './task-callbacks.ts';
import { refuseTwilioRequest, twilioNumberHolder, verifyTwilioRequest, type TwilioRequest } from './verify.ts';
import { HANGUP, playDigits, say, twimlDocument } from '../../providers/twilio/twiml.ts';
import { countersOf, noteCallState, readCallState } from '../voice/call-state.ts';
import { boundedTurn, turnFailure } from '../voice/turn-limit.ts';
import { CAPABILITIES, callAdmission, callOpening, decide, phrasesFor, transferAnnouncement, type AgentLine, type CallCounters, type CallDecision, type CallEvent } from '../voice/call-policy.ts';
import { conversationRepo, roomRepo } from '../conversations/repository.ts';
import { MAX_MESSAGE_CHARS, normaliseAddress, recordAgentLine, type ConversationService } from '../conversations/service.ts';
import type { TurnLatencies, TurnStamps } from '../voice/latency.ts';
import type { TurnResult, TurnRunner } from '../conversations/turn.ts';
import { renderDecision, renderOpening, renderRefusal, ringBeforeAnswer, voiceStyle, type GatherTargets } from './voice-twiml.ts';

/** Call statuses after which nothing more happens on the call. */
const FINAL_CALL_STATUSES = new Set(['completed', 'busy', 'no-answer', 'failed', 'canceled']);
/** Twilio's StirVerstat for a caller ID the originating carrier fully attested (SHAKEN level A). */
const FULL_ATTESTATION = 'TN-Validation-Passed-A';

type Log = { warn(obj: object, msg: string): void };

/** One post of the gather action (or an attended transfer's whisper): ?conversation names the call's conversation. */
export interface GatherRequest extends TwilioRequest {
  conversation: unknown;
}

/** The call policy's counters, kept in conversations.state between gathers. */
type VoiceState = CallCounters;
const GATHER = CAPABILITIES.gather;

export interface TwilioVoiceDeps {
  db: Db;
  box: SecretBox;
  config: Pick<Config, 'publicUrl'>;
  conversations: Pick<ConversationService, 'open' | 'recordInbound' | 'end' | 'liveConfig'>;
  turns: Pick<TurnRunner, 'run'>;
  /** VOICE_TURN_TIMEOUT_MS; tests shorten it. */
  turnTimeoutMs: number;
  /**
   * The <Connect><Stream> of a call's conversation (media-streams.ts), which an answered call of
   * an organization that streams is given instead of <Gather>; absent, every call gathers.
   */
  streamTwiml?: (conversationId: string, callSid: string) => string;
  /** How calls talk unless the organization's twilio provider says (`voice`): CALLPLANE_TWILIO_VOICE. */
  defaultVoice: 'stream' | 'gather';
  now: () => number;
  /** Where each turn's latency goes (voice/latency.ts): on gathered calls only what we can see (Twilio listens and speaks). */
  latency?: TurnLatencies;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function twilioVoice(deps: TwilioVoiceDeps) {
  const { db } = deps;
  const clock = deps.now;

  const gatherUrl = (conversationId: string) => gatherUrlOf(deps.config.publicUrl, conversationId);
  const targets = (conversationId: string): GatherTargets => ({
    action: gatherUrl(conversationId), whisper: (name) => whisperUrl(deps.config.publicUrl, conversationId, name),
  });

  /**
   * Whether the organization's calls stream (a Media Stream to us) or gather (Twilio's speech): its
   * twilio provider's `voice` setting, else the deployment's CALLPLANE_TWILIO_VOICE.
   */
  async function streams(orgId: number): Promise<boolean> {
    if (!deps.streamTwiml) return false;
    const chosen = (await providerSettings(db, deps.box, orgId, TWILIO))?.voice;
    return (chosen === 'stream' || chosen === 'gather' ? chosen : deps.defaultVoice) === 'stream';
  }

  /** The organization (and agent) a number's webhook is for: by To, checked with that organization's own auth token. */
  const numberHolder = (req: TwilioRequest, log: Log, what: string) => twilioNumberHolder(deps, req, log, what);

  /** Records what the call says now and its counters, and (with `end`) ends the conversation after. */
  async function settle(c: ConversationRow, state: VoiceState, said: AgentLine | undefined, end?: { outcome: ConversationOutcome; detail: string | null }): Promise<void> {
    const now = clock();
    await db.transaction().execute(async (tx) => {
      if (said) await recordAgentLine(tx, c, said, now);
      await noteCallState(tx, c.id, state, now);
    });
    if (end) await deps.conversations.end(c.id, end.outcome, end.detail);
  }

  /**
   * The policy's decision after `event`, recorded (what is said, the counters, the end) and
   * rendered as TwiML after `reply` (the agent's words this turn).
   */
  async function render(c: ConversationRow, settings: VoiceSettings, state: VoiceState, event: CallEvent, reply = ''): Promise<{ decision: CallDecision; counters: CallCounters; twiml: string }> {
    const { counters, decision } = decide(settings, state, event, GATHER);
    // The turn is run before anything is recorded; its counters are the next event's.
    if (decision.next === 'answer') return { decision, counters, twiml: '' };
    const end = decision.next === 'hangup' ? { outcome: decision.outcome, detail: decision.detail }
      : decision.next === 'transfer' ? { outcome: 'transferred' as const, detail: `${decision.name} (${decision.destination})`.slice(0, 500) } : undefined;
    await settle(c, counters, decision.next === 'transfer' ? undefined : decision.say, end);
    return { decision, counters, twiml: renderDecision(voiceStyle(settings), decision, targets(c.id), reply) };
  }

  /**
   * Who answers a call to the organization's number: the agent holding it (its live
   * configuration), else — a number configured by hand, or its agent deleted (logged) — the
   * organization's first agent.
   */
  async function answeringAgent(orgId: number, holder: number | null, log: Log): Promise<AccountRow | undefined> {
    if (holder !== null) {
      const held = await accountRepo.findById(db, holder);
      if (held && held.org_id === orgId && held.kind === 'agent') return held;
      log.warn({ orgId, agentId: holder }, 'the agent holding the called number is gone: the organization\'s first agent answers');
    }
    const fallback = await accountRepo.firstAgentId(db, orgId);
    return fallback === null ? undefined : accountRepo.findById(db, fallback);
  }

  /** The opening's lines (the recording notice, the greeting), as the gather path says them at once. */
  async function recordOpening(tx: Parameters<typeof recordAgentLine>[0], c: ConversationRow, opening: ReturnType<typeof callOpening>, at: number): Promise<void> {
    for (const line of [opening.disclosure, opening.notice, opening.greeting]) if (line) await recordAgentLine(tx, c, line, at);
  }

  const service = {
    /**
     * The path an organization's Twilio calls take (`media-stream` or `gather`), as an answered
     * call will be told: known when a call is placed, so the call policy's decider of that path
     * (CAPABILITIES[path].voicemailDetection) is the one asked for.
     */
    async callPath(orgId: number): Promise<'media-stream' | 'gather'> {
      return await streams(orgId) ? 'media-stream' : 'gather';
    },

    /**
     * A task's call was answered: its conversation opens (one per CallSid: a second fetch of the
     * TwiML answers the same) and the agent greets — the task's own greeting, else the live
     * welcomeMessage — and listens.
     */
    async answer(task: TaskRow, callSid: string): Promise<string> {
      const agent = await accountRepo.findById(db, task.account_id);
      if (!agent || !task.target) return twimlDocument(HANGUP);
      const settings = voiceSettings(await deps.conversations.liveConfig(agent));
      const opening = callOpening(settings, { taskGreeting: task.greeting, waitToGreet: bool(task.wait_to_greet), recorded: GATHER.recording });
      const streamed = await streams(task.org_id);
      let c = await conversationRepo.byCarrierRef(db, task.org_id, callSid);
      if (c?.ended_at != null) return twimlDocument(HANGUP);
      if (!c) {
        const now = clock();
        const { address, kind } = normaliseAddress(task.target);
        c = await db.transaction().execute(async (tx) => {
          const o = await deps.conversations.open(tx, {
            agent, channel: 'voice', direction: 'outbound', counterpart: address, counterpartKind: kind,
            taskId: task.id, carrierRef: callSid, fresh: true,
          }, now);
          // A streamed call's voice session records its opening as it says it.
          if (!streamed) await recordOpening(tx, o.conversation, opening, now);
          return o.conversation;
        });
      }
      // Streamed: the keys to press on answer, then the call's audio is ours (the pause and the
      // greeting are the voice session's).
      if (streamed) return twimlDocument(playDigits(opening.digits), deps.streamTwiml!(c.id, callSid));
      return renderOpening(voiceStyle(settings), opening, gatherUrl(c.id));
    },

    /**
     * A call to one of our numbers (the number's voice webhook): the number's holder (phone_numbers,
     * else the organization whose twilio provider's phoneNumber is `To`), checked by its
     * signature; the agent holding the number answers (the organization's first agent for a number
     * configured by hand, or when the holding agent is gone), greeting with the live welcomeMessage and listening —
     * streamed or gathered as the deployment chooses. A suspended organization, or one with no
     * agent, rejects the call (busy). A retry of the webhook for the same CallSid answers the
     * same conversation.
     */
    async incoming(req: TwilioRequest, log: Log): Promise<string> {
      const { orgId, agentId: holder } = await numberHolder(req, log, 'twilio incoming call');
      const callSid = first(req.params, 'CallSid');
      if (!callSid || callSid.length > 64) throw new Invalid('CallSid is required');
      const from = (first(req.params, 'From') ?? '').slice(0, 256) || 'anonymous';
      const org = await accountRepo.findWithSuspension(db, orgId);
      const agent = org && !org.suspended ? await answeringAgent(orgId, holder, log) : undefined;
      if (!agent) {
        log.warn({ orgId, callSid, suspended: Boolean(org?.suspended) }, 'twilio incoming call rejected: the organization is suspended or has no agent');
        return twimlDocument('<Reject reason="busy"/>');
      }
      const live = await deps.conversations.liveConfig(agent);
      const callerName = first(req.params, 'CallerName') ?? null;
      let admission = callAdmission(admissionSettings(live), { callerName, callerNumber: from });
      if (admission.action === 'transfer' && !GATHER.canTransferTo(admission.destination)) {
        // Twilio dials phone numbers only (CAPABILITIES): an ext:/pbx: destination is answered instead.
        log.warn({ orgId, callSid, destination: admission.destination }, 'cnamAutoTransferDestination is not a phone number Twilio can dial: the agent answers');
        admission = { action: 'answer', ringMs: admissionSettings(live).ringMs };
      }
      if (admission.action !== 'answer') {
        log.warn({ orgId, agentId: agent.id, callSid, rule: admission.rule, action: admission.action }, `twilio incoming call ${admission.action === 'reject' ? 'rejected' : 'transferred'} before answer by ${admission.rule}`);
        return renderRefusal(admission);
      }
      const settings = voiceSettings(live);
      const opening = callOpening(settings, { recorded: GATHER.recording });
      const streamed = await streams(orgId);
      let c = await conversationRepo.byCarrierRef(db, orgId, callSid);
      if (c?.ended_at != null) return twimlDocument(HANGUP);
      if (!c) {
        const now = clock();
        const { address, kind } = normaliseAddress(from);
        c = await db.transaction().execute(async (tx) => {
          const o = await deps.conversations.open(tx, {
            agent, channel: 'voice', direction: 'inbound', counterpart: address, counterpartKind: kind,
            displayName: callerName?.slice(0, 100) ?? null, carrierRef: callSid, fresh: true,
            // Only full STIR/SHAKEN attestation (the carrier knows the caller has the number) verifies the caller ID.
            callerVerified: first(req.params, 'StirVerstat') === FULL_ATTESTATION,
          }, now);
          if (!streamed) await recordOpening(tx, o.conversation, opening, now);
          return o.conversation;
        });
      }
      if (streamed) return twimlDocument(ringBeforeAnswer(admission.ringMs), playDigits(opening.digits), deps.streamTwiml!(c.id, callSid));
      return renderOpening(voiceStyle(settings), opening, gatherUrl(c.id), admission.ringMs);
    },

    /** A Twilio number's call status callback: a final status ends the call's conversation `hung_up`. */
    async incomingStatus(req: TwilioRequest, log: Log): Promise<void> {
      const { orgId } = await numberHolder(req, log, 'twilio call status');
      const callSid = first(req.params, 'CallSid');
      const status = first(req.params, 'CallStatus') ?? '';
      if (!callSid || !FINAL_CALL_STATUSES.has(status)) return;
      const c = await conversationRepo.byCarrierRef(db, orgId, callSid);
      if (!c || c.ended_at !== null) return;
      await deps.conversations.end(c.id, 'hung_up', `call ${status}`);
    },

    /**
     * An attended transfer's whisper: Twilio asks, once the destination has answered, what it
     * hears before the calls are joined. Signed with the conversation's organization's token.
     */
    async whisper(req: GatherRequest & { name: unknown }, log: Log): Promise<string> {
      const id = req.conversation;
      const c = typeof id === 'string' && UUID.test(id) ? await conversationRepo.find(db, id) : undefined;
      if (!c || c.channel !== 'voice') refuseTwilioRequest(deps, req, log, 'twilio whisper', 'no such voice conversation');
      await verifyTwilioRequest(deps, c.org_id, req, log, 'twilio whisper', { conversation: c.id });
      const agent = await accountRepo.findById(db, c.account_id);
      const settings = voiceSettings(agent ? await deps.conversations.liveConfig(agent) : {});
      return twimlDocument(say(voiceStyle(settings).say, transferAnnouncement(settings.language, typeof req.name === 'string' ? req.name.slice(0, 100) : undefined)));
    },

    /** The call ended: its conversation, when still open, ends `hung_up`. */
    async ended(task: TaskRow, callSid: string, status: string): Promise<void> {
      const c = await conversationRepo.byCarrierRef(db, task.org_id, callSid);
      if (!c || c.ended_at !== null) return;
      await deps.conversations.end(c.id, 'hung_up', `call ${status}`.slice(0, 100));
    },

    /**
     * The gather action: what the caller said (SpeechResult), or nothing. Signed like every
     * request of Twilio's (403 otherwise); the conversation must be this call's. Never a 5xx for
     * a failed turn: the caller hears an apology.
     */
    async gather(req: GatherRequest, log: Log): Promise<string> {
      // The transcript arrives with the request (Twilio recognised it): our part of the turn starts here.
      const stamps: TurnStamps = { transcriptAt: clock() };
      const id = req.conversation;
      if (typeof id !== 'string' || id === '') throw new Invalid('conversation query parameter is required');
      const c = UUID.test(id) ? await conversationRepo.find(db, id) : undefined;
      if (!c || c.channel !== 'voice') refuseTwilioRequest(deps, req, log, 'twilio gather', 'no such voice conversation', { conversation: id.slice(0, 64) });
      await verifyTwilioRequest(deps, c.org_id, req, log, 'twilio gather', { conversation: c.id });
      const callSid = first(req.params, 'CallSid');
      if (!callSid) throw new Invalid('CallSid is required');
      if (callSid !== c.carrier_ref) throw new Conflict(`CallSid ${callSid.slice(0, 64)} is not the call of conversation ${c.id}`);
      if (c.ended_at !== null) return twimlDocument(HANGUP);

      const agent = await accountRepo.findById(db, c.account_id);
      const room: RoomRow | undefined = await roomRepo.find(db, c.room_id);
      if (!agent || !room) {
        await deps.conversations.end(c.id, 'failed', 'the agent was deleted');
        return twimlDocument(HANGUP);
      }
      const config = await deps.conversations.liveConfig(agent);
      const settings = voiceSettings(config);
      const speech = (first(req.params, 'SpeechResult') ?? '').trim();
      const heard = await render(c, settings, countersOf(readCallState(c.state)), { kind: 'heard', text: speech });
      if (heard.decision.next !== 'answer') return heard.twiml;
      const state = heard.counters;

      // What the caller said is data for the model, never an instruction to us: bounded, recorded
      // as said, escaped wherever it is written into TwiML.
      const text = speech.slice(0, MAX_MESSAGE_CHARS);
      const confidence = Number(first(req.params, 'Confidence'));
      const now = clock();
      const inbound = await db.transaction().execute((tx) => deps.conversations.recordInbound(tx, { room, conversation: c, opened: false }, {
        text, data: { confidence: Number.isFinite(confidence) ? confidence : null, ...(speech.length > text.length ? { clipped: speech.length } : {}) },
      }, now));
      let result: TurnResult;
      try {
        result = await boundedTurn(deps.turns, {
          conversation: c, room, config, inbound: { id: inbound.id, text, at: now }, allowAsync: false, replyStatus: 'success',
          onText: (delta) => { if (stamps.firstTokenAt === undefined && delta !== '') stamps.firstTokenAt = clock(); },
        }, deps.turnTimeoutMs);
        if (result.kind !== 'reply') throw new Error('the turn waits for an automation answer, which a call cannot');
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        log.warn({ conversation: c.id, err: message }, 'voice turn failed');
        const event: CallEvent = turnFailure(err);
        try {
          return (await render(c, settings, state, event)).twiml;
        } catch (inner) {
          log.warn({ conversation: c.id, err: inner instanceof Error ? inner.message : String(inner) }, 'recording a failed voice turn failed');
          return renderDecision(voiceStyle(settings), { next: 'listen', say: { text: phrasesFor(settings.language).apology, kind: 'apology' } }, targets(c.id));
        }
      }
      const answered = (await render(c, settings, state, { kind: 'replied', effects: result.effects }, result.text)).twiml;
      // Twilio's recogniser and <Say> run at Twilio: only the model's first token and our answer are ours to time.
      stamps.answeredAt = clock();
      await deps.latency?.record(c, result.messageId, { path: 'gather', vad: null, stt: 'twilio', llm: result.simulated ? 'simulated' : result.engine, tts: 'twilio' }, stamps);
      return answered;
    },
  };
  return service satisfies CallConversations;
}

export type TwilioVoice = ReturnType<typeof twilioVoice>;
