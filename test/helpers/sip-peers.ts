// Real SIP peers for tests: a Kamailio registrar with digest auth (its location table read through
// kamcmd) and sipp as the far end of calls. Each listens on its own 127.0.0.x address and a free port.
// When the binaries are missing the suites skip locally and fail under CI=true (.ci/run installs them).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);
export const SIP_FIXTURES = path.resolve(here, '../fixtures/sip');

function which(bin: string, extra: string[] = []): string | null {
  for (const dir of [...(process.env.PATH ?? '').split(':'), ...extra]) {
    const p = path.join(dir, bin);
    if (dir && fs.existsSync(p)) return p;
  }
  return null;
}

export const KAMAILIO = which('kamailio', ['/usr/sbin', '/usr/local/sbin']);
export const KAMCMD = which('kamcmd', ['/usr/sbin', '/usr/local/sbin']);
export const SIPP = which('sipp', ['/usr/bin', '/usr/local/bin']);
/** Debian puts the modules under the multiarch directory. */
const KAMAILIO_MODULES = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib', '/usr/local/lib64', '/usr/local/lib']
  .map((d) => `${d}/kamailio/modules/`).find((d) => fs.existsSync(path.join(d, 'registrar.so'))) ?? '/usr/lib/x86_64-linux-gnu/kamailio/modules/';

/**
 * `skip` option for describe(): false when the peers are there, or under CI (so a missing install
 * fails instead of passing silently), else the reason to skip.
 */
export function peersSkip(need: Array<'kamailio' | 'sipp'>): false | string {
  const missing = need.filter((n) => (n === 'kamailio' ? !KAMAILIO || !KAMCMD : !SIPP));
  if (missing.length === 0 || process.env.CI === 'true') return false;
  return `${missing.join(' and ')} not installed (apt-get install kamailio sip-tester); CI installs them`;
}

/** A port free on both UDP and TCP at `host`. */
export async function freePort(host: string): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const tcp = net.createServer();
    const port = await new Promise<number>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen({ host, port: 0, exclusive: true }, () => resolve((tcp.address() as net.AddressInfo).port));
    });
    const udp = dgram.createSocket('udp4');
    const ok = await new Promise<boolean>((resolve) => {
      udp.once('error', () => resolve(false));
      udp.bind({ address: host, port, exclusive: true }, () => resolve(true));
    });
    await new Promise<void>((r) => tcp.close(() => r()));
    await new Promise<void>((r) => { try { udp.close(() => r()); } catch { r(); } });
    if (ok) return port;
  }
  throw new Error(`no free port on ${host}`);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Thrown inside waitFor's check to stop waiting at once. */
export class GiveUp extends Error {}

export async function waitFor<T>(what: string, fn: () => T | Promise<T>, timeoutMs = 10_000, everyMs = 100): Promise<NonNullable<T>> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      last = err;
    }
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await sleep(everyMs);
  }
}

export interface KamailioOptions {
  /** Listen address (default 127.0.0.2). */
  host?: string;
  domain?: string;
  user?: string;
  password?: string;
  maxExpires?: number;
  minExpires?: number;
  /** Seconds a nonce stays valid; after that an answer gets 401 with stale=true. */
  nonceExpire?: number;
}

export interface Location { aor: string; contact: string; expires: number; received?: string; transport?: string }

export interface Kamailio {
  host: string;
  port: number;
  domain: string;
  user: string;
  password: string;
  /** The bindings of an AOR (user@domain) in the location table. */
  locations(aor: string): Location[];
  output(): string;
  stop(): Promise<void>;
}

