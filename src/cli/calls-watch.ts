// `callplane calls watch`: the calls in progress and their latest transcript lines. Call tasks
// running on a carrier (GET /api/v2/tasks?state=running&type=call) are polled; the open call
// conversations and their lines come pushed from the live feed (GET /api/v2/conversations/live,
// Server-Sent Events) when the server offers it, and are otherwise polled too (GET /api/v2/logs
// with outcome=open, eventType=call, each with its transcript's last lines from GET
// /api/v2/conversation/{roomId}/{uuid}). Conversations are joined to their tasks by task id. A
// terminal is redrawn; anything else gets one line per change. SIGINT (Ctrl-C) ends it with exit
// code 0. A reseller's or partner's token without --account has no tasks of its own (they are an
// organization's: the API answers 403): it follows the live feed across every organization below
// it, each call named with its organization, and says how each ended from the feed.
import { parseArgs } from 'node:util';
import { CallplaneError, liveEvents, ok, type CallplaneClient, type LiveConversation, type LiveEvent } from '../../sdk/client.js';
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
  /** The organization it belongs to, shown when watching across organizations. */
  orgId?: number;
}

/** At most this many open conversations are followed per poll (each costs one request for its transcript). */
const MAX_CONVERSATIONS = 50;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const who = (direction: string) => (direction === 'outbound' ? 'agent' : direction === 'inbound' ? 'caller' : direction);
const clock = (unix: number | null) => (unix ? new Date(unix * 1000).toISOString().slice(11, 19) : '--:--:--');

/** An open call conversation and its last lines (from the live feed, or polled). */
interface OpenCall {
  uuid: string;
  roomId: string;
  taskId?: string;
  party: string;
  direction: string;
  via: string;
  startedAt: number | null;
  lines: Line[];
  orgId?: number;
}

const lineOf = (l: { uuid: string; direction: string; message: string }): Line => ({ uuid: l.uuid, direction: l.direction, message: l.message.replace(/\s+/g, ' ') });

/** Call tasks running on a carrier. */
async function runningTasks(client: CallplaneClient, target: number | undefined): Promise<Map<string, LiveCall>> {
  const calls = new Map<string, LiveCall>();
  const { tasks } = await ok(client.GET('/api/v2/tasks', { params: { query: { state: 'running', type: 'call', limit: 100, sort: 'createdAt', order: 'asc', targetAccountId: target } } }));
  for (const t of tasks) {
    calls.set(`task:${t.id}`, {
      key: `task:${t.id}`, taskId: t.id, party: t.target ?? '', direction: 'outbound',
      // A carrier that reports the call's progress (Twilio) is named while it runs; the SIMULATED
      // one runs the whole call inside one step and is named when it ends.
      via: t.provider ? `${t.provider}${t.result?.simulated === true ? ' (SIMULATED)' : ''}` : 'a carrier not reported yet',
      state: t.state, startedAt: t.startedAt ?? null, lines: [],
    });
  }
  return calls;
}

/** The open call conversations, polled: the logs' open calls, each with its transcript's last lines. */
async function polledConversations(client: CallplaneClient, target: number | undefined, lineCount: number): Promise<OpenCall[]> {
  const logs = await ok(client.GET('/api/v2/logs', {
    params: { query: { outcome: 'open', eventType: 'call', pageSize: MAX_CONVERSATIONS, fields: 'uuid,roomId,channel,direction,counterpart,counterpartName,startedAt,taskId,provider', targetAccountId: target } },
  }));
  const open = await Promise.all(logs.logs.map(async (entry): Promise<OpenCall | undefined> => {
    const uuid = str(entry.uuid);
    const roomId = str(entry.roomId);
    if (!uuid || !roomId) return undefined;
    const call: OpenCall = {
      uuid, roomId, taskId: str(entry.taskId), party: str(entry.counterpartName) ?? str(entry.counterpart) ?? '', direction: str(entry.direction) ?? '',
      via: `${str(entry.channel) ?? 'call'}${str(entry.provider) ? ` ${str(entry.provider)}` : ''}`,
      startedAt: typeof entry.startedAt === 'number' ? entry.startedAt : null, lines: [],
    };
    try {
      const [conversation] = await ok(client.GET('/api/v2/conversation/{roomId}/{uuid}', { params: { path: { roomId, uuid }, query: { targetAccountId: target } } }));
      call.lines = (conversation?.conversation ?? []).filter((l) => l.direction !== 'tool').slice(-lineCount).map(lineOf);
    } catch (err) {
      // Ended (and so gone from the open ones) between the two reads: shown on the next poll.
      if (!(err instanceof CallplaneError && err.status === 404)) throw err;
    }
    return call;
  }));
  return open.filter((c) => c !== undefined);
}

