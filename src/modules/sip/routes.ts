// Every SIP operation of the contract: registration (POST/GET/DELETE, available), IP whitelist,
// outbound routes and captures. Handlers are a schema and one service call (service.ts).
import { Type } from '@sinclair/typebox';
import type { App } from '../../http/types.ts';
import { AccountId, Envelope, errors, Obj, Security, Nullable } from '../../http/schemas.ts';
import type { SipService } from './service.ts';

const tags = ['SIP'];
const Target = { targetAccountId: Type.Optional(AccountId('Organization (or one of its agents) to act on, for resellers and partners; an organization token acts on itself')) };
const TargetQuery = Type.Object(Target);
const Str = (description: string, maxLength = 300) => Type.Optional(Type.String({ description, maxLength }));

const Registration = Obj({
  id: Type.Integer(),
  userId: Type.Integer({ description: 'The organization' }),
  aor: Type.String(), username: Type.String(), authUsername: Nullable(Type.String()),
  sipRealm: Nullable(Type.String()),
  proxy: Type.Optional(Type.String({ description: 'host[:port] REGISTERs go to; absent when they go to the AOR\'s host' })),
  port: Nullable(Type.Number()), transport: Type.String(), subscribe: Type.Boolean(),
  status: Type.String({ description: 'pending (first REGISTER not answered yet), registered, failed, or deleting' }),
  registered: Type.Boolean(), lastCode: Nullable(Type.Number()), lastReason: Nullable(Type.String()), lastError: Nullable(Type.String()),
  expiresAt: Nullable(Type.Number()), lastAttemptAt: Nullable(Type.Number()), nextAttemptAt: Nullable(Type.Number()),
  presence: Nullable(Obj({
    subscription: Nullable(Type.String(), 'active, pending, terminated or failed (null until the first SUBSCRIBE is answered)'),
    state: Nullable(Type.String(), 'open or closed, as the last NOTIFY\'s PIDF <basic> said (null: not said yet)'),
    code: Nullable(Type.Number()), reason: Nullable(Type.String()),
    updatedAt: Nullable(Type.Number()),
  }), 'The AOR\'s presence when subscribe is true (null otherwise)'),
  createdAt: Type.Number(), updatedAt: Type.Number(),
}, 'A SIP registration (the password is never returned); times are unix seconds');

const RegistrationBody = Type.Object({
  aor: Str('Full SIP address of record: sip:1001@pbx.example.com (or 1001@pbx.example.com)'),
  username: Str('SIP user (our Contact\'s user; default the AOR\'s user)', 128),
  authUsername: Str('User name for digest authentication (default username)', 128),
  password: Type.Optional(Type.String({ description: 'SIP password (required to create; omitted on update keeps the stored one, unless the registrar it goes to changes: then required again); never returned', maxLength: 256 })),
  sipRealm: Str('SIP domain; with username it builds the AOR when aor is omitted', 255),
  proxy: Str('Outbound proxy host[:port] REGISTERs are sent to (default: the AOR\'s host)'),
  port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'Registrar port (default 5060, 5061 for TLS)' })),
  transport: Str('UDP, TCP or TLS (default UDP)', 10),
  subscribe: Type.Optional(Type.Boolean({ description: 'Whether to subscribe for presence: once registered, the owning worker SUBSCRIBEs to the AOR\'s presence (Event: presence) through the same proxy with the same credentials; GET shows it as presence, changes are registration.presence webhooks' })),
}, { additionalProperties: true });

const AvailableBody = Type.Object({
  aor: Str('Full SIP AOR to check'),
  username: Str('User part, with sipRealm, when aor is omitted', 128),
  sipRealm: Str('SIP domain, with username, when aor is omitted', 255),
}, { additionalProperties: true });

