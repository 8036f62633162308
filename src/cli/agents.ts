// `callplane agents publish AGENT_ID`: an agent's staging configuration goes live, through the API.
import { parseArgs } from 'node:util';
import { ok } from '../../sdk/client.js';
import { accountId, API_OPTIONS, apiClient } from './api-client.ts';
import { HELP, UsageError } from './usage.ts';

export async function agentsCommand(argv: string[], out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: { ...API_OPTIONS, help: { type: 'boolean', short: 'h' } } });
  if (values.help) return void out.write(HELP.agents + '\n'), 0;
  const [action, ...rest] = positionals;
  if (action !== 'publish') throw new UsageError(action ? `unknown agents action '${action}'` : 'agents needs an action: publish', HELP.agents);
  if (rest.length !== 1) throw new UsageError('agents publish takes one agent id', HELP.agents);
  const agent = accountId(rest[0], 'AGENT_ID')!;
  const answer = await ok(apiClient(values).POST('/api/v2/agent/publish', { params: { query: { targetAccountId: agent } } }));
  out.write(`agent ${agent} published: ${answer.message ?? 'staging is live'}\n`);
  out.write(`the live configuration it replaced is version ${answer.previousVersionId} (restore it to undo)\n`);
  return 0;
}
