// The floor under issue 15's submission figures: a bare Fastify process over callplane's own
// schema (the tasks table as bench/floor.ts migrated it, with all its indexes unless
// FLOOR_INDEXES=minimal) that does nothing a durable queue could leave out and nothing else.
// POST /submit parses the JSON body, adds one row to tasks (requests arriving together share one
// transaction and one commit) and answers once it is committed; with FLOOR_MODE=all each
// committed row is then moved to running and to finished, as a claim and a completion would, each
// step its own transaction of a whole batch. No authentication, validation, limits, counts,
// outbox events, leases read back or hooks: what callplane does per task can only cost more. GET /healthz answers as callplane's does.
//
// Run by bench/floor.ts: FLOOR_MODE=api|all, PORT, FLOOR_ORG_ID, and DATABASE_URL (PostgreSQL)
// or FLOOR_SQLITE_FILE.
import crypto from 'node:crypto';
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import pg from 'pg';

const MODE = process.env.FLOOR_MODE === 'all' ? 'all' : 'api';
/** FLOOR_STEPS=2: a task is inserted already running (claimed at insert), so its life is two writes. */
const CLAIMED_AT_INSERT = MODE === 'all' && process.env.FLOOR_STEPS === '2';
const ORG = Number(process.env.FLOOR_ORG_ID);
const WORKER = `floor:${process.pid}`;
const LEASE_MS = 30_000;

/** The three durable steps of a task's life, each over a batch of rows in one transaction. */
interface Store {
  insert(ids: string[], now: number, state: 'pending' | 'running'): Promise<void>;
  start(ids: string[], now: number): Promise<void>;
  finish(ids: string[], now: number): Promise<void>;
}

// A ping's row: the columns without a default, and those a claim and a completion write.
const COLUMNS = ['id', 'org_id', 'account_id', 'type', 'state', 'run_at', 'attempt', 'max_attempts', 'wait_to_greet', 'created_at', 'updated_at', 'parked'];

function sqliteStore(file: string): Store {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  const insert = db.prepare(`insert into tasks (${COLUMNS.join(', ')}, lease_owner, lease_expires_at) values (?, ?, ?, 'ping', ?, ?, 0, 3, 0, ?, ?, 0, ?, ?)`);
  const start = db.prepare(`update tasks set state = 'running', attempt = attempt + 1, lease_owner = ?, lease_expires_at = ?, started_at = ?, updated_at = ? where id = ? and state = 'pending'`);
  const finish = db.prepare(`update tasks set state = 'finished', result = ?, finished_at = ?, updated_at = ?, lease_owner = null, lease_expires_at = null where id = ? and state = 'running'`);
  const ins = db.transaction((ids: string[], now: number, state: string) => {
    const lease = state === 'running' ? [WORKER, now + LEASE_MS] : [null, null];
    for (const id of ids) insert.run(id, ORG, ORG, state, now, now, now, ...lease);
  });
  const st = db.transaction((ids: string[], now: number) => { for (const id of ids) start.run(WORKER, now + LEASE_MS, now, now, id); });
  const fin = db.transaction((ids: string[], now: number) => { for (const id of ids) finish.run('{"outcome":"pong"}', now, now, id); });
  return {
    insert: async (ids, now, state) => ins(ids, now, state),
    start: async (ids, now) => st(ids, now),
    finish: async (ids, now) => fin(ids, now),
  };
}

function postgresStore(url: string): Store {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  return {
    async insert(ids, now, state) {
      await pool.query({
        name: 'floor-insert',
        text: `insert into tasks (${COLUMNS.join(', ')}, lease_owner, lease_expires_at) select id, $2, $2, 'ping', $4, $3, 0, 3, 0, $3, $3, 0, $5, $6 from unnest($1::text[]) as id`,
        values: [ids, ORG, now, state, state === 'running' ? WORKER : null, state === 'running' ? now + LEASE_MS : null],
      });
    },
    async start(ids, now) {
      await pool.query({
        name: 'floor-start',
        text: `update tasks set state = 'running', attempt = attempt + 1, lease_owner = $2, lease_expires_at = $3, started_at = $4, updated_at = $4 where id = any($1::text[]) and state = 'pending'`,
        values: [ids, WORKER, now + LEASE_MS, now],
      });
    },
    async finish(ids, now) {
      await pool.query({
        name: 'floor-finish',
        text: `update tasks set state = 'finished', result = '{"outcome":"pong"}', finished_at = $2, updated_at = $2, lease_owner = null, lease_expires_at = null where id = any($1::text[]) and state = 'running'`,
        values: [ids, now],
      });
    },
  };
}

const store = process.env.DATABASE_URL ? postgresStore(process.env.DATABASE_URL) : sqliteStore(process.env.FLOOR_SQLITE_FILE!);

/**
 * Items submitted while a batch is being written wait for the next one, which then carries all
 * of them (one batch at a time, as callplane's group commits on both engines).
 */
function batcher(write: (ids: string[]) => Promise<void>, then?: (ids: string[]) => void) {
  let waiting: { id: string; done: (err?: Error) => void }[] = [];
  let busy = false;
  const flush = async () => {
    while (waiting.length > 0) {
      const batch = waiting;
      waiting = [];
      const ids = batch.map((b) => b.id);
      try {
        await write(ids);
        for (const b of batch) b.done();
        then?.(ids);
      } catch (err) {
        for (const b of batch) b.done(err instanceof Error ? err : new Error(String(err)));
      }
    }
    busy = false;
  };
  return (id: string) => new Promise<void>((resolve, reject) => {
    waiting.push({ id, done: (err) => (err ? reject(err) : resolve()) });
    if (!busy) {
      busy = true;
      setImmediate(() => void flush());
    }
  });
}

/** How many tasks have finished (FLOOR_MODE=all), for the benchmark to wait on. */
let finished = 0;
const finish = batcher(async (ids) => {
  await store.finish(ids, Date.now());
  finished += ids.length;
});
const start = batcher((ids) => store.start(ids, Date.now()), (ids) => { for (const id of ids) void finish(id); });
const insert = CLAIMED_AT_INSERT
  ? batcher((ids) => store.insert(ids, Date.now(), 'running'), (ids) => { for (const id of ids) void finish(id); })
  : batcher((ids) => store.insert(ids, Date.now(), 'pending'), MODE === 'all' ? (ids) => { for (const id of ids) void start(id); } : undefined);

const app = Fastify({ logger: false });
app.get('/healthz', async () => ({ status: 'ok' }));
app.post('/submit', async (req, reply) => {
  const body = req.body as { type?: unknown };
  if (body?.type !== 'ping') return reply.status(400).send({ success: false, message: 'type must be ping' });
  const id = `tsk_${crypto.randomBytes(12).toString('base64url')}`;
  await insert(id);
  return { success: true, task: { id, type: 'ping', state: 'pending' } };
});
app.get('/finished', async () => ({ finished }));

await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) });
process.stdout.write('ready\n');
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