const SipIngress = Obj({
  enabled: Type.Boolean({ description: 'Whether this deployment runs its SIP listener (CALLPLANE_SIP_ENABLED)' }),
  host: Type.String({ description: 'The host name or address to send INVITEs to' }),
  port: Nullable(Type.Integer({ description: 'The SIP port; null when the listener picks a free one at start (CALLPLANE_SIP_PORT=0)' })),
  transports: Type.Array(Type.String(), { description: 'The transports the listener takes: udp, tcp' }),
  uriForms: Type.Array(Obj({
    form: Type.String({ description: 'A Request-URI template: <number> is one of the organization\'s numbers in E.164, <user> its registration\'s user' }),
    meaning: Type.String(),
  })),
});
const WhitelistEntry = Obj({ userId: Type.Number(), label: Type.String(), timestamp: Type.Number(), ip: Type.String() });
const WhitelistBody = Type.Object({
  ip: Type.String({ description: 'IPv4 or IPv6 address, optionally a CIDR range (203.0.113.0/24)', maxLength: 100 }),
  label: Type.Optional(Type.String({ description: 'Friendly label. Extension: optional (the contract requires it); without it an entry has none, or keeps the one it had', maxLength: 200 })),
}, { additionalProperties: true });
const IpBody = Type.Object({ ip: Type.String({ description: 'The whitelisted address or range to remove', maxLength: 100 }) }, { additionalProperties: true });
const RouteBody = (what: string) => Type.Object({
  route: Type.String({ description: `${what}: host[:port][;transport=tcp|udp][;proxyAddress=host[:port]]`, maxLength: 500 }),
}, { additionalProperties: true });
const AddRouteBody = Type.Object({
  route: Type.String({ description: 'Outbound route to add: host[:port][;transport=tcp|udp][;proxyAddress=host[:port]]', maxLength: 500 }),
  username: Type.Optional(Type.String({ maxLength: 128, description: 'Extension: the digest user this route\'s next hop (its proxyAddress, else its host) challenges for; with password. Without them the registration\'s credentials answer only a route whose next hop is the registrar (docs/sip.md)' })),
  password: Type.Optional(Type.String({ maxLength: 256, description: 'Extension: the route\'s digest password (sealed, never returned; answers only the route\'s next hop). Sent for an existing route, it replaces that route\'s credentials' })),
}, { additionalProperties: true });
const RouteCredential = Obj({
  route: Type.String(), username: Type.String(), password: Type.String({ description: 'Masked' }),
}, 'An outbound route\'s own digest credentials (extension)');
const RoutesAnswer = { routes: Type.Array(Type.String()), routeCredentials: Type.Optional(Type.Array(RouteCredential)) };

const CapturesQuery = Type.Object({
  ...Target,
  sipCallId: Type.String({ minLength: 1, maxLength: 500, description: 'SIP Call-ID header value' }),
  from: Type.Optional(Type.Number({ minimum: 0, description: 'Epoch millis start of search window' })),
  to: Type.Optional(Type.Number({ minimum: 0, description: 'Epoch millis end of search window' })),
  format: Type.Optional(Type.String({
    maxLength: 20,
    description: 'text | pcap | json | transaction: json (default) lists the messages; text is a transcript (text/plain); '
      + 'pcap a libpcap file Wireshark opens (application/vnd.tcpdump.pcap); transaction the messages grouped by SIP transaction',
  })),
});
const CaptureCallsQuery = Type.Object({
  ...Target,
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'At most this many Call-IDs (default 20)' })),
});
const CaptureCall = Obj({
  sipCallId: Type.String(),
  firstAt: Type.Number({ description: 'Epoch millis of its first captured message' }),
  lastAt: Type.Number({ description: 'Epoch millis of its last captured message' }),
  count: Type.Integer({ description: 'Messages captured' }),
  firstLine: Type.String({ description: 'The first message\'s start line' }),
  method: Type.Union([Type.String(), Type.Null()], { description: 'The first message\'s method (REGISTER, INVITE, SUBSCRIBE …); null when the first captured message is a response' }),
});
const Capture = Obj({
  timestamp: Type.Number({ description: 'Epoch millis' }), direction: Type.String({ description: 'in (received) or out (sent)' }),
  transport: Type.String(), source: Type.String(), destination: Type.String(), message: Type.String(),
});
const Transaction = Obj({
  branch: Type.Union([Type.String(), Type.Null()], { description: 'The top Via\'s branch' }),
  method: Type.Union([Type.String(), Type.Null()], { description: 'The CSeq method (INVITE for the ACK of a non-2xx answer)' }),
  cseq: Type.Union([Type.Integer(), Type.Null()]),
  finalStatus: Type.Union([Type.Integer(), Type.Null()], { description: 'The final answer (>= 200), null when none was captured' }),
  firstAt: Type.Number({ description: 'Epoch millis' }), lastAt: Type.Number({ description: 'Epoch millis' }),
  messages: Type.Array(Capture),
}, 'One SIP transaction of the call: its messages, retransmissions included, in capture order');

