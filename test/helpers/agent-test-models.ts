// Scripted models for agent tests (issue 36), answering what each request carries so conversations
// that run side by side get their own answers from the loopback model servers (test/helpers/fake-llm.ts).
import type { RecordedChat, ScriptedReply } from './fake-llm.ts';

export type Body = RecordedChat['body'];
export const system = (b: Body) => b.messages[0]?.content ?? '';
const lastOf = (b: Body) => b.messages.at(-1)!;

/**
 * The agent: GOOD instructions book with book_slot (after trying send_text, which no test mocks),
 * confirm the day, and end the call when the caller says bye; BROKEN ones never book and never confirm.
 */
export function agentReply(b: Body): ScriptedReply {
  const good = system(b).includes('GOOD');
  const last = lastOf(b);
  if (last.role === 'tool') {
    const booked = b.messages.some((m) => m.role === 'tool' && (m.content ?? '').includes('slot'));
    return { text: booked ? 'I confirm your cleaning on Tuesday at 9:00.' : 'One moment.' };
  }
  const said = last.content ?? '';
  if (/bye/i.test(said)) return good ? { text: 'Goodbye!', toolCalls: [{ name: 'end_conversation', arguments: { reason: 'done' } }] } : { text: 'We have many slots.' };
  if (good && /book/i.test(said)) {
    return { toolCalls: [{ name: 'send_text', arguments: { message: 'Booking you in' } }, { name: 'book_slot', arguments: { day: 'Tuesday', time: '9:00' } }] };
  }
  return { text: good ? 'How can I help?' : 'We have many slots.' };
}

/** The caller: asks to book, says bye once it heard a confirmation, and is done after three lines. */
export function callerReply(b: Body): ScriptedReply {
  const mine = b.messages.filter((m) => m.role === 'assistant').length;
  const heard = b.messages.filter((m) => m.role === 'user').map((m) => m.content ?? '').join('\n');
  if (mine === 0) return { text: 'Hi, I would like to book a cleaning on Tuesday.' };
  if (/confirm/i.test(heard) && mine < 3) return { text: 'Great, thanks, bye.' };
  if (mine >= 3) return { text: '[END]' };
  return { text: 'Can you book it please?' };
}

/** The judge: passes when the agent's lines confirm the day. */
export function judgeReply(b: Body): ScriptedReply {
  const transcript = lastOf(b).content ?? '';
  const confirmed = /"who":"agent","text":"I confirm your cleaning on Tuesday/.test(transcript);
  return { text: JSON.stringify(confirmed ? { pass: true, reason: 'The agent confirmed Tuesday at 9:00 before ending.' } : { pass: false, reason: 'The agent never confirmed a date.' }) };
}

export const BOOK_SLOT = { name: 'book_slot', description: 'Book a slot', parameters: { day: { type: 'string', required: true }, time: { type: 'string' } } };