function kamailioConfig(o: Required<KamailioOptions> & { port: number; ctl: string }): string {
  return `#!KAMAILIO
debug=2
log_stderror=yes
children=1
tcp_children=1
listen=udp:${o.host}:${o.port}
listen=tcp:${o.host}:${o.port}
auto_aliases=no
alias="${o.domain}"
mpath="${KAMAILIO_MODULES}"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "pv.so"
loadmodule "maxfwd.so"
loadmodule "usrloc.so"
loadmodule "registrar.so"
loadmodule "textops.so"
loadmodule "siputils.so"
loadmodule "xlog.so"
loadmodule "auth.so"
loadmodule "ctl.so"
loadmodule "kex.so"
modparam("usrloc", "db_mode", 0)
modparam("ctl", "binrpc", "unix:${o.ctl}")
modparam("registrar", "max_expires", ${o.maxExpires})
modparam("registrar", "min_expires", ${o.minExpires})
modparam("auth", "nonce_expire", ${o.nonceExpire})
request_route {
  if (!mf_process_maxfwd_header("10")) { sl_send_reply("483","Too Many Hops"); exit; }
  if (is_method("REGISTER")) {
    if ($au == $null) { www_challenge("$td", "1"); exit; }
    pv_www_authenticate("$td", "${o.password}", "0");
    $var(rc) = $rc;
    # -4: the nonce expired (right credentials otherwise): challenge again with stale=true (flags 1|16).
    if ($var(rc) == -4) { www_challenge("$td", "17"); exit; }
    if ($var(rc) < 0) { www_challenge("$td", "1"); exit; }
    if ($au != "${o.user}") { sl_send_reply("403", "Forbidden"); exit; }
    if (!save("location")) sl_reply_error();
    exit;
  }
  if (is_method("OPTIONS")) { sl_send_reply("200", "OK"); exit; }
  sl_send_reply("404", "Not Here");
}
`;
}

