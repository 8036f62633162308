// The provider layer against an OpenAI-compatible server on loopback: streamed text, tool calls
// assembled from pieces, usage, retries on 429/5xx, errors that name the provider, model lists.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sdkRequested } from '../../src/lib/openai-sdk.ts';
import { OpenAICompatible } from '../../src/llm/openai-compatible.ts';
import { SimulatedEngine, SIMULATED_PREFIX } from '../../src/llm/simulated.ts';
import { ModelError } from '../../src/llm/types.ts';
import { startFakeLlm, type FakeLlm } from '../helpers/fake-llm.ts';

describe('OpenAI-compatible provider', () => {
  let fake: FakeLlm;
  let engine: OpenAICompatible;
  before(async () => {
    fake = await startFakeLlm({ models: ['m-one', 'm-two'] });
    engine = new OpenAICompatible({ name: 'local', baseUrl: fake.baseUrl, apiKey: 'sk-test', timeoutMs: 2000, maxRetries: 2 });
  });
  after(() => fake.close());

  it('loads the openai package when warmed (a call, as it is answered), not when built; the chat after it works', async () => {
    assert.equal(sdkRequested(), false, 'building the engine loaded nothing');
    engine.warm();
    assert.equal(sdkRequested(), true);
    fake.script.push({ text: 'Warm.' });
    assert.equal((await engine.chat({ model: 'm-one', messages: [{ role: 'user', content: 'hi' }] })).text, 'Warm.');
  });

  it('streams text, reports usage and sends the key, the model and the messages', async () => {
    fake.script.push({ text: 'Hello there, how can I help?', usage: { prompt_tokens: 42, completion_tokens: 9 } });
    const pieces: string[] = [];
    const r = await engine.chat({ model: 'm-one', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }], onText: (d) => pieces.push(d) });
    assert.equal(r.text, 'Hello there, how can I help?');
    assert.ok(pieces.length > 1, 'text arrives in pieces');
    assert.equal(pieces.join(''), r.text);
    assert.deepEqual(r.usage, { input: 42, output: 9 });
    const req = fake.requests.at(-1)!;
    assert.equal(req.headers.authorization, 'Bearer sk-test');
    assert.equal(req.body.model, 'm-one');
    assert.equal(req.body.stream, true);
    assert.deepEqual(req.body.messages.map((m) => m.role), ['system', 'user']);
  });

  it('assembles tool calls from streamed pieces and sends tools and tool results back', async () => {
    fake.script.push({ toolCalls: [{ name: 'lookup', arguments: { query: 'opening hours' }, id: 'call_a' }] });
    const r = await engine.chat({
      model: 'm-one', messages: [{ role: 'user', content: 'when are you open?' }],
      tools: [{ name: 'lookup', description: 'Look it up', parameters: { type: 'object', properties: { query: { type: 'string' } } } }],
    });
    assert.deepEqual(r.toolCalls, [{ id: 'call_a', name: 'lookup', arguments: '{"query":"opening hours"}' }]);
    assert.equal(r.finishReason, 'tool_calls');
    assert.equal(fake.requests.at(-1)!.body.tools?.[0]?.function.name, 'lookup');
    await engine.chat({
      model: 'm-one',
      messages: [
        { role: 'user', content: 'when are you open?' },
        { role: 'assistant', content: '', toolCalls: r.toolCalls },
        { role: 'tool', toolCallId: 'call_a', content: '9 to 5' },
      ],
    });
    const sent = fake.requests.at(-1)!.body.messages;
    assert.equal(sent[1]!.tool_calls?.[0]?.function.name, 'lookup');
    assert.equal(sent[2]!.tool_call_id, 'call_a');
  });

  it('retries a 429 and a 503, then succeeds', async () => {
    const before = fake.requests.length;
    fake.script.push({ status: 429 }, { status: 503 }, { text: 'third time' });
    const r = await engine.chat({ model: 'm-one', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(r.text, 'third time');
    assert.equal(fake.requests.length - before, 3);
  });

  it('gives up after its retries with an error naming the provider and the status', async () => {
    fake.script.push({ status: 500 }, { status: 500 }, { status: 500 });
    await assert.rejects(engine.chat({ model: 'm-one', messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
      assert.ok(err instanceof ModelError);
      assert.equal(err.provider, 'local');
      assert.equal(err.status, 500);
      assert.match(err.message, /model provider 'local' failed: 500/);
      return true;
    });
  });

  it('does not retry a 400', async () => {
    const before = fake.requests.length;
    fake.script.push({ status: 400 });
    await assert.rejects(engine.chat({ model: 'm-one', messages: [{ role: 'user', content: 'x' }] }), ModelError);
    assert.equal(fake.requests.length - before, 1);
  });

  it('times out a request that takes too long', async () => {
    const slow = new OpenAICompatible({ name: 'slow', baseUrl: fake.baseUrl, apiKey: undefined, timeoutMs: 1000, maxRetries: 0 });
    fake.script.push({ delayMs: 3000, text: 'late' });
    await assert.rejects(slow.chat({ model: 'm-one', messages: [{ role: 'user', content: 'x' }] }), /model provider 'slow' failed/);
  });

  it('lists the models the server serves', async () => {
    assert.deepEqual(await engine.listModels(), ['m-one', 'm-two']);
  });

  it('names an unreachable provider', async () => {
    const gone = new OpenAICompatible({ name: 'gone', baseUrl: 'http://127.0.0.1:9/v1', apiKey: undefined, timeoutMs: 1000, maxRetries: 0 });
    await assert.rejects(gone.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }] }), /model provider 'gone' failed/);
  });
});

describe('SIMULATED engine', () => {
  it('says it is simulated, echoes what it was told and ends the conversation on goodbye when it may', async () => {
    const sim = new SimulatedEngine();
    const r = await sim.chat({ model: 'x', messages: [{ role: 'user', content: 'what time is it' }] });
    assert.ok(r.text.startsWith(SIMULATED_PREFIX));
    assert.match(r.text, /what time is it/);
    assert.equal(r.toolCalls.length, 0);
    const bye = await sim.chat({
      model: 'x', messages: [{ role: 'user', content: 'ok bye' }],
      tools: [{ name: 'end_conversation', description: '', parameters: {} }],
    });
    assert.equal(bye.toolCalls[0]?.name, 'end_conversation');
    const notOffered = await sim.chat({ model: 'x', messages: [{ role: 'user', content: 'ok bye' }] });
    assert.equal(notOffered.toolCalls.length, 0);
  });
});