export async function sipRoutes(app: App, { sip }: { sip: SipService }): Promise<void> {
  app.post('/api/v2/sip/registration', {
    schema: {
      operationId: 'upsertSipRegistration', tags, security: Security, summary: 'Create or update SIP registration',
      description: 'Stores the registration and waits (14 s at most: a worker\'s claim turn and the REGISTER\'s own 10 s) for its first REGISTER: 201 created and accepted, 200 updated and accepted, '
        + '502 when the registrar refuses or does not answer (a new registration is then not kept; an update is undone), 409 when another organization holds the AOR.',
      querystring: TargetQuery, body: RegistrationBody,
      response: { 200: Envelope({ registration: Registration }), 201: Envelope({ registration: Registration }), ...errors(400, 403, 404, 409, 502) },
    },
  }, async (req, reply) => {
    const r = await sip.upsertRegistration(req.scope, req.query.targetAccountId, req.body);
    return reply.status(r.status).send(r.body);
  });

  app.get('/api/v2/sip/registration', {
    schema: {
      operationId: 'getSipRegistration', tags, security: Security, summary: 'Get SIP registration (with its registration status)',
      querystring: TargetQuery, response: { 200: Envelope({ registration: Registration }), ...errors(403, 404) },
    },
  }, async (req) => sip.getRegistration(req.scope, req.query.targetAccountId));

  app.delete('/api/v2/sip/registration', {
    schema: {
      operationId: 'deleteSipRegistration', tags, security: Security, summary: 'Delete SIP registration (un-REGISTERs it first)',
      querystring: TargetQuery, response: { 200: Envelope({ unregistered: Type.Boolean() }), ...errors(403, 404) },
    },
  }, async (req) => sip.deleteRegistration(req.scope, req.query.targetAccountId));

  app.post('/api/v2/sip/registration/available', {
    schema: {
      operationId: 'checkSipRegistrationAvailability', tags, security: Security, summary: 'Check SIP registration AOR availability',
      querystring: TargetQuery, body: AvailableBody,
      response: { 200: Envelope({ available: Type.Boolean() }), ...errors(400, 403, 404) },
    },
  }, async (req) => sip.available(req.scope, req.query.targetAccountId, req.body));

  app.get('/api/v2/sip/ipWhitelist', {
    schema: {
      operationId: 'listSipIpWhitelist', tags, security: Security, summary: 'List SIP IP Whitelist',
      querystring: TargetQuery, response: { 200: Envelope({ whitelist: Type.Array(WhitelistEntry) }), ...errors(403, 404) },
    },
  }, async (req) => sip.listWhitelist(req.scope, req.query.targetAccountId));

  app.post('/api/v2/sip/ipWhitelist', {
    schema: {
      operationId: 'addSipIpWhitelist', tags, security: Security, summary: 'Add IP to SIP IP Whitelist (201; 200 when it was there, with the new label)',
      querystring: TargetQuery, body: WhitelistBody,
      response: { 200: Envelope({ whitelist: Type.Array(WhitelistEntry) }), 201: Envelope({ whitelist: Type.Array(WhitelistEntry) }), ...errors(400, 403, 404) },
    },
  }, async (req, reply) => {
    const r = await sip.addWhitelist(req.scope, req.query.targetAccountId, req.body);
    return reply.status(r.status).send(r.body);
  });

  app.delete('/api/v2/sip/ipWhitelist', {
    schema: {
      operationId: 'removeSipIpWhitelist', tags, security: Security, summary: 'Remove IP from SIP IP Whitelist',
      querystring: TargetQuery, body: IpBody, response: { 200: Envelope({}), ...errors(400, 403, 404) },
    },
  }, async (req) => sip.removeWhitelist(req.scope, req.query.targetAccountId, req.body));

  app.get('/api/v2/sip/outboundRoutes', {
    schema: {
      operationId: 'listSipOutboundRoutes', tags, security: Security, summary: 'List SIP Outbound Routes',
      querystring: TargetQuery, response: { 200: Envelope(RoutesAnswer), ...errors(403, 404) },
    },
  }, async (req) => sip.listRoutes(req.scope, req.query.targetAccountId));

  app.post('/api/v2/sip/outboundRoutes', {
    schema: {
      operationId: 'addSipOutboundRoute', tags, security: Security, summary: 'Add SIP Outbound Route (201; 200 when an equivalent route exists)',
      querystring: TargetQuery, body: AddRouteBody,
      response: { 200: Envelope(RoutesAnswer), 201: Envelope(RoutesAnswer), ...errors(400, 403, 404) },
    },
  }, async (req, reply) => {
    const r = await sip.addRoute(req.scope, req.query.targetAccountId, req.body);
    return reply.status(r.status).send(r.body);
  });

  app.delete('/api/v2/sip/outboundRoutes', {
    schema: {
      operationId: 'removeSipOutboundRoute', tags, security: Security, summary: 'Remove SIP Outbound Route',
      querystring: TargetQuery, body: RouteBody('Outbound route to remove'), response: { 200: Envelope({}), ...errors(400, 403, 404) },
    },
  }, async (req) => sip.removeRoute(req.scope, req.query.targetAccountId, req.body));

  app.get('/api/v2/sip/ingress', {
    schema: {
      operationId: 'getSipIngress', tags, security: Security,
      summary: 'Where to send SIP calls to this deployment (callplane extension)',
      description: 'Read-only, from the deployment\'s configuration: the host peers reach (CALLPLANE_SIP_ADVERTISE_HOST, else the bind address or the first outside IPv4 address), the SIP port (CALLPLANE_SIP_PORT), the transports the listener takes, and the Request-URI forms an INVITE may use to reach an organization\'s agent. `enabled` false: this deployment takes no SIP calls.',
      querystring: TargetQuery,
      response: { 200: Envelope({ ingress: SipIngress }), ...errors(403, 404) },
    },
  }, async (req) => sip.ingress(req.scope, req.query.targetAccountId));

  app.get('/api/v2/sip/captures/calls', {
    schema: {
      operationId: 'listSipCaptureCalls', tags, security: Security,
      summary: 'List the Call-IDs of the organization\'s SIP captures, the most recently active first (callplane extension)',
      description: 'What GET /api/v2/sip/captures needs: the Call-IDs captured for the organization (its registration\'s, its calls\', refused INVITEs naming it), each with its first and last message time, its count and its first message\'s start line.',
      querystring: CaptureCallsQuery,
      response: { 200: Envelope({ count: Type.Integer(), calls: Type.Array(CaptureCall) }), ...errors(400, 403, 404) },
    },
  }, async (req) => sip.captureCalls(req.scope, req.query));

  app.get('/api/v2/sip/captures', {
    schema: {
      operationId: 'getSipCaptures', tags, security: Security, summary: 'Fetch SIP Captures by SIP Call-ID (json, text, pcap or transaction)',
      querystring: CapturesQuery,
      response: {
        200: Type.Union([
          Envelope({ sipCallId: Type.String(), count: Type.Integer(), captures: Type.Array(Capture) }, 'format=json'),
          Envelope({ sipCallId: Type.String(), count: Type.Integer(), transactions: Type.Array(Transaction) }, 'format=transaction'),
        ]),
        ...errors(400, 403, 404),
      },
    },
  }, async (req, reply) => {
    const r = await sip.captures(req.scope, req.query);
    if (r.text !== undefined) return reply.type('text/plain; charset=utf-8').send(r.text as never);
    if (r.pcap !== undefined) {
      const name = `sip-${req.query.sipCallId.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 100)}.pcap`;
      return reply.type('application/vnd.tcpdump.pcap').header('content-disposition', `attachment; filename="${name}"`).send(r.pcap as never);
    }
    return r.json;
  });
}
