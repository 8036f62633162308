// `callplane calls watch`: the calls in progress and their latest transcript lines, polled from
// the API (it has no push feed of its own yet): call tasks running on a carrier (GET
// /api/v2/tasks?state=running&type=call) and open call conversations (GET /api/v2/logs with
// outcome=open, eventType=call), joined by task id, each with its transcript's last lines (GET
// /api/v2/conversation/{roomId}/{uuid}). A terminal is redrawn; anything else gets one line per
// change. SIGINT (Ctrl-C) ends it with exit code 0.
import { parseArgs } from 'node:util';
import { CallplaneError, ok, type CallplaneClient } from '../../sdk/client.js';
import { accountId, API_OPTIONS, apiClient } from './api-client.ts';
import { HELP, UsageError } from './usage.ts';

interface Line { uuid: string; direction: string; message: string }
interface LiveCall {
  key: string;
  taskId?: string;
  roomId?: string;
  uuid?: string;
  party: string;
  direction: string;
  via: string;
  state: string;
  startedAt: number | null;
  lines: Line[];
}

/** At most this many open conversations are followed per poll (each costs one request for its transcript). */
const MAX_CONVERSATIONS = 50;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const who = (direction: string) => (direction === 'outbound' ? 'agent' : direction === 'inbound' ? 'caller' : direction);
const clock = (unix: number | null) => (unix ? new Date(unix * 1000).toISOString().slice(11, 19) : '--:--:--');

async function snapshot(client: CallplaneClient, target: number | undefined, lineCount: number): Promise<Map<string, LiveCall>> {
  const calls = new Map<string, LiveCall>();
  const [{ tasks }, logs] = await Promise.all([
    ok(client.GET('/api/v2/tasks', { params: { query: { state: 'running', type: 'call', limit: 100, sort: 'createdAt', order: 'asc', targetAccountId: target } } })),
    ok(client.GET('/api/v2/logs', {
      params: { query: { outcome: 'open', eventType: 'call', pageSize: MAX_CONVERSATIONS, fields: 'uuid,roomId,channel,direction,counterpart,counterpartName,startedAt,taskId,provider', targetAccountId: target } },
    })),
  ]);
  for (const t of tasks) {
    calls.set(`task:${t.id}`, {
      key: `task:${t.id}`, taskId: t.id, party: t.target ?? '', direction: 'outbound',
      // A carrier that reports the call's progress (Twilio) is named while it runs; the SIMULATED
      // one runs the whole call inside one step and is named when it ends.
      via: t.provider ? `${t.provider}${t.result?.simulated === true ? ' (SIMULATED)' : ''}` : 'a carrier not reported yet',
      state: t.state, startedAt: t.startedAt ?? null, lines: [],
    });
  }
  await Promise.all(logs.logs.map(async (entry) => {
    const uuid = str(entry.uuid);
    const roomId = str(entry.roomId);
    if (!uuid || !roomId) return;
    const taskId = str(entry.taskId);
    const key = taskId && calls.has(`task:${taskId}`) ? `task:${taskId}` : `conversation:${uuid}`;
    const call: LiveCall = calls.get(key) ?? {
      key, taskId, party: str(entry.counterpartName) ?? str(entry.counterpart) ?? '', direction: str(entry.direction) ?? '',
      via: `${str(entry.channel) ?? 'call'}${str(entry.provider) ? ` ${str(entry.provider)}` : ''}`,
      state: 'in progress', startedAt: typeof entry.startedAt === 'number' ? entry.startedAt : null, lines: [],
    };
    call.uuid = uuid;
    call.roomId = roomId;
    try {
      const [conversation] = await ok(client.GET('/api/v2/conversation/{roomId}/{uuid}', { params: { path: { roomId, uuid }, query: { targetAccountId: target } } }));
      call.lines = (conversation?.conversation ?? []).filter((l) => l.direction !== 'tool').slice(-lineCount)
        .map((l) => ({ uuid: l.uuid, direction: l.direction, message: l.message.replace(/\s+/g, ' ') }));
    } catch (err) {
      // Ended (and so gone from the open ones) between the two reads: shown on the next poll.
      if (!(err instanceof CallplaneError && err.status === 404)) throw err;
    }
    calls.set(key, call);
  }));
  return calls;
}

function describe(call: LiveCall): string {
  const id = call.taskId ?? call.uuid ?? call.key;
  return `call ${id} ${call.direction === 'inbound' ? 'from' : 'to'} ${call.party || '?'} via ${call.via}: ${call.state} since ${clock(call.startedAt)}`;
}