/** Starts Kamailio in the foreground (-DD -E) and waits until its control socket answers. */
export async function startKamailio(opts: KamailioOptions = {}): Promise<Kamailio> {
  if (!KAMAILIO || !KAMCMD) throw new Error('kamailio/kamcmd not installed (apt-get install kamailio)');
  const o = {
    host: opts.host ?? '127.0.0.2', domain: opts.domain ?? 'callplane.test', user: opts.user ?? 'alice',
    password: opts.password ?? 's3cret', maxExpires: opts.maxExpires ?? 3600, minExpires: opts.minExpires ?? 1,
    nonceExpire: opts.nonceExpire ?? 300,
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-kam-'));
  const ctl = path.join(dir, 'ctl.sock');
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort(o.host);
    const cfg = path.join(dir, 'kamailio.cfg');
    fs.writeFileSync(cfg, kamailioConfig({ ...o, port, ctl }));
    const child = spawn(KAMAILIO, ['-DD', '-E', '-f', cfg, '-Y', dir, '-m', '32', '-M', '8'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (d) => { out += d; });
    child.stderr!.on('data', (d) => { out += d; });
    let exited = false;
    child.once('exit', () => { exited = true; });
    try {
      await waitFor('kamailio to listen', () => {
        if (exited) throw new GiveUp(`kamailio exited:\n${out.slice(-2000)}`);
        return kamcmd(ctl, ['core.version']).ok;
      }, 15_000);
      return makeHandle(child, o, port, ctl, () => out, dir);
    } catch (err) {
      lastError = err;
      child.kill('SIGKILL');
      await new Promise((r) => (exited ? r(null) : child.once('exit', r)));
      if (!/bind|in use/i.test(out)) break;
    }
  }
  throw lastError;
}

function kamcmd(ctl: string, args: string[]): { ok: boolean; out: string } {
  const r = spawnSync(KAMCMD!, ['-s', `unix:${ctl}`, ...args], { encoding: 'utf8', timeout: 5000 });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

function makeHandle(child: ChildProcess, o: Required<KamailioOptions>, port: number, ctl: string, output: () => string, dir: string): Kamailio {
  return {
    host: o.host, port, domain: o.domain, user: o.user, password: o.password,
    output,
    locations(aor: string): Location[] {
      const r = kamcmd(ctl, ['ul.lookup', 'location', aor]);
      if (!r.ok) return []; // "AOR not found"
      return parseLookup(aor, r.out);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const done = await Promise.race([new Promise((r) => child.once('exit', () => r(true))), sleep(5000).then(() => false)]);
        if (!done) child.kill('SIGKILL');
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** kamcmd's text for ul.lookup: `Contact: {` blocks with `Address: …`, `Expires: …`, `Received: …`. */
export function parseLookup(aor: string, text: string): Location[] {
  const out: Location[] = [];
  for (const block of text.split(/Contact:\s*\{/).slice(1)) {
    const field = (name: string) => new RegExp(`^\\s*${name}:\\s*(.*)$`, 'm').exec(block)?.[1]?.trim();
    const contact = field('Address');
    if (!contact) continue;
    const received = field('Received');
    out.push({ aor, contact, expires: Number(field('Expires')), ...(received && received !== '[not set]' ? { received } : {}), ...(field('Socket') ? { transport: field('Socket')!.split(':')[0] } : {}) });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// sipp

export interface Sipp {
  host: string;
  port: number;
  /** The messages sipp logged (-trace_msg), read on demand. */
  messages(): string;
  output(): string;
  /** Resolves with sipp's exit code. */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/**
 * Runs sipp as a UAS: the built-in `uas` scenario or an XML file from test/fixtures/sip
 * (`scenario: 'uas-busy.xml'`). `-m` ends it after that many calls.
 */
export async function startSipp(opts: { host?: string; scenario?: string; vars?: Record<string, string>; transport?: 'UDP' | 'TCP'; calls?: number; extra?: string[] } = {}): Promise<Sipp> {
  if (!SIPP) throw new Error('sipp not installed (apt-get install sip-tester)');
  const host = opts.host ?? '127.0.0.3';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-sipp-'));
  const log = path.join(dir, 'messages.log');
  const port = await freePort(host);
  let scenario = ['-sn', 'uas'];
  if (opts.scenario) {
    // {{name}} placeholders filled from vars (sipp checks status codes when it loads a scenario).
    const xml = fs.readFileSync(path.join(SIP_FIXTURES, opts.scenario), 'utf8').replace(/\{\{(\w+)\}\}/g, (_, k: string) => {
      if (opts.vars?.[k] === undefined) throw new Error(`scenario ${opts.scenario} needs vars.${k}`);
      return opts.vars[k];
    });
    fs.writeFileSync(path.join(dir, opts.scenario), xml);
    scenario = ['-sf', path.join(dir, opts.scenario)];
  }
  const args = [
    ...scenario, '-i', host, '-p', String(port), '-t', opts.transport === 'TCP' ? 't1' : 'u1', '-nostdin', '-trace_msg',
    '-message_file', log, '-m', String(opts.calls ?? 1), '-timeout', '60s', '-mp', String(await freePort(host)), ...(opts.extra ?? []),
  ];
  const child = spawn(SIPP, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => { out += d; });
  child.stderr!.on('data', (d) => { out += d; });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  // sipp binds before it prints anything useful: wait until the port is taken.
  await waitFor('sipp to listen', async () => {
    if (child.exitCode !== null) throw new GiveUp(`sipp exited: ${out.slice(-2000)}`);
    return !(await portFree(host, port, opts.transport ?? 'UDP'));
  }, 10_000, 50);
  return {
    host, port, exited,
    messages: () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : ''),
    output: () => out,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const done = await Promise.race([exited.then(() => true), sleep(3000).then(() => false)]);
        if (!done) child.kill('SIGKILL');
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function portFree(host: string, port: number, transport: 'UDP' | 'TCP'): Promise<boolean> {
  if (transport === 'TCP') {
    return new Promise((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen({ host, port, exclusive: true }, () => s.close(() => resolve(true)));
    });
  }
  return new Promise((resolve) => {
    const u = dgram.createSocket('udp4');
    u.once('error', () => resolve(false));
    u.bind({ address: host, port, exclusive: true }, () => u.close(() => resolve(true)));
  });
}
