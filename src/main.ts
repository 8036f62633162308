// The callplane command: `serve` (API and/or workers), `migrate`, `token`, `doctor`, and the
// operator's commands that act through the API with the typed client (src/cli/: `tokens`,
// `tasks import`, `agents publish`, `calls watch`).
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { buildApp, redactUrl } from './app.ts';
import { ConfigError, loadConfig, type Config, type Role } from './config.ts';
import { openDatabase, type Database } from './db/index.ts';
import { migrateToLatest, pendingMigrations } from './db/migrate.ts';
import { loadSecretKey, SecretBox } from './lib/crypto.ts';
import { DataDirLocked, lockDataDir } from './lib/data-dir-lock.ts';
import { bootstrapAdmin } from './modules/tokens/service.ts';
import { databaseJobTurns, maintenanceJobs, Maintenance } from './maintenance.ts';
import { startOpsServer, type OpsServer } from './modules/ops/server.ts';
import { newWorkerId } from './queue/runner.ts';
import { createPlatform } from './platform.ts';
import { drainCalls, WRAP_UP_MS } from './lib/drain-calls.ts';
import { HELP, isClientCommand, reportUsageError, UsageError } from './cli/usage.ts';

/** A failure at boot that the operator must fix; printed as one line, without a stack. */
class StartupError extends Error {}

function open(config: Config, log?: pino.Logger): Database {
  try {
    return openDatabase({
      databaseUrl: config.databaseUrl,
      sqliteFile: path.join(config.dataDir, 'callplane.db'),
      poolSize: config.dbPoolSize,
      preparedStatements: config.pgPreparedStatements,
      log: log?.child({ component: 'database' }),
    });
  } catch (err) {
    throw new StartupError(`cannot open the database: ${(err as Error).message}`);
  }
}

/** Migrations are the first query of every command: an unreachable database surfaces here. */
async function migrate(database: Database): Promise<string[]> {
  try {
    return await migrateToLatest(database);
  } catch (err) {
    await database.close().catch(() => {});
    throw new StartupError(`cannot use the database ${database.description}: ${(err as Error).message}`);
  }
}

/**
 * `serve` with CALLPLANE_AUTO_MIGRATE=false: a schema older than this release is refused (the
 * deploy runs `callplane migrate` first, docs/deploy.md), rather than served half-migrated.
 */
async function requireCurrentSchema(database: Database): Promise<void> {
  let pending: string[];
  try {
    pending = await pendingMigrations(database);
  } catch (err) {
    await database.close().catch(() => {});
    throw new StartupError(`cannot use the database ${database.description}: ${(err as Error).message}`);
  }
  if (pending.length === 0) return;
  await database.close().catch(() => {});
  throw new StartupError(`the database schema is older than this release: ${pending.length} migration(s) pending (${pending.join(', ')}). `
    + 'Run `callplane migrate` first, or set CALLPLANE_AUTO_MIGRATE=true to let serve apply them.');
}

async function prepare(config: Config, database: Database, log: pino.Logger, opts: { migrate?: boolean } = {}): Promise<void> {
  if (opts.migrate === false) await requireCurrentSchema(database);
  const applied = opts.migrate === false ? [] : await migrate(database);
  if (applied.length) log.info({ applied }, 'migrations applied');
  const { partnerId, newToken } = await bootstrapAdmin(database.db, config.adminToken);
  if (newToken) {
    const file = path.join(config.dataDir, 'admin-token');
    fs.mkdirSync(config.dataDir, { recursive: true });
    fs.writeFileSync(file, newToken + '\n', { mode: 0o600 });
    // Printed once, on the first start only; it is stored as a hash from now on.
    process.stdout.write(`\n  callplane partner account ${partnerId} created.\n  Admin token (shown once, also written to ${file}):\n\n    ${newToken}\n\n`);
  }
}

/** The URL the service answers on: CALLPLANE_PUBLIC_URL when set, else localhost on the port it listens on (CALLPLANE_PORT=0 picks one). */
function startedUrl(config: Config, port: number): string {
  return config.publicUrl === `http://localhost:${config.port}` ? `http://localhost:${port}` : config.publicUrl;
}