/** How a call that is no longer live ended (its task's or its conversation's outcome). */
async function ending(client: CallplaneClient, call: LiveCall, target: number | undefined): Promise<string> {
  try {
    if (call.taskId) {
      const { task } = await ok(client.GET('/api/v2/tasks/{taskId}', { params: { path: { taskId: call.taskId }, query: { targetAccountId: target } } }));
      const outcome = typeof task.result?.outcome === 'string' ? ` (${task.result.outcome})` : '';
      const via = task.provider ? ` on ${task.provider}` : '';
      const note = typeof task.result?.note === 'string' ? ` — ${task.result.note}` : '';
      return `${task.state}${outcome}${via}${task.error ? `: ${task.error}` : ''}${note}`;
    }
    if (call.roomId && call.uuid) {
      const [c] = await ok(client.GET('/api/v2/conversation/{roomId}/{uuid}', { params: { path: { roomId: call.roomId, uuid: call.uuid }, query: { targetAccountId: target } } }));
      return c?.outcome ?? 'ended';
    }
  } catch { /* reported as ended below */ }
  return 'ended';
}

export async function callsCommand(argv: string[], out: NodeJS.WritableStream & { isTTY?: boolean; columns?: number } = process.stdout, err: NodeJS.WritableStream = process.stderr): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv, allowPositionals: true,
    options: { ...API_OPTIONS, account: { type: 'string' }, interval: { type: 'string' }, lines: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) return void out.write(HELP.calls + '\n'), 0;
  const [action, ...rest] = positionals;
  if (action !== 'watch') throw new UsageError(action ? `unknown calls action '${action}'` : 'calls needs an action: watch', HELP.calls);
  if (rest.length) throw new UsageError(`calls watch takes no arguments (got '${rest.join(' ')}')`, HELP.calls);
  const interval = values.interval === undefined ? 2 : Number(values.interval);
  if (!Number.isFinite(interval) || interval < 0.2 || interval > 3600) throw new UsageError(`--interval must be seconds between 0.2 and 3600 (got '${values.interval}')`);
  const lineCount = values.lines === undefined ? 3 : Number(values.lines);
  if (!Number.isInteger(lineCount) || lineCount < 0 || lineCount > 50) throw new UsageError(`--lines must be a whole number from 0 to 50 (got '${values.lines}')`);
  const target = accountId(values.account);
  const client = apiClient(values);
  const tty = out.isTTY === true;

  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => { stop = resolve; });
  const onSigint = () => stop();
  process.on('SIGINT', onSigint);
  err.write(`watching live calls every ${interval} s (Ctrl-C to stop)\n`);
  let previous = new Map<string, LiveCall>();
  let problem = '';
  try {
    for (let running = true; running;) {
      let current: Map<string, LiveCall> | undefined;
      try {
        current = await snapshot(client, target, lineCount);
        if (problem) err.write('the API answers again\n');
        problem = '';
      } catch (e) {
        // A refused token or account will not get better: stop. Anything else (the service
        // restarting, a 503 while the database is away) is shown and polled again.
        if (e instanceof CallplaneError && [401, 403, 404].includes(e.status)) throw e;
        const message = e instanceof Error ? e.message : String(e);
        if (message !== problem) err.write(`polling failed, trying again: ${message}\n`);
        problem = message;
      }
      if (current) {
        if (tty) {
          const width = out.columns ?? 100;
          const screen = [`\x1b[H\x1b[2J${current.size} live call${current.size === 1 ? '' : 's'} — ${new Date().toISOString().slice(11, 19)} UTC — Ctrl-C to stop`, ''];
          for (const call of current.values()) {
            screen.push(describe(call).slice(0, width));
            for (const l of call.lines) screen.push(`    ${who(l.direction)}: ${l.message}`.slice(0, width));
          }
          out.write(screen.join('\n') + '\n');
        } else {
          for (const call of current.values()) {
            const before = previous.get(call.key);
            // New (+), or its state or carrier changed (~: a carrier is named once it reports the call).
            if (!before || before.state !== call.state || before.via !== call.via) out.write(`${before ? '~' : '+'} ${describe(call)}\n`);
            const seen = new Set(before?.lines.map((l) => l.uuid));
            for (const l of call.lines) if (!seen.has(l.uuid)) out.write(`  ${call.taskId ?? call.uuid} ${who(l.direction)}: ${l.message}\n`);
          }
          for (const call of previous.values()) {
            if (!current.has(call.key)) out.write(`- call ${call.taskId ?? call.uuid} ended: ${await ending(client, call, target)}\n`);
          }
        }
        previous = current;
      }
      let timer: NodeJS.Timeout | undefined;
      running = await Promise.race([
        stopped.then(() => false),
        new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(true), interval * 1000); }),
      ]);
      clearTimeout(timer);
    }
  } finally {
    process.off('SIGINT', onSigint);
  }
  err.write('stopped\n');
  return 0;
}
