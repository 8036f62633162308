// Phone numbers on the SIMULATED inventory (no numbering provider): searching by locality, prefix
// (strict and widened) and phrase (vanity letters, wildcards); assigning, listing and returning;
// the assignment race; bring-your-own; tenancy for each operation. Twilio's side:
// numbers-twilio.test.ts.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';
import { numberCalls } from '../helpers/numbers.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should name ${w}`);
}

forEachEngine('phone numbers (simulated inventory)', (h) => {
  const n = numberCalls(h);
  async function tenant() {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    return { r, o };
  }

  it('a locality search answers fictional numbers of that city, each with its place, capabilities and simulated: true, at most 20', async () => {
    const { o } = await tenant();
    const res = await n.locality(o.token, { city: 'austin', region: 'TX', country: 'us' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.success, true);
    assert.equal(res.body.simulated, true);
    assert.equal(res.body.provider, 'simulated');
    assert.equal(res.body.limit, 20);
    assert.equal(res.body.numbers.length, 20);
    for (const x of res.body.numbers) {
      assert.match(x.number, /^\+1(512|737)5550(1\d\d)$/);
      assert.deepEqual([x.locality, x.region, x.country, x.simulated, x.monthlyPrice], ['Austin', 'TX', 'US', true, null]);
      assert.deepEqual(x.capabilities, { voice: true, sms: true, mms: true });
    }
    const london = await n.locality(o.token, { city: 'London', country: 'GB' });
    assert.equal(london.status, 200, JSON.stringify(london.body));
    assert.ok(london.body.numbers.every((x: any) => x.number.startsWith('+44207946')), JSON.stringify(london.body.numbers[0]));
    // The contract's "required" phoneNumber and code (no properties of the body) are accepted and ignored.
    const contract = await n.locality(o.token, { city: 'Austin', country: 'US', phoneNumber: '+15125550100', code: '512' });
    assert.equal(contract.status, 200, JSON.stringify(contract.body));
    // A place with no numbers is the contract's 404, saying the inventory is simulated.
    expectError(await n.locality(o.token, { city: 'Nowhere', country: 'US' }), 404, 'simulated');
  });

  it('country must be ISO 3166 alpha-2; a country the inventory does not serve is a 400 that says so, not an empty list', async () => {
    const { o } = await tenant();
    expectError(await n.locality(o.token, { city: 'Austin', country: 'USA' }), 400, 'country', 'USA');
    expectError(await n.locality(o.token, { city: 'Austin', country: 'XX' }), 400, 'country');
    expectError(await n.locality(o.token, { city: 'Austin' }), 400, 'country');
    expectError(await n.prefix(o.token, { prefix: '33', country: 'FR' }), 400, 'simulated', 'FR');
    expectError(await n.phrase(o.token, { phrase: 'cafe', country: 'DE' }), 400, 'simulated', 'DE');
  });

  it('a phrase becomes keypad digits (the answer says which); * is any one digit; bad phrases are 400 naming phrase', async () => {
    const { o } = await tenant();
    const res = await n.phrase(o.token, { phrase: 'JKL-01*', country: 'US', city: 'Cleveland' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.phraseDigits, '55501*');
    assert.ok(res.body.numbers.length > 0);
    for (const x of res.body.numbers) assert.match(x.number, /^\+12165550[1]\d\d$/);
    const wild = await n.phrase(o.token, { phrase: '0*99', country: 'US', city: 'Boston' });
    assert.equal(wild.status, 200, JSON.stringify(wild.body));
    assert.deepEqual(wild.body.numbers.map((x: any) => x.number), ['+16175550199']);
    const vanity = await n.phrase(o.token, { phrase: '*bitcoin*', country: 'US' });
    expectError(vanity, 404, 'No phone numbers');
    expectError(await n.phrase(o.token, { phrase: 'bit$coin', country: 'US' }), 400, 'phrase', '$');
    expectError(await n.phrase(o.token, { phrase: '*a*', country: 'US' }), 400, 'phrase', '2');
  });

  it('a strict prefix answers only numbers starting with it; not strict, an empty prefix widens to its area code and says so', async () => {
    const { o } = await tenant();
    const res = await n.prefix(o.token, { prefix: '512555015', country: 'US' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.numbers.map((x: any) => x.number), Array.from({ length: 10 }, (_, i) => `+151255501${50 + i}`));
    assert.equal(res.body.strict, true);
    assert.equal(res.body.widenedTo, undefined);
    expectError(await n.prefix(o.token, { prefix: '5129', country: 'US' }), 404, 'No phone numbers');
    // The simulated inventory names the areas it has, so the next search can find something.
    expectError(await n.prefix(o.token, { prefix: '999', country: 'US' }), 404, 'these areas', '212 (New York, NY)', '737 (Austin, TX)');
    expectError(await n.prefix(o.token, { prefix: '999', country: 'GB' }), 404, '161 (Manchester, England)', '7700 (mobile)');
    expectError(await n.prefix(o.token, { prefix: '5129', country: 'US', strict: true }), 404);
    const wide = await n.prefix(o.token, { prefix: '5129', country: 'US', strict: false });
    assert.equal(wide.status, 200, JSON.stringify(wide.body));
    assert.equal(wide.body.widenedTo, '512');
    assert.ok(wide.body.numbers.every((x: any) => x.number.startsWith('+1512')));
    // The UK's trunk 0 is not part of the number.
    const uk = await n.prefix(o.token, { prefix: '0161 496', country: 'GB' });
    assert.equal(uk.status, 200, JSON.stringify(uk.body));
    assert.equal(uk.body.prefix, '161496');
    assert.ok(uk.body.numbers.every((x: any) => x.number.startsWith('+44161496')));
    expectError(await n.prefix(o.token, { prefix: '+1 512', country: 'US' }), 400, 'prefix');
  });

  it('assign binds a searched number to the organization\'s agent; it leaves the searches, shows in the list, and return gives it back', async () => {
    const { o } = await tenant();
    const number = (await n.prefix(o.token, { prefix: '2125550', country: 'US' })).body.numbers[0].number as string;
    const res = await n.assign(o.token, { number, country: 'US' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.simulated, true);
    assert.deepEqual([res.body.phoneNumber.number, res.body.phoneNumber.agentId, res.body.phoneNumber.kind, res.body.phoneNumber.state, res.body.phoneNumber.provider],
      [number, o.agentId, 'bought', 'active', 'simulated']);
    assert.deepEqual([res.body.phoneNumber.locality, res.body.phoneNumber.region, res.body.phoneNumber.country, res.body.phoneNumber.simulated],
      ['New York', 'NY', 'US', true]);
    assert.deepEqual(res.body.phoneNumber.capabilities, { voice: true, sms: true, mms: true });
    const list = await n.list(o.token);
    assert.deepEqual(list.body.phoneNumbers.map((x: any) => [x.number, x.agentId]), [[number, o.agentId]]);
    const again = await n.prefix(o.token, { prefix: '2125550', country: 'US' });
    assert.ok(!again.body.numbers.some((x: any) => x.number === number));
    expectError(await n.assign(o.token, { number, country: 'US' }), 409, number);
    const back = await n.ret(o.token, { number });
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.deepEqual([back.body.number, back.body.released], [number, true]);
    assert.deepEqual((await n.list(o.token)).body.phoneNumbers, []);
    expectError(await n.ret(o.token, { number }), 404, number);
    assert.ok((await n.prefix(o.token, { prefix: '2125550', country: 'US' })).body.numbers.some((x: any) => x.number === number));
  });

  it('assign refuses a number outside the inventory (409 naming the provider), a malformed one and one of another country (400)', async () => {
    const { o } = await tenant();
    expectError(await n.assign(o.token, { number: '+14155552671', country: 'US' }), 409, 'simulated');
    expectError(await n.assign(o.token, { number: 'call me', country: 'US' }), 400, 'number');
    expectError(await n.assign(o.token, { number: '+442079460001', country: 'US' }), 400, 'country');
    expectError(await n.assign(o.token, { number: '+12125550111', country: 'ZZ' }), 400, 'country');
    assert.deepEqual((await n.list(o.token)).body.phoneNumbers, []);
  });

  it('of many organizations assigning the same number at once, exactly one wins; the others get 409 and one row exists', async () => {
    const orgs = await Promise.all(Array.from({ length: 6 }, () => tenant()));
    const number = '+13055550142';
    const replies = await Promise.all(orgs.map(({ o }) => n.assign(o.token, { number, country: 'US' })));
    assert.equal(replies.filter((r) => r.status === 200).length, 1, JSON.stringify(replies.map((r) => [r.status, r.body.message])));
    for (const r of replies.filter((x) => x.status !== 200)) expectError(r, 409, number);
    const holders = [];
    for (const { o } of orgs) holders.push(...(await n.list(o.token)).body.phoneNumbers);
    assert.equal(holders.length, 1);
  });

  it('tenancy: targetAccountId picks the agent within the caller\'s subtree; another tenant\'s number or account is 404; agents act only on their own', async () => {
    const { r, o } = await tenant();
    const agent = await h().agent(o.id);
    const other = await tenant();
    // A reseller must name the organization or agent; it binds to the named agent.
    expectError(await n.assign(r.token, { number: '+16175550101', country: 'US' }), 403, 'targetAccountId');
    const a = await n.assign(r.token, { number: '+16175550101', country: 'US' }, { targetAccountId: agent.id });
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal(a.body.phoneNumber.agentId, agent.id);
    // An agent's token binds to itself and lists only its own numbers.
    const b = await n.assign(agent.token, { number: '+16175550102', country: 'US' });
    assert.equal(b.body.phoneNumber.agentId, agent.id);
    assert.equal((await n.assign(o.token, { number: '+16175550103', country: 'US' })).body.phoneNumber.agentId, o.agentId);
    assert.deepEqual((await n.list(agent.token)).body.phoneNumbers.map((x: any) => x.number), ['+16175550101', '+16175550102']);
    assert.equal((await n.list(o.token)).body.phoneNumbers.length, 3);
    assert.equal((await n.list(r.token, { targetAccountId: o.id })).body.phoneNumbers.length, 3);
    // Another tenant: its accounts are 404, its searches and lists never show these, its return is 404.
    expectError(await n.assign(other.r.token, { number: '+16175550104', country: 'US' }, { targetAccountId: o.id }), 404, 'targetAccountId');
    expectError(await n.locality(other.o.token, { country: 'US' }, { targetAccountId: o.id }), 404, 'targetAccountId');
    expectError(await n.list(other.o.token, { targetAccountId: o.id }), 404);
    expectError(await n.ret(other.o.token, { number: '+16175550101' }), 404, '+16175550101');
    expectError(await n.ret(other.r.token, { number: '+16175550101' }, { targetAccountId: other.o.id }), 404);
    // An agent cannot return numbers (the contract's reseller, here down to the organization).
    expectError(await n.ret(agent.token, { number: '+16175550102' }), 403, 'return');
    // The organization's token returns a number held by any of its agents.
    assert.equal((await n.ret(o.token, { number: '+16175550102' })).status, 200);
    assert.deepEqual((await n.list(agent.token)).body.phoneNumbers.map((x: any) => x.number), ['+16175550101']);
  });

  it('each agent\'s numbers are on the agent: GET /api/v2/account and GET /api/v2/agent/{agentId} carry its own, not a sibling\'s or another organization\'s', async () => {
    const { r, o } = await tenant();
    const agent = await h().agent(o.id);
    const other = await tenant();
    assert.equal((await n.assign(agent.token, { number: '+12065550110', country: 'US' })).status, 200);
    assert.equal((await n.assign(o.token, { number: '+12065550111', country: 'US' })).status, 200);
    assert.equal((await n.byo(r.token, { number: '+14155550177' }, { targetAccountId: agent.id })).status, 200);
    assert.equal((await n.assign(other.o.token, { number: '+12065550112', country: 'US' })).status, 200);
    const own = await h().call('GET', '/api/v2/account', { token: agent.token });
    assert.equal(own.status, 200, JSON.stringify(own.body));
    assert.deepEqual(own.body.details.phoneNumbers.map((x: any) => [x.number, x.kind, x.agentId]),
      [['+12065550110', 'bought', agent.id], ['+14155550177', 'byo', agent.id]]);
    assert.equal(own.body.details.phoneNumbers[0].simulated, true);
    // The organization reads its default agent's through targetAccountId: only that agent's number.
    const first = await h().call('GET', '/api/v2/account', { token: r.token, query: { targetAccountId: o.agentId } });
    assert.deepEqual(first.body.details.phoneNumbers.map((x: any) => x.number), ['+12065550111']);
    const viaAgent = await h().call('GET', `/api/v2/agent/camp${agent.id}`, { token: o.token });
    assert.equal(viaAgent.status, 200, JSON.stringify(viaAgent.body));
    assert.deepEqual(viaAgent.body.phoneNumbers.map((x: any) => x.number), ['+12065550110', '+14155550177']);
    const otherAgent = await h().call('GET', `/api/v2/agent/camp${other.o.agentId}`, { token: other.o.token });
    assert.deepEqual(otherAgent.body.phoneNumbers.map((x: any) => x.number), ['+12065550112']);
    // Another organization's agent is 404 (no hint of its numbers).
    expectError(await h().call('GET', `/api/v2/agent/camp${agent.id}`, { token: other.o.token }), 404);
    expectError(await h().call('GET', '/api/v2/account', { token: other.o.token, query: { targetAccountId: agent.id } }), 404);
    // A returned number leaves the agent at once.
    assert.equal((await n.ret(o.token, { number: '+12065550110' })).status, 200);
    const after = await h().call('GET', `/api/v2/agent/camp${agent.id}`, { token: agent.token });
    assert.deepEqual(after.body.phoneNumbers.map((x: any) => x.number), ['+14155550177']);
  });

  it('a text to a simulated number arrives on a laptop: the organization posts it, the holding agent\'s text conversation gets it and its turn is queued', async () => {
    const { r, o } = await tenant();
    const agent = await h().agent(o.id);
    const other = await tenant();
    assert.equal((await n.assign(o.token, { number: '+13125550120', country: 'US' }, { targetAccountId: agent.id })).status, 200);
    const text = (token: string, body: unknown, query: Record<string, unknown> = {}) => h().call('POST', '/api/v2/phoneNumber/simulate/text', { token, body, query });
    const res = await text(o.token, { number: '+1 312 555 0120', from: '+14155550142', body: 'Are you open today?' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.simulated, true);
    const db = h().database.db;
    const c = await db.selectFrom('conversations').selectAll().where('id', '=', res.body.conversationId).executeTakeFirstOrThrow();
    assert.deepEqual([c.org_id, c.account_id, c.channel, c.direction], [o.id, agent.id, 'sms', 'inbound']);
    const m = await db.selectFrom('conversation_messages').selectAll().where('id', '=', res.body.messageId).executeTakeFirstOrThrow();
    assert.equal(m.text, 'Are you open today?');
    assert.deepEqual(JSON.parse(m.data!), { provider: 'simulated', simulated: true, messageSid: JSON.parse(m.data!).messageSid, accountSid: null, from: '+14155550142', to: '+13125550120' });
    const turn = await db.selectFrom('conversation_turns').selectAll().where('message_id', '=', res.body.messageId).executeTakeFirstOrThrow();
    assert.deepEqual(JSON.parse(turn.reply_to), { kind: 'sms', to: '+14155550142', from: '+13125550120', inReplyTo: res.body.messageId });
    // Only its own simulated numbers: another organization's is 404, a BYO one is 400, an agent sees only its own.
    expectError(await text(other.o.token, { number: '+13125550120', from: '+14155550142', body: 'hi' }), 404, '+13125550120');
    expectError(await text(o.token, { number: '+13125550120', from: '+14155550142', body: 'hi' }, { targetAccountId: other.o.agentId }), 404);
    expectError(await text(await h().tokenFor(o.agentId), { number: '+13125550120', from: '+14155550142', body: 'hi' }), 404);
    assert.equal((await n.byo(r.token, { number: '+14155550199' }, { targetAccountId: o.id })).status, 200);
    expectError(await text(o.token, { number: '+14155550199', from: '+14155550142', body: 'hi' }), 400, 'simulated');
    // A returned number no longer reaches anyone.
    assert.equal((await n.ret(o.token, { number: '+13125550120' })).status, 200);
    expectError(await text(o.token, { number: '+13125550120', from: '+14155550142', body: 'hi' }), 404);
  });

  it('bring your own: a reseller or partner binds a number owned elsewhere to an agent; an organization cannot; return only unbinds it', async () => {
    const { r, o } = await tenant();
    const agent = await h().agent(o.id);
    const own = '+14155552671';
    expectError(await n.byo(o.token, { number: own }), 403, 'Reseller');
    expectError(await n.byo(agent.token, { number: own }), 403);
    expectError(await n.byo(r.token, { number: own }), 403, 'targetAccountId');
    expectError(await n.byo(r.token, { number: 'nope' }, { targetAccountId: o.id }), 400, 'number');
    const res = await n.byo(r.token, { number: '+1 (415) 555-2671' }, { targetAccountId: agent.id });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.phoneNumber.number, res.body.phoneNumber.kind, res.body.phoneNumber.agentId, res.body.phoneNumber.provider],
      [own, 'byo', agent.id, null]);
    assert.equal(res.body.webhooks.voiceUrl, `${h().config.publicUrl}/api/v2/providers/twilio/voice`);
    assert.equal(res.body.webhooks.smsUrl, `${h().config.publicUrl}/api/v2/providers/twilio/sms`);
    // Held: neither BYO again (here or by another tenant) nor assign can take it.
    expectError(await n.byo(h().adminToken, { number: own }, { targetAccountId: o.id }), 409, own);
    const other = await tenant();
    expectError(await n.byo(other.r.token, { number: own }, { targetAccountId: other.o.id }), 409);
    expectError(await n.byo(other.r.token, { number: '+14155552672' }, { targetAccountId: o.id }), 404, 'targetAccountId');
    const back = await n.ret(r.token, { number: own }, { targetAccountId: o.id });
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal(back.body.released, false);
    assert.deepEqual((await n.list(o.token)).body.phoneNumbers, []);
  });
});
