// `callplane tokens create|list|revoke`: an account's API tokens, through the API.
import { parseArgs } from 'node:util';
import { ok } from '../../sdk/client.js';
import { accountId, API_OPTIONS, apiClient } from './api-client.ts';
import { HELP, UsageError } from './usage.ts';

export async function tokensCommand(argv: string[], out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv, allowPositionals: true,
    options: { ...API_OPTIONS, account: { type: 'string' }, description: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) return void out.write(HELP.tokens + '\n'), 0;
  const [action, ...rest] = positionals;
  const query = { targetAccountId: accountId(values.account) };
  switch (action) {
    case 'list': {
      if (rest.length) throw new UsageError(`tokens list takes no arguments (got '${rest.join(' ')}')`, HELP.tokens);
      const { tokens } = await ok(apiClient(values).GET('/api/v2/tokens', { params: { query } }));
      if (tokens.length === 0) return void out.write('no tokens\n'), 0;
      const rows = tokens.map((t) => [t.token, t.type, new Date(Number(t.timestamp) * 1000).toISOString().replace(/\.\d+Z$/, 'Z'), t.description]);
      const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i].length), ['PREFIX', 'TYPE', 'CREATED'][i].length));
      out.write(['PREFIX', 'TYPE', 'CREATED', 'DESCRIPTION'].map((h, i) => (i < 3 ? h.padEnd(widths[i]) : h)).join('  ') + '\n');
      for (const r of rows) out.write(r.map((c, i) => (i < 3 ? c.padEnd(widths[i]) : c)).join('  ') + '\n');
      return 0;
    }
    case 'create': {
      if (rest.length) throw new UsageError(`tokens create takes no arguments (got '${rest.join(' ')}'); the description goes in --description`, HELP.tokens);
      if (!values.description) throw new UsageError('tokens create needs --description TEXT (what the token is for)', HELP.tokens);
      const { token } = await ok(apiClient(values).POST('/api/v2/tokens', { params: { query }, body: { type: 'admin', description: values.description } }));
      err.write(`token created for account ${token.userId} (${token.description}); it is shown this once:\n`);
      out.write(token.token + '\n');
      return 0;
    }
    case 'revoke': {
      if (rest.length !== 1) throw new UsageError('tokens revoke takes one token or listed prefix', HELP.tokens);
      const answer = await ok(apiClient(values).DELETE('/api/v2/tokens', { params: { query }, body: { token: rest[0] } }));
      out.write(`${answer.message ?? 'token revoked'}\n`);
      return 0;
    }
    default:
      throw new UsageError(action ? `unknown tokens action '${action}'` : 'tokens needs an action: create, list or revoke', HELP.tokens);
  }
}
