// Phone numbers through an organization's Twilio provider (the fake in test/helpers/fake-twilio.ts
// records every request): what each search asks Twilio, what it cannot ask (a 400, without a
// request), buying with our webhooks and releasing, a number Twilio does not sell, a slow Twilio
// cut off (504 naming it), and a purchase whose answer was lost kept for reconciliation. The race
// between two processes is test/numbers-race-processes.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeTwilio, type FakeTwilio } from '../helpers/fake-twilio.ts';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness, type Reply } from '../helpers/harness.ts';
import { numberCalls } from '../helpers/numbers.ts';

const PUBLIC = 'https://numbers.callplane.test';
/** Generous: the machine is shared; the hang below lasts until this cuts it off. */
const TWILIO_TIMEOUT_MS = 1500;

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(res.body.message.includes(w), `"${res.body.message}" should name ${w}`);
}

for (const engine of ENGINES) {
  describe(`phone numbers at twilio [${engine}]`, () => {
    let harness: Harness;
    let fake: FakeTwilio;
    const h = () => harness;
    const n = numberCalls(h);
    before(async () => {
      fake = await startFakeTwilio();
      harness = await startHarness(engine, { CALLPLANE_PUBLIC_URL: PUBLIC, CALLPLANE_ALLOW_PRIVATE_TARGETS: 'true' },
        { runtime: { carrierOptions: { twilio: { timeoutMs: TWILIO_TIMEOUT_MS } } } });
    });
    after(async () => { await harness.close(); await fake.close(); });

    async function twilioOrg() {
      const r = await h().reseller();
      const o = await h().organization(r.id);
      const res = await h().call('POST', '/api/v2/numberingProvider', {
        token: r.token, query: { targetOrganizationId: o.id },
        body: { providerId: 'twilio', config: { accountSid: fake.accountSid, authToken: fake.authToken, apiBaseUrl: fake.url } },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return { r, o };
    }
    /** The REST API requests the fake received from `from` on (the Pricing API's, asked beside a search, apart). */
    const since = (from: number) => fake.requests.slice(from).filter((r) => !r.path.startsWith('/v1/PhoneNumbers/'));
    const priceAsks = (country: string) => fake.priceRequests.filter((r) => r.path === `/v1/PhoneNumbers/Countries/${country}`).length;
    const searchPath = (country: string) => `/2010-04-01/Accounts/${fake.accountSid}/AvailablePhoneNumbers/${country}/Local.json`;

    it('a locality search asks AvailablePhoneNumbers with InLocality and InRegion, 20 at most, and answers what Twilio offers (not simulated)', async () => {
      const { o } = await twilioOrg();
      const from = fake.requests.length;
      const res = await n.locality(o.token, { city: 'Cleveland', region: 'OH', country: 'US' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const [req, ...more] = since(from);
      assert.equal(more.length, 0);
      assert.deepEqual([req!.method, req!.path], ['GET', searchPath('US')]);
      assert.deepEqual(Object.fromEntries(req!.query), { InLocality: 'Cleveland', InRegion: 'OH', PageSize: '20' });
      assert.deepEqual([res.body.provider, res.body.simulated], ['twilio', false]);
      assert.deepEqual(res.body.numbers.map((x: any) => x.number), ['+12165550101', '+12165550102', '+12167770103']);
      assert.deepEqual(res.body.numbers[0], {
        number: '+12165550101', locality: 'Cleveland', region: 'OH', country: 'US',
        capabilities: { voice: true, sms: true, mms: true }, monthlyPrice: { amount: '1.15', currency: 'USD' }, simulated: false,
      });
      // The price is Twilio's Pricing API's for a local US number, asked with the account's credentials.
      assert.equal(priceAsks('US'), 1);
      assert.equal(fake.priceRequests[0]!.headers.authorization, 'Basic ' + Buffer.from(`${fake.accountSid}:${fake.authToken}`).toString('base64'));
    });

    it('the monthly price comes from the Pricing API once per country and is kept; a Pricing API that hangs leaves it null without failing the search', async () => {
      const { o } = await twilioOrg();
      const toronto = await n.locality(o.token, { city: 'Toronto', country: 'CA' });
      assert.equal(toronto.status, 200, JSON.stringify(toronto.body));
      assert.deepEqual(toronto.body.numbers.map((x: any) => x.monthlyPrice), [{ amount: '1.15', currency: 'USD' }]);
      fake.prices.CA = { currency: 'CAD', byType: { local: '9.99' } };
      const again = await n.prefix(o.token, { prefix: '416', country: 'CA' });
      assert.deepEqual(again.body.numbers.map((x: any) => x.monthlyPrice), [{ amount: '1.15', currency: 'USD' }]);
      assert.equal(priceAsks('CA'), 1, 'kept, not asked again');
      // A country whose price does not come in time: the numbers, without a price, as fast as the REST timeout allows.
      fake.inventory.push({ phoneNumber: '+61255500123', isoCountry: 'AU', locality: 'Sydney', region: 'NSW' });
      fake.prices.AU = { currency: 'AUD', byType: { local: '3.00' } };
      fake.failNextPrice('hang');
      const started = Date.now();
      const sydney = await n.locality(o.token, { city: 'Sydney', country: 'AU' });
      assert.equal(sydney.status, 200, JSON.stringify(sydney.body));
      assert.deepEqual(sydney.body.numbers.map((x: any) => [x.number, x.monthlyPrice]), [['+61255500123', null]]);
      assert.ok(Date.now() - started < TWILIO_TIMEOUT_MS + 1000, `${Date.now() - started} ms`);
      // The failure is kept for a minute: the next search does not wait on it again.
      const next = await n.locality(o.token, { city: 'Sydney', country: 'AU' });
      assert.deepEqual(next.body.numbers.map((x: any) => x.monthlyPrice), [null]);
      assert.equal(priceAsks('AU'), 1);
    });

    it('what Twilio cannot search is a 400 that says so: a region outside the US and Canada (nothing asked), a country it does not serve', async () => {
      const { o } = await twilioOrg();
      const from = fake.requests.length;
      expectError(await n.locality(o.token, { city: 'London', region: 'England', country: 'GB' }), 400, 'twilio', 'region', 'GB');
      assert.equal(since(from).length, 0);
      expectError(await n.locality(o.token, { city: 'Paris', country: 'FR' }), 400, 'twilio', 'FR');
      assert.deepEqual(since(from).map((r) => r.path), [searchPath('FR')]);
      expectError(await n.prefix(o.token, { prefix: '21', country: 'US' }), 400, 'twilio', 'area code');
    });

    it('a prefix is AreaCode plus Contains for its other digits; strict answers only numbers starting with it, not strict widens to the area code', async () => {
      const { o } = await twilioOrg();
      let from = fake.requests.length;
      const res = await n.prefix(o.token, { prefix: '216555', country: 'US' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body.numbers.map((x: any) => x.number), ['+12165550101', '+12165550102']);
      assert.deepEqual(Object.fromEntries(since(from)[0]!.query), { AreaCode: '216', Contains: '+1216555', PageSize: '20' });
      from = fake.requests.length;
      expectError(await n.prefix(o.token, { prefix: '2169', country: 'US' }), 404, 'twilio');
      assert.equal(since(from).length, 1);
      from = fake.requests.length;
      const wide = await n.prefix(o.token, { prefix: '2169', country: 'US', strict: false });
      assert.equal(wide.status, 200, JSON.stringify(wide.body));
      assert.equal(wide.body.widenedTo, '216');
      assert.deepEqual(since(from).map((r) => Object.fromEntries(r.query)), [
        { AreaCode: '216', Contains: '+12169', PageSize: '20' }, { AreaCode: '216', PageSize: '20' },
      ]);
      assert.equal(wide.body.numbers.length, 3);
    });

    it('a phrase is sent as keypad digits in Contains (wildcards at its ends mean anywhere); one between digits Twilio cannot search is a 400', async () => {
      const { o } = await twilioOrg();
      let from = fake.requests.length;
      const res = await n.phrase(o.token, { phrase: '*bitcoin*', country: 'US', region: 'TX' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.phraseDigits, '*2482646*');
      assert.deepEqual(Object.fromEntries(since(from)[0]!.query), { InRegion: 'TX', Contains: '2482646', PageSize: '20' });
      assert.deepEqual(res.body.numbers.map((x: any) => x.number), ['+15122482646']);
      from = fake.requests.length;
      expectError(await n.phrase(o.token, { phrase: '555*10', country: 'US' }), 400, 'twilio', 'wildcard', '555*10');
      expectError(await n.phrase(o.token, { phrase: 'a'.repeat(17), country: 'US' }), 400, 'twilio', '16');
      assert.equal(since(from).length, 0);
    });

    it('a UK prefix is sent as Contains anchored to the number\'s start, with its country code', async () => {
      const { o } = await twilioOrg();
      fake.inventory.push({ phoneNumber: '+441614960123', isoCountry: 'GB', locality: 'Manchester', region: null });
      const from = fake.requests.length;
      const res = await n.prefix(o.token, { prefix: '0161 496', country: 'GB' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(Object.fromEntries(since(from)[0]!.query), { Contains: '+44161496', PageSize: '20' });
      assert.deepEqual(res.body.numbers.map((x: any) => [x.number, x.locality, x.region]), [['+441614960123', 'Manchester', null]]);
    });

    it('assign buys the number with our voice and messaging webhooks; return releases it at Twilio', async () => {
      const { o } = await twilioOrg();
      const from = fake.requests.length;
      const res = await n.assign(o.token, { number: '+15125550104', country: 'US' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual([res.body.simulated, res.body.phoneNumber.provider, res.body.phoneNumber.state, res.body.phoneNumber.agentId], [false, 'twilio', 'active', o.agentId]);
      const [buy, ...more] = since(from);
      assert.equal(more.length, 0);
      assert.deepEqual([buy!.method, buy!.path], ['POST', `/2010-04-01/Accounts/${fake.accountSid}/IncomingPhoneNumbers.json`]);
      assert.deepEqual(Object.fromEntries(buy!.form), {
        PhoneNumber: '+15125550104',
        VoiceUrl: `${PUBLIC}/api/v2/providers/twilio/voice`, VoiceMethod: 'POST',
        StatusCallback: `${PUBLIC}/api/v2/providers/twilio/voice/status`, StatusCallbackMethod: 'POST',
        SmsUrl: `${PUBLIC}/api/v2/providers/twilio/sms`, SmsMethod: 'POST',
      });
      assert.deepEqual(res.body.phoneNumber.capabilities, { voice: true, sms: true, mms: true });
      const [held] = [...fake.incoming.values()].filter((x) => x.phoneNumber === '+15125550104');
      assert.ok(held);
      const back = await n.ret(o.token, { number: '+15125550104' });
      assert.equal(back.status, 200, JSON.stringify(back.body));
      assert.equal(back.body.released, true);
      const release = fake.requests.at(-1)!;
      assert.deepEqual([release.method, release.path], ['DELETE', `/2010-04-01/Accounts/${fake.accountSid}/IncomingPhoneNumbers/${held.sid}.json`]);
      assert.equal(fake.incoming.has(held.sid), false);
      fake.inventory.push({ ...held });
    });

    it('a number Twilio does not sell is a 409 naming Twilio, and nothing is kept', async () => {
      const { o } = await twilioOrg();
      expectError(await n.assign(o.token, { number: '+12125550188', country: 'US' }), 409, 'twilio', '+12125550188');
      assert.deepEqual((await n.list(o.token)).body.phoneNumbers, []);
    });

    it(`a Twilio that does not answer is cut off after ${TWILIO_TIMEOUT_MS} ms: a search is a 504 naming twilio`, async () => {
      const { o } = await twilioOrg();
      fake.hangNext();
      expectError(await n.locality(o.token, { city: 'Austin', country: 'US' }), 504, 'twilio');
      fake.failNext({ status: 503 });
      expectError(await n.locality(o.token, { city: 'Austin', country: 'US' }), 502, 'twilio');
    });

    it('a purchase whose answer was lost is kept in state attention; assigning again finds it at Twilio and configures it instead of buying twice', async () => {
      const { o } = await twilioOrg();
      const number = '+14165550105';
      fake.failNext({ status: 500 });
      expectError(await n.assign(o.token, { number, country: 'CA' }), 502, 'twilio', 'attention');
      const kept = (await n.list(o.token)).body.phoneNumbers;
      assert.deepEqual(kept.map((x: any) => [x.number, x.state]), [[number, 'attention']]);
      assert.ok(kept[0].lastError.includes('500'));
      // Meanwhile another organization cannot take it.
      const other = await twilioOrg();
      expectError(await n.assign(other.o.token, { number, country: 'CA' }), 409);
      // Twilio had in fact sold it (the 500 came after): it is in the account's numbers.
      const i = fake.inventory.findIndex((x) => x.phoneNumber === number);
      const [sold] = fake.inventory.splice(i, 1);
      fake.incoming.set('PNlost0000', { ...sold!, sid: 'PNlost0000', voiceUrl: null, smsUrl: null, statusCallback: null });
      const from = fake.requests.length;
      const res = await n.assign(o.token, { number, country: 'CA' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.phoneNumber.state, 'active');
      assert.deepEqual(since(from).map((r) => [r.method, r.path.split('/Accounts/')[1]!.split('/').slice(1).join('/')]), [
        ['GET', 'IncomingPhoneNumbers.json'], ['POST', 'IncomingPhoneNumbers/PNlost0000.json'],
      ]);
      assert.equal(since(from)[0]!.query.get('PhoneNumber'), number);
      assert.equal(fake.incoming.get('PNlost0000')!.voiceUrl, `${PUBLIC}/api/v2/providers/twilio/voice`);
      assert.equal(fake.incoming.get('PNlost0000')!.smsUrl, `${PUBLIC}/api/v2/providers/twilio/sms`);
      // Return releases it by the sid found.
      assert.equal((await n.ret(o.token, { number })).status, 200);
      assert.equal(fake.incoming.has('PNlost0000'), false);
    });

    it('a purchase Twilio does not answer in time is a 504 and kept in state attention; assigning again finds it unsold and buys it', async () => {
      const { o } = await twilioOrg();
      const number = '+12167770103';
      fake.hangNext();
      expectError(await n.assign(o.token, { number, country: 'US' }), 504, 'twilio', 'attention');
      assert.deepEqual((await n.list(o.token)).body.phoneNumbers.map((x: any) => x.state), ['attention']);
      const from = fake.requests.length;
      const res = await n.assign(o.token, { number, country: 'US' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(since(from).map((r) => [r.method, r.path.split('/').at(-1)]), [['GET', 'IncomingPhoneNumbers.json'], ['POST', 'IncomingPhoneNumbers.json']]);
      assert.equal(since(from)[1]!.form.get('PhoneNumber'), number);
      assert.equal((await n.ret(o.token, { number })).status, 200);
      fake.inventory.push({ phoneNumber: number, isoCountry: 'US', locality: 'Cleveland', region: 'OH' });
    });

    it('a failed release keeps the number held (502 naming twilio); nothing is unbound until Twilio has released it', async () => {
      const { o } = await twilioOrg();
      assert.equal((await n.assign(o.token, { number: '+12165550102', country: 'US' })).status, 200);
      fake.failNext({ status: 500 });
      expectError(await n.ret(o.token, { number: '+12165550102' }), 502, 'twilio');
      assert.equal((await n.list(o.token)).body.phoneNumbers.length, 1);
      assert.equal((await n.ret(o.token, { number: '+12165550102' })).status, 200);
      assert.deepEqual((await n.list(o.token)).body.phoneNumbers, []);
    });
  });
}
for (const engine of SKIPPED_ENGINES) describe(`phone numbers at twilio [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});
