// The agent's side of an agent test's voice-mode call (docs/testing-agents.md, "Voice mode"): a SIP
// endpoint on loopback, of this one call, that answers the test's INVITE as an inbound call is
// answered (src/sip/answer.ts: 100, the offer, an RTP port, 200 with our SDP) and runs the agent's
// voice session on it, as every call we carry starts (start-call.ts) — the configured recogniser
// hears the caller, the agent's voice speaks, each turn's latency is recorded — with the run's
// frozen configuration, and its turns' tools answered by the scenario's mocks (TestTurn). The
// caller is src/modules/agent-tests/sip-caller.ts, which reaches this through the
// TestCallAnswerer port (agent-tests/voice-runner.ts) the platform fills.
import type { PortPool } from '../../media/port-pool.ts';
import { sipCallTransport } from '../../providers/sip-transfer.ts';
import { IncomingCall, SipAnswering } from '../../sip/answer.ts';
import { SipEndpoint, type RequestContext } from '../../sip/endpoint.ts';
import type { SipRequest } from '../../sip/message.ts';
import { voiceSettings } from '../agents/voice-settings.ts';
import type { TestCallAnswerer, TestCallInput, TestCallLeg } from '../agent-tests/voice-runner.ts';
import { CAPABILITIES } from './call-policy.ts';
import { startCall, type StartCallDeps } from './start-call.ts';

export interface VoiceTestCallsDeps extends StartCallDeps {
  /** The RTP ports the agent's side takes. */
  ports: PortPool;
  /** The longest a test call is held. */
  maxDurationMs: number;
}

/** The loopback address both ends of a test call use. */
const LOOPBACK = '127.0.0.1';

export function voiceTestCalls(deps: VoiceTestCallsDeps): TestCallAnswerer {
  return {
    async listen(input: TestCallInput): Promise<TestCallLeg> {
      const answering = new SipAnswering();
      let session: Promise<void> | undefined;
      let taken = false;
      let settle!: () => void;
      const over = new Promise<void>((r) => { settle = r; });
      const onInvite = async (req: SipRequest, ctx: RequestContext) => {
        // One call per endpoint: anything after the test's INVITE is refused.
        if (taken) return endpoint.respond(req, ctx, 486, 'Busy Here');
        taken = true;
        const incoming = answering.receive(endpoint, req, ctx);
        if (!(incoming instanceof IncomingCall)) return settle();
        const call = await incoming.answer({ ports: deps.ports, mediaTimeoutMs: 10_000, maxDurationMs: deps.maxDurationMs });
        if ('why' in call) return settle();
        const transport = sipCallTransport({
          endpoint, ports: deps.ports, rtp: call.rtp, call, peer: call.peer, callerEnded: call.ended, endsCall: true,
          // A test call transfers nowhere real: a transfer is a REFER to the caller, which refuses it.
          plan: async () => null, ringTimeoutMs: 1000, maxDurationMs: deps.maxDurationMs, track: () => {}, untrack: () => {},
        });
        void call.ended.then((by) => transport.end(by === 'local' ? 'ended by us' : 'hung up'));
        try {
          const started = await startCall(deps, transport, {
            conversation: input.opened.conversation, room: input.opened.room, config: input.config, settings: voiceSettings(input.config),
            capabilities: CAPABILITIES.sip, opening: {}, test: input.test,
          });
          session = started.done;
          await started.done;
        } catch (err) {
          deps.log?.warn({ conversation: input.opened.conversation.id, err: (err as Error).message }, 'agent test: the voice session could not start');
          await call.hangup().catch(() => {});
        } finally {
          settle();
        }
      };
      const endpoint: SipEndpoint = new SipEndpoint({
        host: LOOPBACK, port: 0, listen: ['UDP'], userAgent: 'callplane-agent-test',
        // Only the test's caller, on this machine, is answered.
        refuseTarget: (address) => (address === LOOPBACK ? null : 'an agent test call answers loopback only'),
        onRequest: async (req, ctx) => {
          if (ctx.remote.address !== LOOPBACK) return endpoint.respond(req, ctx, 403, 'Forbidden');
          switch (req.method) {
            case 'INVITE': return onInvite(req, ctx);
            case 'CANCEL': answering.cancel(req); settle(); return;
            case 'ACK': return;
            default: return endpoint.respond(req, ctx, 481, 'Call/Transaction Does Not Exist');
          }
        },
      });
      await endpoint.start();
      return {
        host: LOOPBACK, port: endpoint.port, target: `agent-test-${input.opened.conversation.id.slice(0, 8)}`,
        ended: over,
        async close() {
          await answering.hangupAll();
          await session?.catch(() => {});
          await endpoint.stop();
        },
      };
    },
  };
}
