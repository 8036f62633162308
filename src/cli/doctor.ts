// `callplane doctor`: what stands between this machine's configuration and a working service,
// one check per line (OK, WARN or FAIL), each failure with what to do about it. It reads the same
// environment `callplane serve` reads, changes nothing (no migration, no file created) and waits
// at most --timeout seconds for anything on the network. Exit code 1 when a check FAILs.
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.ts';
import { openDatabase, type Database } from '../db/index.ts';
import { migrationsApplied } from '../db/migrate.ts';
import { numberingRepo } from '../modules/numbering-providers/repository.ts';
import { DEBIAN_MODEL_DIR } from '../speech/pocketsphinx.ts';
import { HELP, UsageError } from './usage.ts';

export type Level = 'OK' | 'WARN' | 'FAIL';
export interface Check { name: string; level: Level; message: string; fix?: string }

const TWILIO_API = 'https://api.twilio.com';

function withTimeout<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms / 1000} s`)), ms); }),
  ]);
}

/** Runs `command args` and answers whether it started and exited 0 (its first output line). */
function runs(command: string, args: string[], ms: number): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    let output = '';
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    child.stdout.on('data', (b: Buffer) => { output += b.toString(); });
    child.stderr.on('data', (b: Buffer) => { output += b.toString(); });
    child.on('error', (err) => { clearTimeout(timer); resolve({ ok: false, output: err.message }); });
    child.on('close', (code) => { clearTimeout(timer); resolve({ ok: code === 0, output: output.trim().split('\n')[0] ?? '' }); });
  });
}

/** GET `url` (with a bearer key): the status, or the network error's message. */
async function reach(url: string, apiKey: string | undefined, ms: number): Promise<{ status?: number; error?: string }> {
  try {
    const res = await fetch(url, { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {}, signal: AbortSignal.timeout(ms), redirect: 'manual' });
    await res.body?.cancel();
    return { status: res.status };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    return { error: e.name === 'TimeoutError' ? `no answer within ${ms / 1000} s` : e.cause?.code ?? e.cause?.message ?? e.message };
  }
}

async function databaseChecks(config: Config, ms: number): Promise<Check[]> {
  const sqliteFile = path.join(config.dataDir, 'callplane.db');
  if (!config.databaseUrl && !fs.existsSync(sqliteFile)) {
    return [{ name: 'database', level: 'FAIL', message: `no database at ${sqliteFile} (DATA_DIR=${config.dataDir})`,
      fix: 'run `callplane migrate` (or start the service once) to create it, or set DATA_DIR to where it is, or DATABASE_URL for PostgreSQL' }];
  }
  let database: Database | undefined;
  try {
    database = openDatabase({ databaseUrl: config.databaseUrl, sqliteFile, poolSize: 1 });
    const where = database.description;
    const applied = await withTimeout(ms, where, migrationsApplied(database));
    const checks: Check[] = [applied
      ? { name: 'database', level: 'OK', message: `${where} answers and every migration is applied` }
      : { name: 'database', level: 'FAIL', message: `${where} answers, but migrations are pending (GET /readyz answers 503)`, fix: 'run `callplane migrate` (the service also migrates when it starts)' }];
    if (applied) checks.push(await carrierCheck(database, ms));
    return checks;
  } catch (err) {
    return [{ name: 'database', level: 'FAIL', message: `cannot use ${database?.description ?? 'the database'}: ${(err as Error).message}`,
      fix: config.databaseUrl ? 'check DATABASE_URL (host, port, user, password, database) and that PostgreSQL runs and accepts connections from here' : `check that ${sqliteFile} is a callplane database this user can read and write` }];
  } finally {
    await database?.close().catch(() => {});
  }
}

async function carrierCheck(database: Database, ms: number): Promise<Check> {
  const providers = await numberingRepo.enabledSummary(database.db);
  const twilio = providers.filter((p) => p.provider_id === 'twilio');
  const count = (id: string) => providers.filter((p) => p.provider_id === id).reduce((n, p) => n + p.organizations, 0);
  const used = [...new Set(providers.map((p) => p.provider_id))].map((id) => `${id} (${count(id)} organization${count(id) === 1 ? '' : 's'})`);
  if (twilio.length === 0) {
    return { name: 'carriers', level: 'WARN', message: used.length ? `enabled: ${used.join(', ')}; no Twilio account configured` : 'no carrier configured: calls and texts run on the SIMULATED carrier (nothing is dialled or sent)',
      fix: 'add a twilio numbering provider to an organization (POST /api/v2/numberingProvider, docs/carriers.md), or SIP outbound routes (docs/sip.md)' };
  }
  // Only Twilio's own API is reached from here: an organization's own apiBaseUrl is an address a
  // customer chose, which the service reaches through its address policy, not this command.
  const own = twilio.filter((p) => { try { return !(JSON.parse(p.config) as { apiBaseUrl?: string }).apiBaseUrl; } catch { return true; } });
  const custom = twilio.length - own.length;
  const note = custom ? `; ${custom} setting${custom === 1 ? '' : 's'} with an organization's own apiBaseUrl not checked from here` : '';
  if (own.length === 0) return { name: 'carriers', level: 'OK', message: `enabled: ${used.join(', ')}${note}` };
  const r = await reach(TWILIO_API, undefined, ms);
  if (r.status !== undefined) return { name: 'carriers', level: 'OK', message: `enabled: ${used.join(', ')}; ${TWILIO_API} answers (${r.status})${note}` };
  return { name: 'carriers', level: 'FAIL', message: `enabled: ${used.join(', ')}; ${TWILIO_API} cannot be reached: ${r.error}`,
    fix: 'allow outbound HTTPS to api.twilio.com (firewall, proxy, DNS): calls and texts of those organizations fail until then' };
}

