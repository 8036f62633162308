// Whose a number is (docs/numbers.md, "Whose a number is"; "Calling and texting from a number"), on
// both engines, through the fake Twilio server (test/helpers/fake-twilio.ts records every request):
// - a number another organization's numbering provider names as its `phoneNumber` cannot be
//   brought (BYO) or bought (assign) by another organization, and a provider's `phoneNumber` cannot
//   be set to a number another organization holds (add, update, or an organization's creation);
// - an agent holding a bought number calls and texts from it (the `From` Twilio is sent), another
//   agent of the organization from the provider's `phoneNumber` as before;
// - receiveMessage's `targetAgent` finds a bought number's agent, and only for its own tenancy.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeTwilio, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINES, startHarness, type Harness, type Reply } from '../helpers/harness.ts';
import { numberCalls } from '../helpers/numbers.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { waitFor } from '../helpers/wait.ts';

const PUBLIC = 'https://numbers.callplane.test';
/** The provider's own number (Twilio's test number), what an agent without one calls from. */
const DEFAULT_FROM = '+15005550006';
const RUNTIME = { leaseMs: 3000, heartbeatMs: 50, rescueEveryMs: 0, carrierOptions: { twilio: { timeoutMs: 1500 } } };

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should name ${w}`);
}

let seq = 0;
/** A Chicago number nobody has used in this run (the issue's +1 312 555 01xx). */
const chicago = () => `+13125550${String(100 + ++seq).padStart(3, '0')}`;

for (const engine of ENGINES) {
  describe(`whose a number is [${engine}]`, () => {
    let h: Harness;
    let fake: FakeTwilio;
    let hook: Receiver;
    const n = numberCalls(() => h);
    before(async () => {
      fake = await startFakeTwilio();
      hook = await startReceiver();
      h = await startHarness(engine, { CALLPLANE_PUBLIC_URL: PUBLIC, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' }, { worker: true, runtime: RUNTIME });
    });
    after(async () => { await h?.close(); await fake?.close(); await hook?.close(); });

    const provider = (token: string, orgId: number, config: Record<string, string>, method: 'POST' | 'PUT' = 'POST') =>
      h.call(method, '/api/v2/numberingProvider', { token, query: { targetOrganizationId: orgId }, body: { providerId: 'twilio', config } });

    /** An organization on the fake Twilio account, its provider sending from `phoneNumber`. */
    async function twilioOrg(phoneNumber = DEFAULT_FROM) {
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const res = await provider(r.token, o.id, { accountSid: fake.accountSid, authToken: fake.authToken, apiBaseUrl: fake.url, phoneNumber });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return { r, o };
    }

    /** A number for sale at the fake, bought for the organization's first agent. */
    async function bought(token: string): Promise<string> {
      const number = chicago();
      fake.inventory.push({ phoneNumber: number, isoCountry: 'US', locality: 'Chicago', region: 'IL' });
      const res = await n.assign(token, { number, country: 'US' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.phoneNumber.state, 'active');
      return number;
    }

    it('BYO and assign of a number another organization\'s provider names as its phoneNumber are refused like a held number (409); its own provider\'s is not', async () => {
      const number = chicago();
      const first = await twilioOrg(number);
      const other = await twilioOrg();
      expectError(await n.byo(other.r.token, { number }, { targetAccountId: other.o.id }), 409, number, 'already held');
      fake.inventory.push({ phoneNumber: number, isoCountry: 'US', locality: 'Chicago', region: 'IL' });
      // Nor is it offered: a search leaves it out, as it leaves out held numbers.
      const offered = await n.locality(other.o.token, { city: 'Chicago', region: 'IL', country: 'US' });
      assert.ok(!(offered.body.numbers ?? []).some((x: any) => x.number === number), JSON.stringify(offered.body));
      const from = fake.requests.length;
      expectError(await n.assign(other.o.token, { number, country: 'US' }), 409, number, 'not available');
      assert.equal(fake.requests.slice(from).filter((r) => r.method === 'POST').length, 0, 'nothing was bought');
      // Written another way, the same number.
      expectError(await n.byo(other.r.token, { number: `+1 (312) 555-${number.slice(-4)}` }, { targetAccountId: other.o.id }), 409, 'already held');
      assert.deepEqual((await n.list(other.o.token)).body.phoneNumbers, []);
      // The organization whose provider names it may bind it.
      const mine = await n.byo(first.r.token, { number }, { targetAccountId: first.o.id });
      assert.equal(mine.status, 200, JSON.stringify(mine.body));
    });

    it('a provider\'s phoneNumber that another organization holds is refused (409 naming config.phoneNumber) on add, update and an organization\'s creation', async () => {
      const holder = await twilioOrg();
      const number = await bought(holder.o.token);
      const r = await h.reseller();
      const o = await h.organization(r.id);
      const config = { accountSid: fake.accountSid, authToken: fake.authToken, apiBaseUrl: fake.url };
      expectError(await provider(r.token, o.id, { ...config, phoneNumber: number }), 409, 'config.phoneNumber', number);
      assert.equal((await provider(r.token, o.id, { ...config, phoneNumber: DEFAULT_FROM })).status, 200);
      expectError(await provider(r.token, o.id, { twilioPhoneNumber: number.slice(1) }, 'PUT'), 409, 'config.phoneNumber');
      const stored = await h.database.db.selectFrom('numbering_providers').select('config').where('org_id', '=', o.id).executeTakeFirstOrThrow();
      assert.equal(JSON.parse(stored.config).phoneNumber, DEFAULT_FROM, 'unchanged');
      const created = await h.call('POST', '/api/v2/createOrganization', {
        token: r.token, query: { targetResellerId: r.id },
        body: { orgName: 'Taker', numberingProviders: [{ providerId: 'twilio', config: { ...config, phoneNumber: number } }] },
      });
      expectError(created, 409, 'numberingProviders[0].config.phoneNumber');
      // The holder's own provider may name it.
      assert.equal((await provider(holder.r.token, holder.o.id, { phoneNumber: number }, 'PUT')).status, 200);
    });

    it('an agent holding a bought number calls and texts from it; another agent of the organization from the provider\'s phoneNumber', async () => {
      const { o } = await twilioOrg();
      const number = await bought(o.token);
      const second = await h.agent(o.id);
      const sent = async (token: string, type: 'call' | 'text') => {
        const target = `+1415555${String(1000 + ++seq)}`;
        const res = await h.call('POST', '/api/v2/tasks', { token, body: { type, target, ...(type === 'text' ? { content: 'Hello from Acme' } : {}) } });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const path = type === 'call' ? '/Calls.json' : '/Messages.json';
        const req = await waitFor(`the ${type} to ${target}`, () => Promise.resolve(fake.requests.find((x) => x.path.endsWith(path) && x.form.get('To') === target)), 15_000);
        return req.form.get('From');
      };
      const agentToken = await h.tokenFor(o.agentId);
      assert.equal(await sent(agentToken, 'call'), number);
      assert.equal(await sent(agentToken, 'text'), number);
      assert.equal(await sent(second.token, 'call'), DEFAULT_FROM);
      assert.equal(await sent(second.token, 'text'), DEFAULT_FROM);
      // Returned, it is no longer the agent's: back to the provider's number.
      assert.equal((await n.ret(o.token, { number })).status, 200);
      assert.equal(await sent(agentToken, 'call'), DEFAULT_FROM);
    });

    it('receiveMessage with targetAgent a bought number reaches the agent holding it; another organization\'s token gets 404', async () => {
      const { r, o } = await twilioOrg();
      const second = await h.agent(o.id);
      const number = await bought(await h.tokenFor(second.id));
      const receive = (token: string, targetAgent: string) => h.call('POST', '/api/v2/agent/receiveMessage', {
        token, body: { targetAgent, sourceAddress: `visitor-${++seq}@example.com`, message: 'Hello, are you open today?', outboundMessageWebhookUrl: hook.url },
      });
      for (const written of [number, `1 312 555 ${number.slice(-4)}`]) {
        const res = await receive(r.token, written);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const msg = await h.database.db.selectFrom('conversation_messages').select('conversation_id').where('id', '=', res.body.messageUuid).executeTakeFirstOrThrow();
        const c = await h.database.db.selectFrom('conversations').select(['account_id', 'org_id']).where('id', '=', msg.conversation_id).executeTakeFirstOrThrow();
        assert.deepEqual([c.org_id, c.account_id], [o.id, second.id], 'the agent holding the number, not the first agent');
      }
      const stranger = await twilioOrg();
      expectError(await receive(stranger.r.token, number), 404, 'targetAgent');
    });
  });
}