async function serve(config: Config, role: Role, log: pino.Logger): Promise<void> {
  if (!config.databaseUrl) {
    try {
      lockDataDir(config.dataDir); // released when the process exits
    } catch (err) {
      if (err instanceof DataDirLocked) throw new StartupError(err.message);
      throw err;
    }
  }
  const database = open(config, log);
  log.info({ database: database.description, role }, 'starting');
  await prepare(config, database, log, { migrate: config.autoMigrate });
  const { key } = loadSecretKey(config.secretKey, config.dataDir);
  if (!config.secretKey && config.databaseUrl) {
    log.warn('CALLPLANE_SECRET_KEY is not set: using a key file in DATA_DIR; every process sharing this database needs the same key');
  }
  const box = new SecretBox(key);
  const stops: (() => Promise<void>)[] = [];
  let port: number | undefined;
  let metricsPort: number | undefined;
  /** SIGTERM or SIGINT has come: /readyz answers 503 and nothing new is taken (docs/deploy.md). */
  let draining = false;
  const drainMs = config.drainSeconds * 1000;
  // One SIP endpoint per worker process (API-only processes never bind the SIP port).
  const platform = createPlatform({ config, database, box, log, sip: role !== 'api' && config.sipEnabled ? {} : false });
  const { tasks, deliveries, sip } = platform;

  if (role === 'worker' || role === 'all') {
    if (sip) {
      try {
        await sip.start();
      } catch (err) {
        await database.close().catch(() => {});
        throw new StartupError(`cannot start SIP on ${config.sipHost}:${config.sipPort}: ${(err as Error).message} (set CALLPLANE_SIP_PORT, or CALLPLANE_SIP_ENABLED=false to run without SIP)`);
      }
    }
    await platform.listen();
    tasks.startWorker();
    deliveries.startWorker();
    platform.turns.startWorker();
    platform.numberReleases.startWorker();
    platform.analyses.startWorker();
    platform.adr.startWorker();
    platform.agentTests.startWorker();
    // Draining (docs/deploy.md): every queue stops claiming at once, the SIP side answers new
    // INVITEs 503, and calls in progress run to their end for up to CALLPLANE_DRAIN_SECONDS; then
    // the agent says its closing line on those still up and hangs up. A call task's handler ends
    // with its call, so the task queue's wait is the drain time and the wrap-up together.
    stops.push(async () => {
      sip?.drain();
      const queues = Promise.all([
        tasks.stop({ timeoutMs: drainMs + WRAP_UP_MS }), deliveries.stop(), platform.turns.stop(), platform.numberReleases.stop(), platform.analyses.stop(), platform.adr.stop(), platform.agentTests.stop(),
      ]);
      await drainCalls(platform.services.voiceCalls, drainMs, log);
      await queues;
    });
    // After the task workers, so calls in progress end before the endpoint goes.
    if (sip) stops.push(() => sip.stop());
    stops.push(() => platform.close());
    const maintenance = new Maintenance(maintenanceJobs(database, {
      taskRetentionDays: config.taskRetentionDays, deliveryRetentionDays: config.deliveryRetentionDays,
      closeIdleConversations: () => platform.services.conversations.closeIdle(),
      sweepRecordings: () => platform.services.recordings.sweep(),
      rateLimitWindowSeconds: config.rateLimitWindowSeconds,
    }), log.child({ component: 'maintenance' }), databaseJobTurns(database, newWorkerId('maintenance')));
    maintenance.start();
    // The maintenance timers are unref'd (so tests and embedders are never held open); without a
    // listening server nothing else keeps a worker-only process alive until it is told to stop.
    const keepAlive = setInterval(() => {}, 1 << 30);
    stops.push(async () => { clearInterval(keepAlive); await maintenance.stop(); });
    // A worker-only process has no HTTP server: its /metrics, /healthz and /readyz get their own port.
    if (role === 'worker' && config.metricsPort !== undefined) {
      let ops: OpsServer;
      try {
        ops = await startOpsServer({ database, metrics: platform.metrics, vad: platform.services.vad, draining: () => draining }, { host: config.host, port: config.metricsPort });
      } catch (err) {
        for (const stop of stops) await stop().catch(() => {});
        await database.close().catch(() => {});
        throw new StartupError(`cannot serve metrics on ${config.host}:${config.metricsPort}: ${(err as Error).message} (set CALLPLANE_METRICS_PORT, or off)`);
      }
      metricsPort = ops.port;
      // Last: Prometheus and the probes see the drain until the process is gone.
      stops.push(() => ops.close());
    }
  }
  if (role === 'api' || role === 'all') {
    const app = await buildApp({ config, database, services: platform.services, logger: log, metrics: platform.metrics, draining: () => draining });
    try {
      await app.listen({ port: config.port, host: config.host });
    } catch (err) {
      for (const stop of stops) await stop().catch(() => {});
      await database.close().catch(() => {});
      throw new StartupError(`cannot listen on ${config.host}:${config.port}: ${(err as Error).message}`);
    }
    // Streamed calls end (and are recorded) before the server and then the database go.
    // Live-feed streams are told to connect again (to another process) first: they never end by themselves.
    // Streamed calls (Twilio Media Streams) drain like a worker's SIP calls: they run to their end
    // for up to CALLPLANE_DRAIN_SECONDS (readyz already says draining), then hear the closing line.
    stops.unshift(async () => {
      platform.services.live.closeStreams();
      await drainCalls(platform.services.mediaStreams, drainMs, log);
      await platform.services.mediaStreams.close();
      platform.services.browserCalls.close();
      await app.close();
    });
    port = (app.server.address() as AddressInfo).port;
  }

  let stopping = false;
  const shutdown = async (signal: string) => {
    // A second signal (Ctrl-C again) does not wait for the drain.
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting without waiting for the drain');
      process.exit(1);
    }
    stopping = true;
    draining = true;
    log.info({ drainSeconds: config.drainSeconds, signal }, 'shutting down');
    // The drain, the wrap-up of calls still up, and 15 s for the rest; then it is forced.
    const force = setTimeout(() => process.exit(1), drainMs + WRAP_UP_MS + 15_000).unref();
    for (const stop of stops) await stop().catch((err) => log.error({ err }, 'shutdown step failed'));
    await database.close();
    clearTimeout(force);
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  // One line an operator (or a test) can wait for: everything this role runs has started.
  const consoleUrl = port === undefined ? undefined : `${startedUrl(config, port)}/console/`;
  log.info({ role, ...(port === undefined ? {} : { port, console: consoleUrl }), ...(metricsPort === undefined ? {} : { metricsPort }) }, 'ready');
  // Where to go next, for whoever started it (the README's first steps).
  const lines = [
    ...(consoleUrl ? [`web console: ${consoleUrl}   (API: ${startedUrl(config, port!)}/api/v2, reference: ${startedUrl(config, port!)}/docs)`] : []),
    ...(sip ? [`SIP: listening on ${config.sipHost}:${sip.endpoint?.port ?? config.sipPort} (UDP and TCP); CALLPLANE_SIP_PORT moves it, CALLPLANE_SIP_ENABLED=false turns it off`] : []),
  ];
  if (lines.length) process.stdout.write(`\n${lines.map((l) => `  ${l}`).join('\n')}\n\n`);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  // help, doctor and the commands through the API (src/cli/commands.ts).
  // Loaded only for them: the typed client and the commands are no part of serve's start.
  if (isClientCommand(argv)) return void (await (await import('./cli/commands.ts')).runClientCommand(argv));
  // `callplane --role api` is `callplane serve --role api`: the first word, when it is not an option, is the command.
  const first = argv[0] !== undefined && !argv[0].startsWith('-') ? argv[0] : undefined;
  const { values, positionals } = parseArgs({
    args: argv, allowPositionals: true,
    options: { role: { type: 'string', default: 'all' }, help: { type: 'boolean', short: 'h' } },
  });
  const command = positionals[0] ?? 'serve';
  if (values.help) return void console.log(first === undefined ? HELP.main : HELP[command] ?? HELP.main);
  const config = loadConfig();
  const log = pino({
    level: config.logLevel,
    redact: { paths: ['req.headers.authorization', 'req.query.token', 'token', 'authToken', 'password'], censor: '[redacted]' },
    serializers: {
      req: (req: { method: string; url: string; id: string; ip?: string }) => ({ id: req.id, method: req.method, url: redactUrl(req.url), ip: req.ip }),
    },
  });
  switch (command) {
    case 'serve': {
      const role = values.role as Role;
      if (!['api', 'worker', 'all'].includes(role)) throw new ConfigError(`--role must be api, worker or all (got '${role}')`);
      return serve(config, role, log);
    }
    case 'migrate': {
      const database = open(config);
      const applied = await migrate(database);
      console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
      return database.close();
    }
    case 'token': {
      const database = open(config);
      await prepare(config, database, log);
      const file = path.join(config.dataDir, 'admin-token');
      console.log(fs.existsSync(file) ? `the bootstrap admin token is in ${file}` : 'the partner token was set with CALLPLANE_ADMIN_TOKEN or shown on the first start');
      return database.close();
    }
    default:
      throw new UsageError(`unknown command '${command}'`, HELP.main);
  }
}

main().catch((err) => {
  const code = reportUsageError(err);
  if (code !== undefined) process.exit(code);
  if (err instanceof ConfigError) {
    console.error(`callplane: ${err.message}`);
    process.exit(2);
  }
  if (err instanceof StartupError) {
    console.error(`callplane: ${err.message}`);
    process.exit(1);
  }
  console.error(err);
  process.exit(1);
});