/** The running tasks with the open conversations: a conversation placed by a task is shown under the task. */
function joined(tasks: Map<string, LiveCall>, open: OpenCall[], lineCount: number): Map<string, LiveCall> {
  const calls = new Map(tasks);
  for (const c of open) {
    const key = c.taskId && calls.has(`task:${c.taskId}`) ? `task:${c.taskId}` : `conversation:${c.uuid}`;
    const call: LiveCall = calls.get(key) ?? {
      key, taskId: c.taskId, party: c.party, direction: c.direction, via: c.via, state: 'in progress', startedAt: c.startedAt, lines: [], orgId: c.orgId,
    };
    calls.set(key, { ...call, uuid: c.uuid, roomId: c.roomId, lines: c.lines.slice(-lineCount) });
  }
  return calls;
}

/**
 * The open call conversations as the live feed says, kept up to date by its events; `calls` is
 * undefined until the first snapshot, and again while the stream is away (the watch polls then).
 */
class LiveFeedState {
  calls: Map<string, OpenCall> | undefined;
  /** The server has no live feed (an older callplane): poll. */
  offered = true;
  /** How the calls the feed saw end ended (its `conversation` event), by uuid: the last 1,000. */
  readonly ended = new Map<string, string>();

  constructor(private readonly lineCount: number) {}

  #open(c: LiveConversation, lines: Line[]): OpenCall {
    return {
      uuid: c.uuid, roomId: c.roomId, taskId: c.taskId ?? undefined, party: c.counterpartName ?? c.counterpart, direction: c.direction,
      via: c.channel, startedAt: c.startedAt, lines, orgId: c.orgId,
    };
  }

  /** One event; true when what is shown may have changed. */
  apply(e: LiveEvent): boolean {
    if (e.event === 'snapshot') {
      this.calls = new Map(e.data.calls.filter((c) => c.eventType === 'call')
        .map((c) => [c.uuid, this.#open(c, c.messages.filter((l) => l.direction !== 'tool').slice(-this.lineCount).map(lineOf))]));
      return true;
    }
    if (!this.calls) return false;
    if (e.event === 'conversation') {
      if (e.data.eventType !== 'call') return false;
      if (e.data.outcome !== 'open') {
        this.ended.set(e.data.uuid, e.data.outcomeDetail ? `${e.data.outcome}: ${e.data.outcomeDetail}` : e.data.outcome);
        if (this.ended.size > 1000) this.ended.delete(this.ended.keys().next().value!);
        return this.calls.delete(e.data.uuid);
      }
      this.calls.set(e.data.uuid, this.#open(e.data, this.calls.get(e.data.uuid)?.lines ?? []));
      return true;
    }
    if (e.event === 'message') {
      const call = this.calls.get(e.data.conversationId);
      if (!call || e.data.message.direction === 'tool') return false;
      const line = lineOf(e.data.message);
      const at = call.lines.findIndex((l) => l.uuid === line.uuid);
      if (at >= 0) call.lines[at] = line;
      else call.lines = [...call.lines, line].slice(-this.lineCount);
      return true;
    }
    return false;
  }
}

/** Follows the live feed until `signal` aborts, starting over after a lost stream; `changed` after each change. */
async function follow(client: CallplaneClient, target: number | undefined, state: LiveFeedState, changed: () => void, signal: AbortSignal, retryMs: number): Promise<void> {
  while (!signal.aborted) {
    try {
      for await (const e of liveEvents(client, { targetAccountId: target }, signal)) if (state.apply(e)) changed();
    } catch (err) {
      if (signal.aborted) return;
      // An older server without the route: the watch polls, as it always did.
      if (err instanceof CallplaneError && err.status === 404 && /^Route GET /.test(err.message)) {
        state.offered = false;
        state.calls = undefined;
        changed();
        return;
      }
      // Refused (its token's feeds are all open: 429), or the server away: poll meanwhile, try again.
    }
    state.calls = undefined;
    changed();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, retryMs);
      signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
    });
  }
}

function describe(call: LiveCall, acrossOrgs = false): string {
  const id = call.taskId ?? call.uuid ?? call.key;
  const org = acrossOrgs && call.orgId !== undefined ? ` (organization ${call.orgId})` : '';
  return `call ${id}${org} ${call.direction === 'inbound' ? 'from' : 'to'} ${call.party || '?'} via ${call.via}: ${call.state} since ${clock(call.startedAt)}`;
}

