// A spoken opt-out in a real call, offline (issue 37, docs/campaigns.md): a call task to a
// new number is answered on the fake Twilio server and streamed to us (test/helpers/live-call.ts);
// the callee says "please take me off your list" (espeak-ng), the agent's voice session hears it
// (VAD, pocketsphinx with the phrases as its grammar) and answers on the SIMULATED engine (no model
// configured); the callee hangs up and the SIMULATED analysis's rules recognise the request: the
// outcome is `do-not-call` and the number is on the organization's list with the call's
// conversation as evidence, so a new call task to it is refused.
// @lane wall
// @engines sqlite
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { analysisRepo } from '../../src/modules/conversations/repository.ts';
import { LIVE_CALL_PHRASES, liveCallServer, startLiveCall, type LiveCallServer } from '../helpers/live-call.ts';
import { toolsSkip } from '../helpers/system-tools.ts';
import { waitFor } from '../helpers/wait.ts';

const OPT_OUT = 'please take me off your list';

describe('a spoken opt-out in a call [sqlite]', { skip: toolsSkip('espeak-ng', 'pocketsphinx') }, () => {
  let server: LiveCallServer;
  before(async () => {
    server = await liveCallServer('sqlite', {
      phrases: [...LIVE_CALL_PHRASES, OPT_OUT],
      // No language model: the agent answers and the analysis runs on the SIMULATED engine's rules.
      env: { CALLPLANE_LLM_BASE_URL: '', CALLPLANE_LLM_API_KEY: '', CALLPLANE_LLM_MODEL: '' },
      harness: { analyses: true, analysisRuntime: { leaseMs: 5000, heartbeatMs: 500, rescueEveryMs: 500 } },
    });
  });
  after(async () => { await server?.close(); });

  it('"please take me off your list", heard on the call, ends as do-not-call and puts the number on the list', async () => {
    const org = await server.organization();
    const target = '+14155557311';
    const call = await startLiveCall(server, org, [OPT_OUT], { target });
    await call.spoken;
    const ended = await call.hangUp();
    const heard = (await server.h.database.db.selectFrom('conversation_messages').select('text')
      .where('conversation_id', '=', ended.id).where('direction', '=', 'inbound').execute()).map((m) => m.text);
    assert.deepEqual(heard, [OPT_OUT], 'the recogniser heard the callee');
    const analysis = await waitFor('the analysis', async () => {
      const a = await analysisRepo.find(server.h.database.db, ended.id);
      return a && (a.state === 'finished' || a.state === 'failed') && a;
    }, 20_000);
    assert.equal(analysis.state, 'finished', analysis.last_error ?? '');
    assert.equal(analysis.engine, 'simulated');
    assert.equal(JSON.parse(analysis.answer!).outcome, 'do-not-call');
    const entry = await server.h.call('GET', '/api/v2/do-not-call', { token: org.token, query: { number: target } });
    assert.equal(entry.body.total, 1, JSON.stringify(entry.body));
    assert.deepEqual([entry.body.numbers[0].source, entry.body.numbers[0].evidence], ['call-analysis', ended.id]);
    const again = await server.h.call('POST', '/api/v2/tasks', { token: org.token, body: { type: 'call', target } });
    assert.equal(again.status, 422);
  });
});
