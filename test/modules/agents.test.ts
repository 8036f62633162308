// Agents: the staging and live slots of an agent account, publish/revert, stored versions, the
// `agent` webhook event, and tenancy — on both engines.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { forEachEngine } from '../helpers/engines.ts';
import type { Reply } from '../helpers/harness.ts';

function expectError(res: Reply, status: number, ...words: string[]): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  for (const w of words) assert.ok(String(res.body.message).includes(w), `"${res.body.message}" should name ${w}`);
}

forEachEngine('agents', (h) => {
  async function tenant() {
    const r = await h().reseller();
    const o = await h().organization(r.id);
    return { r, o, agentToken: await h().tokenFor(o.agentId) };
  }
  const post = (token: string, url: string, body?: unknown, query?: Record<string, unknown>) => h().call('POST', url, { token, body, query });
  const get = (token: string, url: string, query?: Record<string, unknown>) => h().call('GET', url, { token, query });

  it('a new agent has defaults in both slots; POST /agent edits staging only; publish copies it to live', async () => {
    const { o, agentToken } = await tenant();
    const s0 = await get(agentToken, '/api/v2/agentEventRules/staging');
    assert.equal(s0.status, 200, JSON.stringify(s0.body));
    assert.equal(s0.body.agent.id, `camp${o.agentId}`);
    assert.equal(s0.body.agent.agentLang, 'en-US');
    assert.equal(s0.body.agent.speakingTimeout, 1200);
    const up = await post(agentToken, '/api/v2/agent', { title: 'Screener', agentLang: 'es-mx', timezone: 'Europe/London', speakingTimeout: 900 });
    assert.equal(up.status, 200, JSON.stringify(up.body));
    assert.equal(up.body.campaignId, `camp${o.agentId}`);
    const s1 = await get(agentToken, '/api/v2/agentEventRules/staging');
    assert.equal(s1.body.agent.title, 'Screener');
    assert.equal(s1.body.agent.agentLang, 'es-MX', 'canonicalised');
    assert.equal(s1.body.agent.speakingTimeout, 900);
    const live0 = await get(agentToken, '/api/v2/agentEventRules/default');
    assert.equal(live0.body.agent.speakingTimeout, 1200, 'live is untouched until publish');
    const pub = await post(agentToken, '/api/v2/agent/publish');
    assert.equal(pub.status, 200, JSON.stringify(pub.body));
    assert.equal(pub.body.message, `Agent camp${o.agentId} published`);
    const live1 = await get(agentToken, '/api/v2/agentEventRules/default');
    assert.equal(live1.body.agent.title, 'Screener');
    const versions = await get(agentToken, `/api/v2/agent/camp${o.agentId}/versions`, { includeData: true });
    assert.equal(versions.status, 200);
    assert.equal(versions.body.versions.length, 1);
    assert.equal(versions.body.versions[0].title, `Auto-${versions.body.versions[0].versionId}`);
    assert.equal(versions.body.versions[0].versionId, pub.body.previousVersionId);
    assert.equal(versions.body.versions[0].snapshot.speakingTimeout, 1200, 'the replaced live is kept');
    // GET /agent/{agentId} accepts the camp id and the account id.
    for (const id of [`camp${o.agentId}`, String(o.agentId)]) {
      const a = await get(o.token, `/api/v2/agent/${id}`);
      assert.equal(a.status, 200, JSON.stringify(a.body));
      assert.equal(a.body.sponsorship.id, `camp${o.agentId}`);
      assert.equal(a.body.sponsorship.title, 'Screener');
    }
  });

  it('revert copies live back to staging', async () => {
    const { agentToken } = await tenant();
    await post(agentToken, '/api/v2/agent', { welcomeMessage: 'hello' });
    const rev = await post(agentToken, '/api/v2/agent/revert');
    assert.equal(rev.status, 200);
    assert.match(rev.body.message, /unpublished$/);
    assert.equal((await get(agentToken, '/api/v2/agentEventRules/staging')).body.agent.welcomeMessage, '');
  });

  it('refuses unknown fields, wrong types, out-of-range values, bad zones, tags, models and regexes, naming the field', async () => {
    const { agentToken } = await tenant();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ bogus: 1 }, 'bogus'],
      [{ speakingTimeout: 50 }, 'speakingTimeout'],
      [{ preAnswerRingTime: 61 }, 'preAnswerRingTime'],
      [{ waitOnAnswer: 'soon' }, 'waitOnAnswer'],
      [{ timezone: 'Mars/Olympus' }, 'timezone'],
      [{ agentLang: 'not a tag!' }, 'agentLang'],
      [{ agentModel: 'gpt-0' }, 'agentModel'],
      [{ agentVoice: 'robot' }, 'agentVoice'],
      [{ agentTtsEngine: 'polly' }, 'agentTtsEngine'],
      [{ agentTtsEngine: 'deepgram', agentVoice: 'EXAVITQu4vr4xnSDxMaL' }, 'agentVoice'],
      [{ cnamAutoRejectRegex: '(a+)+$' }, 'cnamAutoRejectRegex'],
      [{ cnamAutoTransferRegex: '([' }, 'cnamAutoTransferRegex'],
      [{ cnamAutoTransferDestination: '555' }, 'cnamAutoTransferDestination'],
      [{ cnamAutoRejectCode: 200 }, 'cnamAutoRejectCode'],
      [{ links: ['ftp://x'] }, 'links[0]'],
      [{ apps: [{ appId: 'a', version: 'v1', instructions: 'x', extra: 1 }] }, 'apps[0].extra'],
      [{ backgroundAudio: { url: 'https://a.example/x.mp3', gain: 99 } }, 'gain'],
      [{ title: null }, 'title'],
      [{ description: null }, 'description'],
      [{ waitOnAnswer: '100' }, 'waitOnAnswer'],
      [{ waitOnAnswer: null }, 'waitOnAnswer'],
      [{ noConvoHistory: 'true' }, 'noConvoHistory'],
      [{ agentThinking: 'high' }, 'agentThinking'],
      [{ agentS2SEngine: 'other' }, 'agentS2SEngine'],
      [{ attendedTransferBridgeTrigger: '(x*)*' }, 'attendedTransferBridgeTrigger'],
    ];
    expectError(await h().call('POST', '/api/v2/agent', { token: agentToken, body: [1] }), 400, 'body');
    for (const [body, field] of cases) expectError(await post(agentToken, '/api/v2/agent', body), 400, field);
    const ok = await post(agentToken, '/api/v2/agent', {
      cnamAutoRejectRegex: '^SPAM', cnamAutoTransferDestination: 'ext:1234', agentThinking: 'low', agentS2SEngine: null,
      preAnswerRingTime: null, attendedTransferBridgeTrigger: 'any', agentLang: 'multi', timezone: 'asia/tokyo',
      backgroundAudio: { url: 'https://a.example/x.mp3', loop: false }, apps: [{ appId: 'squareUp', version: 'v1', instructions: 'book' }],
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    const s = (await get(agentToken, '/api/v2/agentEventRules/staging')).body.agent;
    assert.equal(s.cnamAutoRejectRegex, '^SPAM');
    assert.deepEqual(s.backgroundAudio, { url: 'https://a.example/x.mp3', loop: false });
    assert.equal(s.agentS2SEngine, null);
    assert.equal(s.preAnswerRingTime, null);
    assert.equal(s.timezone, 'Asia/Tokyo');
    assert.equal(s.agentLang, 'multi');
    assert.equal(s.agentTtsEngine, null, 'none by default: the process\'s configured voice');
  });

  it('agentTtsEngine with the engine\'s own voice id; a write that would leave such a voice without its engine is refused, naming agentVoice', async () => {
    const { agentToken } = await tenant();
    assert.equal((await post(agentToken, '/api/v2/agent', { agentTtsEngine: 'elevenlabs', agentVoice: 'EXAVITQu4vr4xnSDxMaL' })).status, 200);
    const s = (await get(agentToken, '/api/v2/agentEventRules/staging')).body.agent;
    assert.deepEqual([s.agentTtsEngine, s.agentVoice], ['elevenlabs', 'EXAVITQu4vr4xnSDxMaL']);
    expectError(await post(agentToken, '/api/v2/agent', { agentTtsEngine: null }), 400, 'agentVoice');
    expectError(await post(agentToken, '/api/v2/agent', { agentTtsEngine: 'cartesia' }), 400, 'agentVoice');
    assert.equal((await post(agentToken, '/api/v2/agent', { agentTtsEngine: 'cartesia', agentVoice: 'en-US Male' })).status, 200);
  });

  it('tenancy: an organization names its agent; another organization\'s agent is 404; an agent token cannot reach a sibling', async () => {
    const a = await tenant();
    const b = await tenant();
    const sibling = await h().agent(a.o.id);
    const siblingToken = await h().tokenFor(sibling.id);
    assert.equal((await post(a.o.token, '/api/v2/agent', { title: 'Sib' }, { targetAccountId: sibling.id })).status, 200);
    assert.equal((await get(siblingToken, '/api/v2/agentEventRules/staging')).body.agent.title, 'Sib');
    // Without targetAccountId an organization acts on its default agent.
    await post(a.o.token, '/api/v2/agent', { title: 'Default' });
    assert.equal((await get(a.agentToken, '/api/v2/agentEventRules/staging')).body.agent.title, 'Default');
    expectError(await get(b.o.token, `/api/v2/agent/camp${a.o.agentId}`), 404, 'agentId');
    expectError(await get(b.o.token, `/api/v2/agent/camp${a.o.agentId}/versions`), 404, 'agentId');
    expectError(await post(b.o.token, `/api/v2/agent/camp${a.o.agentId}/versions`, { title: 'x' }), 404);
    expectError(await post(b.o.token, '/api/v2/agent', { title: 'x' }, { targetAccountId: a.o.agentId }), 404);
    expectError(await get(siblingToken, `/api/v2/agent/camp${a.o.agentId}`), 404);
    expectError(await get(a.o.token, '/api/v2/agent/campXYZ'), 404);
  });

  it('versions: create from staging or default, replace (validated), rename, restore to staging and to live', async () => {
    const { o, agentToken } = await tenant();
    const base = `/api/v2/agent/camp${o.agentId}/versions`;
    await post(agentToken, '/api/v2/agent', { title: 'Staged' });
    const c1 = await post(agentToken, base, { title: 'Holiday-2025' });
    assert.equal(c1.status, 201, JSON.stringify(c1.body));
    assert.equal(c1.body.createdVersion.title, 'Holiday-2025');
    const c2 = await post(agentToken, base, { title: 'Live copy', source: 'default' });
    assert.ok(c2.body.createdVersion.versionId > c1.body.createdVersion.versionId, 'unique and increasing within one millisecond');
    expectError(await post(agentToken, base, { title: 'x', source: 'other' }), 400, 'source');
    const list = await get(agentToken, base);
    assert.deepEqual(list.body.versions.map((v: any) => v.title), ['Live copy', 'Holiday-2025']);
    assert.equal(list.body.versions[0].snapshot, undefined);

    const v1 = c1.body.createdVersion.versionId;
    expectError(await post(agentToken, `${base}/${v1}`, { snapshot: { speakingTimeout: 1 } }), 400, 'snapshot.speakingTimeout');
    expectError(await post(agentToken, `${base}/${v1}`, { snapshot: { nope: true } }), 400, 'snapshot.nope');
    const rep = await post(agentToken, `${base}/${v1}`, { snapshot: { title: 'Replaced', speakingTimeout: 2000 } });
    assert.equal(rep.status, 200, JSON.stringify(rep.body));
    assert.equal(rep.body.versionId, v1);
    expectError(await post(agentToken, `${base}/999`, { snapshot: {} }), 404, 'versionId');

    const ren = await h().call('PUT', `${base}/${v1}/title`, { token: agentToken, body: { title: 'Renamed' } });
    assert.equal(ren.status, 200, JSON.stringify(ren.body));
    assert.deepEqual([ren.body.versionId, ren.body.newTitle], [v1, 'Renamed']);
    expectError(await h().call('PUT', `${base}/${v1}/title`, { token: agentToken, body: { title: '  ' } }), 400, 'title');

    const toStaging = await h().call('POST', `${base}/${v1}/restore`, { token: agentToken });
    assert.equal(toStaging.status, 200, JSON.stringify(toStaging.body));
    assert.equal(toStaging.body.restored.title, 'Replaced');
    assert.equal((await get(agentToken, '/api/v2/agentEventRules/staging')).body.agent.speakingTimeout, 2000);
    assert.notEqual((await get(agentToken, '/api/v2/agentEventRules/default')).body.agent.title, 'Replaced');

    const before = (await get(agentToken, base)).body.versions.length;
    const toLive = await post(agentToken, `${base}/${v1}/restore`, { target: 'default' });
    assert.equal(toLive.status, 200);
    assert.equal((await get(agentToken, '/api/v2/agentEventRules/default')).body.agent.title, 'Replaced');
    const after = (await get(agentToken, base, { includeData: true })).body.versions;
    assert.equal(after.length, before + 1, 'restoring to live keeps the replaced live as a version');
    assert.match(after[0].title, /^Auto-\d+$/);
  });

  it('a change of live queues an agent event to the organization\'s agent webhooks', async () => {
    const { o, agentToken } = await tenant();
    const sub = await post(o.token, '/api/v2/webhooks', { url: 'https://hooks.example.com/agent', label: 'agent', type: 'agent' });
    assert.equal(sub.status, 201, JSON.stringify(sub.body));
    const pub = await post(agentToken, '/api/v2/agent/publish');
    const rows = await h().database.db.selectFrom('webhook_deliveries').selectAll().where('org_id', '=', o.id).execute();
    assert.equal(rows.length, 1);
    assert.equal(rows[0].event_type, 'agent.published');
    const payload = JSON.parse(rows[0].payload ?? 'null');
    assert.equal(payload.data.agentId, `camp${o.agentId}`);
    assert.equal(payload.data.source, 'staging');
    assert.equal(payload.data.previousVersionId, pub.body.previousVersionId);
  });

  describe('knowledgeBases', () => {
    const createKb = async (token: string, name = 'kb'): Promise<string> => {
      const r = await post(token, '/api/v2/kb/knowledgebase', { name });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      return r.body.knowledgeBase.id as string;
    };
    const staging = async (token: string) => (await get(token, '/api/v2/agentEventRules/staging')).body.agent;

    it('defaults to [] in both slots; a list of the organization\'s knowledge bases is stored deduplicated, in first order', async () => {
      const { o, agentToken } = await tenant();
      assert.deepEqual((await staging(agentToken)).knowledgeBases, []);
      assert.deepEqual((await get(agentToken, '/api/v2/agentEventRules/default')).body.agent.knowledgeBases, []);
      const [a, b, c] = [await createKb(o.token, 'a'), await createKb(o.token, 'b'), await createKb(o.token, 'c')];
      const up = await post(agentToken, '/api/v2/agent', { knowledgeBases: [c, a, c, b, a] });
      assert.equal(up.status, 200, JSON.stringify(up.body));
      assert.deepEqual((await staging(agentToken)).knowledgeBases, [c, a, b]);
      // Another field's edit keeps the list; an organization token acting on its agent may set it too.
      await post(agentToken, '/api/v2/agent', { title: 'With KB' });
      assert.deepEqual((await staging(agentToken)).knowledgeBases, [c, a, b]);
      assert.equal((await post(o.token, '/api/v2/agent', { knowledgeBases: [b] }, { targetAccountId: o.agentId })).status, 200);
      assert.deepEqual((await staging(agentToken)).knowledgeBases, [b]);
      assert.equal((await post(agentToken, '/api/v2/agent/publish')).status, 200);
      assert.deepEqual((await get(agentToken, '/api/v2/agentEventRules/default')).body.agent.knowledgeBases, [b]);
      assert.equal((await post(agentToken, '/api/v2/agent', { knowledgeBases: [] })).status, 200);
      assert.deepEqual((await staging(agentToken)).knowledgeBases, []);
      // The field is in the OpenAPI schema of POST /agent.
      const doc = await h().call('GET', '/api/v2/openapi.json', { token: null });
      const op = doc.body.paths['/api/v2/agent'].post;
      const schema = op.requestBody.content['application/json'].schema;
      const props = schema.properties ?? doc.body.components.schemas[String(schema.$ref).split('/').pop()!].properties;
      assert.equal(props.knowledgeBases.type, 'array');
      assert.equal(props.knowledgeBases.maxItems, 20);
    });

    it('configurations stored before the field existed read as knowledgeBases: []', async () => {
      const { o, agentToken } = await tenant();
      await post(agentToken, '/api/v2/agent', { title: 'Old' });
      const base = `/api/v2/agent/camp${o.agentId}/versions`;
      await post(agentToken, base, { title: 'old version' });
      const db = h().database.db;
      const row = await db.selectFrom('agents').selectAll().where('account_id', '=', o.agentId).executeTakeFirstOrThrow();
      const strip = (json: string) => { const c = JSON.parse(json); delete c.knowledgeBases; return JSON.stringify(c); };
      await db.updateTable('agents').set({ staging: strip(row.staging), live: strip(row.live) }).where('account_id', '=', o.agentId).execute();
      const v = await db.selectFrom('agent_versions').selectAll().where('account_id', '=', o.agentId).executeTakeFirstOrThrow();
      await db.updateTable('agent_versions').set({ snapshot: strip(v.snapshot) }).where('id', '=', v.id).execute();
      const s = await staging(agentToken);
      assert.equal(s.title, 'Old');
      assert.deepEqual(s.knowledgeBases, []);
      assert.deepEqual((await get(agentToken, '/api/v2/agentEventRules/default')).body.agent.knowledgeBases, []);
      assert.deepEqual((await get(agentToken, base, { includeData: true })).body.versions[0].snapshot.knowledgeBases, []);
      assert.deepEqual((await get(o.token, `/api/v2/agent/camp${o.agentId}`)).body.sponsorship.staging.knowledgeBases, []);
    });

    it('refuses more than 20 ids, non-strings, malformed, unknown and another organization\'s ids, naming knowledgeBases', async () => {
      const { o, agentToken } = await tenant();
      const other = await tenant();
      const mine = await createKb(o.token, 'mine');
      const foreign = await createKb(other.o.token, 'theirs');
      expectError(await post(agentToken, '/api/v2/agent', { knowledgeBases: Array.from({ length: 21 }, () => mine) }), 400, 'knowledgeBases', 'at most 20');
      expectError(await post(agentToken, '/api/v2/agent', { knowledgeBases: [mine, 7] }), 400, 'knowledgeBases[1]', 'string');
      expectError(await post(agentToken, '/api/v2/agent', { knowledgeBases: [mine, { id: mine }] }), 400, 'knowledgeBases[1]');
      expectError(await post(agentToken, '/api/v2/agent', { knowledgeBases: mine }), 400, 'knowledgeBases', 'array');
      expectError(await post(agentToken, '/api/v2/agent', { knowledgeBases: null }), 400, 'knowledgeBases');
      expectError(await post(agentToken, '/api/v2/agent', { knowledgeBases: ['doc_1'] }), 400, 'knowledgeBases[0]', 'kb_');
      const unknown = 'kb_01ZZZZZZZZZZZZZZZZZZZZZZZZ';
      expectError(await post(agentToken, '/api/v2/agent', { knowledgeBases: [mine, unknown] }), 400, 'knowledgeBases', unknown, 'not a knowledge base of this organization');
      expectError(await post(agentToken, '/api/v2/agent', { knowledgeBases: [foreign] }), 400, 'knowledgeBases', foreign, 'not a knowledge base of this organization');
      expectError(await post(agentToken, '/api/v2/agent', { knowledgeBases: [unknown, mine, foreign] }), 400, 'knowledgeBases', unknown, foreign, 'are not');
      // The agent's own organization decides, not the caller: the reseller of both organizations
      // editing one's agent cannot name the other's knowledge base.
      const r = await h().reseller();
      const o1 = await h().organization(r.id);
      const o2 = await h().organization(r.id);
      const kb2 = await createKb(o2.token, 'o2');
      expectError(await post(r.token, '/api/v2/agent', { knowledgeBases: [kb2] }, { targetAccountId: o1.agentId }), 400, 'knowledgeBases', kb2);
      assert.equal((await post(r.token, '/api/v2/agent', { knowledgeBases: [kb2] }, { targetAccountId: o2.agentId })).status, 200);
      // Nothing refused was stored.
      assert.deepEqual((await staging(agentToken)).knowledgeBases, []);
    });

    it('replacing a version checks the snapshot\'s knowledgeBases the same way', async () => {
      const { o, agentToken } = await tenant();
      const other = await tenant();
      const mine = await createKb(o.token);
      const foreign = await createKb(other.o.token);
      const base = `/api/v2/agent/camp${o.agentId}/versions`;
      const v = (await post(agentToken, base, { title: 'v' })).body.createdVersion.versionId;
      expectError(await post(agentToken, `${base}/${v}`, { snapshot: { knowledgeBases: [foreign] } }), 400, 'snapshot.knowledgeBases', foreign);
      expectError(await post(agentToken, `${base}/${v}`, { snapshot: { knowledgeBases: [1] } }), 400, 'snapshot.knowledgeBases[0]');
      expectError(await post(agentToken, `${base}/${v}`, { snapshot: { knowledgeBases: Array.from({ length: 21 }, () => mine) } }), 400, 'snapshot.knowledgeBases');
      assert.equal((await post(agentToken, `${base}/${v}`, { snapshot: { knowledgeBases: [mine, mine] } })).status, 200);
      const stored = (await get(agentToken, base, { includeData: true })).body.versions[0].snapshot;
      assert.deepEqual(stored.knowledgeBases, [mine]);
      assert.equal((await post(agentToken, `${base}/${v}`, { snapshot: { title: 'no kb' } })).status, 200);
      assert.deepEqual((await get(agentToken, base, { includeData: true })).body.versions[0].snapshot.knowledgeBases, [], 'omitted: the default');
    });

    it('a named knowledge base may be deleted: the stale id is kept and copied as is, refused only when a write sends it again', async () => {
      const { o, agentToken } = await tenant();
      const keep = await createKb(o.token, 'keep');
      const gone = await createKb(o.token, 'gone');
      const base = `/api/v2/agent/camp${o.agentId}/versions`;
      assert.equal((await post(agentToken, '/api/v2/agent', { knowledgeBases: [gone, keep] })).status, 200);
      assert.equal((await post(agentToken, '/api/v2/agent/publish')).status, 200);
      const v = (await post(agentToken, base, { title: 'with gone' })).body.createdVersion.versionId;

      const del = await h().call('DELETE', `/api/v2/kb/knowledgebase/${gone}`, { token: o.token });
      assert.equal(del.status, 200, 'deleting a knowledge base an agent names is allowed');
      // Stored configurations are not rewritten behind the user's back.
      assert.deepEqual((await staging(agentToken)).knowledgeBases, [gone, keep]);
      assert.deepEqual((await get(agentToken, '/api/v2/agentEventRules/default')).body.agent.knowledgeBases, [gone, keep]);
      // Writes that do not send knowledgeBases, and copies between slots and versions, still work.
      assert.equal((await post(agentToken, '/api/v2/agent', { title: 'Edited after delete' })).status, 200);
      assert.equal((await post(agentToken, '/api/v2/agent/publish')).status, 200);
      assert.equal((await post(agentToken, '/api/v2/agent/revert')).status, 200);
      assert.equal((await post(agentToken, base, { title: 'copy' })).status, 201);
      const restored = await post(agentToken, `${base}/${v}/restore`, { target: 'default' });
      assert.equal(restored.status, 200, JSON.stringify(restored.body));
      assert.deepEqual(restored.body.restored.knowledgeBases, [gone, keep]);
      assert.equal((await post(agentToken, `${base}/${v}/restore`)).status, 200);
      // Sending the list again with the deleted id is refused; without it, accepted.
      expectError(await post(agentToken, '/api/v2/agent', { knowledgeBases: [gone, keep] }), 400, 'knowledgeBases', gone);
      expectError(await post(agentToken, `${base}/${v}`, { snapshot: { knowledgeBases: [gone] } }), 400, 'snapshot.knowledgeBases', gone);
      assert.equal((await post(agentToken, '/api/v2/agent', { knowledgeBases: [keep] })).status, 200);
      assert.deepEqual((await staging(agentToken)).knowledgeBases, [keep]);
    });
  });

  it('racing publishes and edits never leave a mixed configuration', async () => {
    const { o, agentToken } = await tenant();
    await post(agentToken, '/api/v2/agent', { title: 'T0', speakingTimeout: 1000 });
    await post(agentToken, '/api/v2/agent/publish');
    await Promise.all(Array.from({ length: 6 }, (_, i) => Promise.all([
      post(agentToken, '/api/v2/agent', { title: `T${i + 1}`, speakingTimeout: 1001 + i }),
      post(agentToken, '/api/v2/agent/publish'),
    ])));
    const live = (await get(agentToken, '/api/v2/agentEventRules/default')).body.agent;
    assert.equal(live.speakingTimeout, 1000 + Number(live.title.slice(1)), 'title and speakingTimeout come from the same edit');
    const versions = (await get(agentToken, `/api/v2/agent/camp${o.agentId}/versions`)).body.versions;
    assert.equal(versions.length, 7);
    assert.equal(new Set(versions.map((v: any) => v.versionId)).size, 7);
  });
});
