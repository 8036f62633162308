// The pure parts of the analysis after a conversation (src/modules/conversations/analysis.ts):
// the facts that decide before the model, the bound on the transcript a model reads, the check of
// an answer, and the schema sent for structured output.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  analysisMessages, answerSchema, boundedTranscript, checkAnswer, factsOf, factsOfConversation, MAX_LINE_CHARS, MAX_TRANSCRIPT_CHARS, plainSchema,
} from '../../src/modules/conversations/analysis.ts';
import { resolveAgentSettings } from '../../src/modules/agents/settings.ts';

const config = resolveAgentSettings({ analysisFields: { budget: { type: 'number' }, plan: { type: 'enum', values: ['basic', 'pro'] } }, analysisOutcomes: [{ name: 'demo-booked' }] });
const valid = { summary: 's', outcome: 'demo-booked', leadRating: 3, leadRatingReason: 'r', fields: { budget: null, plan: 'pro' } };

describe('the analysis after a conversation (pure parts)', () => {
  it('facts decide before the model: a machine, a transfer, nobody speaking', () => {
    // The voicemail detection's record (conversations.answered_by) is the machine fact.
    assert.deepEqual(factsOf(factsOfConversation({ channel: 'sip', outcome: 'hung_up', messages_in: 3, answered_by: 'machine' })), { outcome: 'voicemail', final: true });
    assert.deepEqual(factsOf(factsOfConversation({ channel: 'voice', outcome: 'voicemail', messages_in: 0, answered_by: null })), { outcome: 'voicemail', final: true });
    assert.deepEqual(factsOf(factsOfConversation({ channel: 'sip', outcome: 'hung_up', messages_in: 3, answered_by: 'human' })), { final: false });
    assert.deepEqual(factsOf({ channel: 'sip', ended: 'hung_up', messagesIn: 2, machineAnswered: true }), { outcome: 'voicemail', final: true });
    assert.deepEqual(factsOf({ channel: 'voice', ended: 'transferred', messagesIn: 3 }), { outcome: 'transferred', final: false });
    assert.deepEqual(factsOf({ channel: 'voice', ended: 'transferred', messagesIn: 0 }), { outcome: 'transferred', final: true });
    assert.deepEqual(factsOf({ channel: 'voice', ended: 'hung_up', messagesIn: 0 }), { outcome: 'no-answer', final: true });
    assert.deepEqual(factsOf({ channel: 'sip', ended: 'failed', messagesIn: 0 }), { outcome: 'failed', final: true });
    assert.deepEqual(factsOf({ channel: 'api', ended: 'completed', messagesIn: 1 }), { final: false });
  });

  it('the transcript a model reads is bounded: each line, and the whole, keeping its beginning and its end', () => {
    const messages = Array.from({ length: 400 }, (_, i) => ({ direction: i % 2 ? 'outbound' as const : 'inbound' as const, text: `${i} ${'x'.repeat(5000)}` }));
    messages.push({ direction: 'tool' as never, text: 'send_text: ok' });
    const lines = boundedTranscript(messages);
    assert.ok(lines.every((l) => l.text.length <= MAX_LINE_CHARS + 1));
    assert.ok(lines.reduce((n, l) => n + l.text.length, 0) <= MAX_TRANSCRIPT_CHARS);
    assert.match(lines[0].text, /^0 /);
    assert.match(lines.at(-1)!.text, /^399 /);
    const note = lines.find((l) => l.speaker === 'note')!;
    assert.match(note.text, /^\d+ lines left out here$/);
    assert.ok(!lines.some((l) => l.text.startsWith('send_text')), 'tool records are left out');
    const doc = analysisMessages({ channel: 'api', direction: 'inbound', outcome: 'completed', outcome_detail: null, duration_ms: 1000 }, config, messages, {})[1].content;
    assert.ok(doc.length < MAX_TRANSCRIPT_CHARS + 5000, `the whole request stays bounded: ${doc.length}`);
    const small = boundedTranscript([{ direction: 'inbound', text: 'hi' }]);
    assert.deepEqual(small, [{ speaker: 'caller', text: 'hi' }]);
  });

  it('an answer is checked: JSON (a code fence tolerated), the schema, the outcomes and the enum values', () => {
    assert.deepEqual(checkAnswer(JSON.stringify(valid), config), valid);
    assert.deepEqual(checkAnswer(`\`\`\`json\n${JSON.stringify(valid)}\n\`\`\``, config), valid);
    assert.throws(() => checkAnswer('not json', config), /not valid JSON/);
    assert.throws(() => checkAnswer(JSON.stringify({ ...valid, leadRating: 0 }), config), /^Error: leadRating: /);
    assert.throws(() => checkAnswer(JSON.stringify({ ...valid, leadRating: 2.5 }), config), /leadRating/);
    assert.throws(() => checkAnswer(JSON.stringify({ ...valid, outcome: 'won' }), config), /outcome: must be one of resolved, .*demo-booked/);
    assert.throws(() => checkAnswer(JSON.stringify({ ...valid, fields: { budget: 'lots', plan: null } }), config), /fields\.budget/);
    assert.throws(() => checkAnswer(JSON.stringify({ ...valid, fields: { budget: 1, plan: 'gold' } }), config), /fields\.plan: must be null or one of basic, pro/);
    assert.throws(() => checkAnswer(JSON.stringify({ ...valid, fields: { budget: 1, plan: null, extra: 1 } }), config), /fields/);
    assert.throws(() => checkAnswer(JSON.stringify({ ...valid, summary: 'x'.repeat(2001) }), config), /summary/);
  });

  it('the schema sent for structured output names every field, requires them all, and leaves out the bounds strict mode refuses', () => {
    const wire = plainSchema(answerSchema(config, false)) as any;
    assert.deepEqual(wire.required.sort(), ['fields', 'leadRating', 'leadRatingReason', 'outcome', 'summary']);
    assert.equal(wire.additionalProperties, false);
    assert.deepEqual(wire.properties.fields.required.sort(), ['budget', 'plan']);
    assert.equal(wire.properties.fields.additionalProperties, false);
    assert.ok(!JSON.stringify(wire).includes('maxLength') && !JSON.stringify(wire).includes('maximum'));
    assert.deepEqual(wire.properties.outcome.enum.slice(-1), ['demo-booked']);
  });
});