/** Where PBXs are told to reach us: CALLPLANE_SIP_ADVERTISE_HOST, else the bind address, else the first outside IPv4 address. */
function advertisedHost(config: Config): string {
  if (config.sipAdvertiseHost) return config.sipAdvertiseHost;
  if (config.sipHost !== '0.0.0.0' && config.sipHost !== '::') return config.sipHost;
  for (const list of Object.values(os.networkInterfaces())) {
    for (const i of list ?? []) if (i.family === 'IPv4' && !i.internal) return i.address;
  }
  return '127.0.0.1';
}

function bindTcp(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve()));
  });
}

function bindUdp(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    socket.once('error', (err) => { socket.close(); reject(err); });
    socket.bind({ address: host, port, exclusive: true }, () => socket.close(() => resolve()));
  });
}

async function sipCheck(config: Config): Promise<Check> {
  if (!config.sipEnabled) return { name: 'sip', level: 'OK', message: 'SIP is off (CALLPLANE_SIP_ENABLED=false): no SIP calls or registrations' };
  const where = `${config.sipHost}:${config.sipPort}`;
  const advertised = advertisedHost(config);
  const loopback = /^127\.|^::1$|^localhost$/i.test(advertised);
  try {
    await bindUdp(config.sipHost, config.sipPort);
    await bindTcp(config.sipHost, config.sipPort);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') {
      return { name: 'sip', level: 'WARN', message: `${where} is in use (advertised as ${advertised})`,
        fix: 'fine if a callplane worker runs on this machine (it holds the port); otherwise stop what holds it or set CALLPLANE_SIP_PORT' };
    }
    if (code === 'EACCES') {
      return { name: 'sip', level: 'FAIL', message: `not allowed to bind ${where}`,
        fix: 'ports below 1024 need privileges: use CALLPLANE_SIP_PORT=5060 or above, or grant CAP_NET_BIND_SERVICE' };
    }
    return { name: 'sip', level: 'FAIL', message: `cannot bind ${where}: ${(err as Error).message}`,
      fix: 'set CALLPLANE_SIP_HOST to an address of this machine (or 0.0.0.0), or CALLPLANE_SIP_ENABLED=false' };
  }
  if (loopback) {
    return { name: 'sip', level: 'WARN', message: `${where} can be bound (UDP and TCP), but the address advertised to PBXs is ${advertised}, which only this machine reaches`,
      fix: 'set CALLPLANE_SIP_ADVERTISE_HOST to the address PBXs reach (behind NAT: the public one)' };
  }
  if (config.sipPort === 0) {
    return { name: 'sip', level: 'OK', message: `CALLPLANE_SIP_PORT=0: each worker binds a free port on ${config.sipHost}, advertised as ${advertised} (PBXs that whitelist a port need a fixed one)` };
  }
  return { name: 'sip', level: 'OK', message: `${where} can be bound (UDP and TCP); advertised to PBXs as ${advertised}:${config.sipPort} (open it, and the RTP ports ${config.rtpPortMin}-${config.rtpPortMax}/udp, in the firewall)` };
}

