// The SIMULATED engine: what conversations run on when no model provider is configured, so a
// newcomer sees the whole flow (channels, records, webhooks, tools) without a key. It is not a
// language model and says so in every reply; the conversation records show engine `simulated`.
// docs/conversations.md shows how to point at a real provider in one line.
import type { ChatEngine, ChatRequest, ChatResult, ToolCall } from './types.ts';

export const SIMULATED = 'simulated';
export const SIMULATED_PREFIX = '[simulated reply: no language model is configured]';

let seq = 0;

/** A rough token count (about four characters a token) so records and bills have inputs. */
const tokens = (s: string) => Math.ceil(s.length / 4);

export class SimulatedEngine implements ChatEngine {
  readonly name = SIMULATED;
  readonly simulated = true;

  chat(req: ChatRequest): Promise<ChatResult> {
    const last = req.messages[req.messages.length - 1];
    const input = req.messages.reduce((n, m) => n + tokens(m.content), 0);
    const offered = new Set((req.tools ?? []).map((t) => t.name));
    let text: string;
    const toolCalls: ToolCall[] = [];
    if (last?.role === 'tool') {
      text = `${SIMULATED_PREFIX} Done.`;
    } else if (last?.role === 'user') {
      const said = last.content.trim();
      if (/\b(bye|goodbye)\b/i.test(said) && offered.has('end_conversation')) {
        toolCalls.push({ id: `sim_${++seq}`, name: 'end_conversation', arguments: JSON.stringify({ reason: 'the caller said goodbye' }) });
        text = `${SIMULATED_PREFIX} Goodbye!`;
      } else {
        const quoted = said.length > 200 ? `${said.slice(0, 200)}…` : said;
        text = `${SIMULATED_PREFIX} You said: "${quoted}"`;
      }
    } else {
      text = `${SIMULATED_PREFIX} Hello!`;
    }
    for (const ch of text.match(/.{1,24}/gs) ?? []) req.onText?.(ch);
    return Promise.resolve({
      text, toolCalls, usage: { input, output: tokens(text) },
      finishReason: toolCalls.length ? 'tool_calls' : 'stop', model: SIMULATED,
    });
  }

  listModels(): Promise<string[]> {
    return Promise.resolve([]);
  }
}