/** How a call that is no longer live ended (its task's or its conversation's outcome). */
async function ending(client: CallplaneClient, call: LiveCall, target: number | undefined, feed: LiveFeedState, acrossOrgs: boolean): Promise<string> {
  // Across organizations, the feed's own end event says (a task or conversation is read per organization).
  if (acrossOrgs) return (call.uuid && feed.ended.get(call.uuid)) || 'ended';
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
  // The feed's events wake the loop at once: a line is shown as it is stored, not at the next poll.
  let wake: (() => void) | undefined;
  const feed = new LiveFeedState(lineCount);
  const abort = new AbortController();
  let said = '';
  const following = follow(client, target, feed, () => wake?.(), abort.signal, Math.max(interval * 1000, 3000));
  let tasks: { at: number; calls: Map<string, LiveCall> } | undefined;
  let previous = new Map<string, LiveCall>();
  /** The lines written so far (not on a terminal), by uuid: the last 10,000. */
  const printed = new Set<string>();
  let problem = '';
  /** A reseller's or partner's token without --account: no tasks of its own; the feed across its organizations. */
  let acrossOrgs = false;
  try {
    for (let running = true; running;) {
      let current: Map<string, LiveCall> | undefined;
      try {
        // Tasks are polled every interval (a stream event in between redraws with those last read).
        if (!acrossOrgs && (!tasks || Date.now() - tasks.at >= interval * 1000 * 0.9)) {
          try {
            tasks = { at: Date.now(), calls: await runningTasks(client, target) };
          } catch (e) {
            // Tasks are an organization's: a reseller's or partner's own token is refused them (403).
            if (!(target === undefined && e instanceof CallplaneError && e.status === 403 && feed.offered)) throw e;
            acrossOrgs = true;
            tasks = { at: Date.now(), calls: new Map() };
            err.write('this account has no tasks of its own: following the live feed across the organizations below it (--account ID for one organization and its tasks)\n');
          }
        }
        const pushed = feed.calls;
        const mode = pushed ? 'following the live feed' : acrossOrgs ? (feed.offered ? 'the live feed is away: waiting for it' : '') : feed.offered ? '' : 'the server has no live feed: polling';
        if (mode && mode !== said) err.write(`${mode}\n`);
        said = mode;
        // Across organizations only the feed tells (the polled operations are an organization's).
        if (acrossOrgs && !feed.offered) throw new CallplaneError(404, { success: false, message: 'the server has no live feed, and tasks and conversations are read per organization: give --account ID' });
        current = acrossOrgs && !pushed ? undefined
          : joined(tasks!.calls, pushed ? [...pushed.values()] : await polledConversations(client, target, lineCount), lineCount);
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
            screen.push(describe(call, acrossOrgs).slice(0, width));
            for (const l of call.lines) screen.push(`    ${who(l.direction)}: ${l.message}`.slice(0, width));
          }
          out.write(screen.join('\n') + '\n');
        } else {
          for (const call of current.values()) {
            const before = previous.get(call.key);
            // New (+), or its state or carrier changed (~: a carrier is named once it reports the call).
            if (!before || before.state !== call.state || before.via !== call.via) out.write(`${before ? '~' : '+'} ${describe(call, acrossOrgs)}\n`);
            // Each line once, by its uuid, however the call was seen meanwhile (a feed that started
            // over, a poll in between, the call named by its task once the carrier reported it).
            for (const l of call.lines) {
              if (printed.has(l.uuid)) continue;
              printed.add(l.uuid);
              if (printed.size > 10_000) printed.delete(printed.values().next().value!);
              out.write(`  ${call.taskId ?? call.uuid} ${who(l.direction)}: ${l.message}\n`);
            }
          }
          for (const call of previous.values()) {
            if (!current.has(call.key)) out.write(`- call ${call.taskId ?? call.uuid} ended: ${await ending(client, call, target, feed, acrossOrgs)}\n`);
          }
        }
        previous = current;
      }
      let timer: NodeJS.Timeout | undefined;
      running = await Promise.race([
        stopped.then(() => false),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), interval * 1000);
          wake = () => resolve(true);
        }),
      ]);
      wake = undefined;
      clearTimeout(timer);
    }
  } finally {
    process.off('SIGINT', onSigint);
    abort.abort();
    await following;
  }
  err.write('stopped\n');
  return 0;
}