async function speechChecks(config: Config, ms: number): Promise<Check[]> {
  const checks: Check[] = [];
  const remote = async (what: string, variable: string): Promise<Check> => {
    const r = await reach(`${config.speech.baseUrl}/models`, config.speech.apiKey, ms);
    if (r.status === undefined) return { name: what, level: 'FAIL', message: `${variable}=openai, but ${config.speech.baseUrl} cannot be reached: ${r.error}`, fix: 'check CALLPLANE_SPEECH_BASE_URL and outbound access to it' };
    if (r.status === 401 || r.status === 403) return { name: what, level: 'FAIL', message: `${config.speech.baseUrl} refuses the key (${r.status})`, fix: 'set CALLPLANE_SPEECH_API_KEY to a valid key' };
    return { name: what, level: 'OK', message: `${variable}=openai: ${config.speech.baseUrl} answers (${r.status})` };
  };
  if (config.speech.tts === 'offline') {
    const r = await runs('espeak-ng', ['--version'], ms);
    checks.push(r.ok ? { name: 'text to speech', level: 'OK', message: `espeak-ng: ${r.output}` }
      : { name: 'text to speech', level: 'FAIL', message: `CALLPLANE_TTS=offline, but espeak-ng does not run: ${r.output}`, fix: 'apt-get install espeak-ng (or CALLPLANE_TTS=openai with an OpenAI-compatible audio API)' });
  } else checks.push(await remote('text to speech', 'CALLPLANE_TTS'));
  if (config.speech.stt === 'offline') {
    const found = (process.env.PATH ?? '').split(path.delimiter).some((dir) => dir && fs.existsSync(path.join(dir, 'pocketsphinx_continuous')));
    const model = fs.existsSync(path.join(DEBIAN_MODEL_DIR, 'en-us', 'mdef'));
    if (found && model) checks.push({ name: 'speech to text', level: 'OK', message: `pocketsphinx_continuous and the en-us model (${DEBIAN_MODEL_DIR})` });
    else checks.push({ name: 'speech to text', level: 'FAIL', message: `CALLPLANE_STT=offline, but ${found ? `the en-us model is missing from ${DEBIAN_MODEL_DIR}` : 'pocketsphinx_continuous is not on the PATH'}`,
      fix: 'apt-get install pocketsphinx pocketsphinx-en-us (or CALLPLANE_STT=openai with an OpenAI-compatible audio API)' });
  } else checks.push(await remote('speech to text', 'CALLPLANE_STT'));
  return checks;
}

async function modelChecks(config: Config, ms: number): Promise<Check[]> {
  if (config.llmProviders.length === 0) {
    return [{ name: 'model', level: 'WARN', message: 'no language model configured: agents answer on the SIMULATED engine, which says so in every reply',
      fix: 'set CALLPLANE_LLM_BASE_URL (and CALLPLANE_LLM_MODEL), CALLPLANE_LLM_API_KEY, or CALLPLANE_LLM_PROVIDERS_FILE (docs/conversations.md)' }];
  }
  return Promise.all(config.llmProviders.map(async (p): Promise<Check> => {
    const name = `model ${p.name}`;
    const r = await reach(`${p.baseUrl}/models`, p.apiKey, ms);
    if (r.status === undefined) return { name, level: 'FAIL', message: `${p.baseUrl} cannot be reached: ${r.error}`, fix: 'check the provider\'s base URL, that its server runs, and outbound access to it' };
    if (r.status === 401 || r.status === 403) return { name, level: 'FAIL', message: `${p.baseUrl} refuses the key (${r.status})`, fix: p.name === 'default' ? 'set CALLPLANE_LLM_API_KEY to a valid key' : 'set a valid key in the providers file (apiKey or apiKeyEnv)' };
    if (r.status >= 400) return { name, level: 'WARN', message: `${p.baseUrl}/models answers ${r.status} (some providers list no models; chat may still work)` };
    return { name, level: 'OK', message: `${p.baseUrl} answers (${r.status})` };
  }));
}

export async function runChecks(env: NodeJS.ProcessEnv, ms: number): Promise<Check[]> {
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return [{ name: 'configuration', level: 'FAIL', message: err.message, fix: 'correct that variable (docs/configuration.md lists every one); the other checks need a valid configuration' }];
  }
  const checks: Check[] = [{ name: 'configuration', level: 'OK', message: `valid (DATA_DIR=${config.dataDir}${config.databaseUrl ? ', DATABASE_URL set' : ''}, public URL ${config.publicUrl})` }];
  const groups = await Promise.all([databaseChecks(config, ms), sipCheck(config).then((c) => [c]), speechChecks(config, ms), modelChecks(config, ms)]);
  return checks.concat(...groups);
}

export async function doctorCommand(argv: string[], out: NodeJS.WritableStream = process.stdout, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: { timeout: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
  if (values.help) return void out.write(HELP.doctor + '\n'), 0;
  if (positionals.length) throw new UsageError(`doctor takes no arguments (got '${positionals.join(' ')}')`, HELP.doctor);
  const seconds = values.timeout === undefined ? 5 : Number(values.timeout);
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 120) throw new UsageError(`--timeout must be seconds between 0 and 120 (got '${values.timeout}')`);
  const checks = await runChecks(env, seconds * 1000);
  const width = Math.max(...checks.map((c) => c.name.length));
  for (const c of checks) {
    out.write(`${c.level.padEnd(4)}  ${c.name.padEnd(width)}  ${c.message}\n`);
    if (c.fix && c.level !== 'OK') out.write(`${' '.repeat(width + 8)}fix: ${c.fix}\n`);
  }
  const count = (l: Level) => checks.filter((c) => c.level === l).length;
  out.write(`\n${count('OK')} ok, ${count('WARN')} warning${count('WARN') === 1 ? '' : 's'}, ${count('FAIL')} failed\n`);
  return count('FAIL') > 0 ? 1 : 0;
}
