// Real SIP peers for tests: a Kamailio registrar with digest auth (its location table read through
// kamcmd) and sipp as the far end of calls. Each listens on its own 127.0.0.x address and a free port.
// When the binaries are missing the suites skip locally and fail under CALLPLANE_TEST_REQUIRE_TOOLS=1 (.ci/run installs
// them): test/helpers/system-tools.ts.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseMessage, type SipMessage } from '../../src/sip/message.ts';
import { KAMAILIO_DBTEXT, KAMAILIO_MODULES, toolsSkip, which } from './system-tools.ts';
import { stopChild } from './children.ts';

const here = path.dirname(new URL(import.meta.url).pathname);
export const SIP_FIXTURES = path.resolve(here, '../fixtures/sip');

export const KAMAILIO = which('kamailio', ['/usr/sbin', '/usr/local/sbin']);
export const KAMCMD = which('kamcmd', ['/usr/sbin', '/usr/local/sbin']);
export const SIPP = which('sipp', ['/usr/bin', '/usr/local/bin']);

/**
 * `skip` option for describe(): false when the peers are there, or under CI (so a missing install
 * fails instead of passing silently), else `needs kamailio: apt-get install kamailio` and the like.
 */
export function peersSkip(need: Array<'kamailio' | 'sipp'>): false | string {
  return toolsSkip(...need);
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
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}${last ? `: ${last instanceof Error ? last.message : JSON.stringify(last)}` : ''}`);
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
  /** Seconds a nonce stays valid; after that an answer gets 401 (407) with stale=true. */
  nonceExpire?: number;
  /** How REGISTERs are challenged: 401 WWW-Authenticate (default), or 407 Proxy-Authenticate as a proxy in front of the registrar does. */
  challenge?: 'www' | 'proxy';
  /**
   * Also a presence server (kamailio-presence-modules): SUBSCRIBEs for presence are challenged like
   * REGISTERs and handled by handle_subscribe(), PUBLISHes (unauthenticated) by handle_publish(),
   * subscriptions and publications kept in db_text tables in the peer's directory, every watcher
   * authorized (presence_xml force_active), NOTIFYs sent by Kamailio itself.
   */
  presence?: boolean;
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

/** `skip` option for suites that need Kamailio as a presence server (kamailio-presence-modules; fails under CALLPLANE_TEST_REQUIRE_TOOLS=1 like peersSkip). */
export function presenceSkip(): false | string {
  return toolsSkip('kamailio', 'kamailio-presence');
}

function presenceConfig(o: { host: string; port: number; db: string; user: string; password: string }): { modules: string; route: string } {
  const url = `text://${o.db}`;
  return {
    modules: `loadmodule "db_text.so"
loadmodule "presence.so"
loadmodule "presence_xml.so"
modparam("db_text", "db_mode", 0)
modparam("presence", "db_url", "${url}")
modparam("presence", "server_address", "sip:${o.host}:${o.port}")
modparam("presence", "subs_db_mode", 0)
modparam("presence", "publ_cache", 1)
modparam("presence", "clean_period", 5)
modparam("presence", "min_expires", 0)
modparam("presence_xml", "db_url", "${url}")
modparam("presence_xml", "force_active", 1)
`,
    route: `
  if (is_method("PUBLISH")) { handle_publish(); exit; }
  if (is_method("SUBSCRIBE")) {
    if (!has_totag()) {
      if ($au == $null) { www_challenge("$td", "1"); exit; }
      if (!pv_www_authenticate("$td", "${o.password}", "0")) { www_challenge("$td", "1"); exit; }
      if ($au != "${o.user}") { sl_send_reply("403", "Forbidden"); exit; }
      consume_credentials();
    }
    handle_subscribe();
    exit;
  }`,
  };
}

function kamailioConfig(o: Required<KamailioOptions> & { port: number; ctl: string; db: string }): string {
  const presence = o.presence ? presenceConfig(o) : undefined;
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
${presence?.modules ?? ''}modparam("usrloc", "db_mode", 0)
modparam("ctl", "binrpc", "unix:${o.ctl}")
modparam("registrar", "max_expires", ${o.maxExpires})
modparam("registrar", "min_expires", ${o.minExpires})
modparam("auth", "nonce_expire", ${o.nonceExpire})
request_route {
  if (!mf_process_maxfwd_header("10")) { sl_send_reply("483","Too Many Hops"); exit; }
  if (is_method("REGISTER")) {
    if ($au == $null) { ${o.challenge}_challenge("$td", "1"); exit; }
    pv_${o.challenge}_authenticate("$td", "${o.password}", "0");
    $var(rc) = $rc;
    # -4: the nonce expired (right credentials otherwise): challenge again with stale=true (flags 1|16).
    if ($var(rc) == -4) { ${o.challenge}_challenge("$td", "17"); exit; }
    if ($var(rc) < 0) { ${o.challenge}_challenge("$td", "1"); exit; }
    if ($au != "${o.user}") { sl_send_reply("403", "Forbidden"); exit; }
    if (!save("location")) sl_reply_error();
    exit;
  }
${presence?.route ?? ''}
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
    nonceExpire: opts.nonceExpire ?? 300, challenge: opts.challenge ?? 'www', presence: opts.presence ?? false,
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'callplane-kam-'));
  const db = path.join(dir, 'db');
  if (o.presence) {
    fs.mkdirSync(db);
    for (const t of ['presentity', 'active_watchers', 'watchers', 'xcap']) fs.copyFileSync(path.join(KAMAILIO_DBTEXT, t), path.join(db, t));
    fs.writeFileSync(path.join(db, 'version'), 'id(int,auto) table_name(string) table_version(int) \n'
      + fs.readFileSync(path.join(KAMAILIO_DBTEXT, 'version'), 'utf8').split('\n').filter((l) => /^\d+:(presentity|active_watchers|watchers|xcap):/.test(l)).join('\n') + '\n');
  }
  const ctl = path.join(dir, 'ctl.sock');
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort(o.host);
    const cfg = path.join(dir, 'kamailio.cfg');
    fs.writeFileSync(cfg, kamailioConfig({ ...o, port, ctl, db }));
    // Its own process group: Kamailio forks workers, and one that outlived the main process kept
    // the output pipe open, so the test process waiting on it never exited. stop() signals the group.
    const child = spawn(KAMAILIO, ['-DD', '-E', '-f', cfg, '-Y', dir, '-m', '32', '-M', '8'], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
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
      killGroup(child, 'SIGKILL');
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
      await stopChild(child, 5000, (signal) => killGroup(child, signal));
      // Any worker still running goes too, and its end of the pipes no longer holds this process.
      killGroup(child, 'SIGKILL');
      child.stdout?.destroy();
      child.stderr?.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Signals a detached child's whole process group (it and everything it forked); gone already is fine. */
function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid) process.kill(-child.pid, signal);
  } catch { /* the group is gone */ }
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
  // A port found free can be taken by another test process before sipp binds it (the suite runs
  // two files at once): sipp then exits with errno 98, and is started again on new ports.
  let port = 0;
  let child: ReturnType<typeof spawn>;
  let out = '';
  let exited: Promise<number | null>;
  for (let attempt = 1; ; attempt++) {
    port = await freePort(host);
    const args = [
      ...scenario, '-i', host, '-p', String(port), '-t', opts.transport === 'TCP' ? 't1' : 'u1', '-nostdin', '-trace_msg',
      '-message_file', log, '-m', String(opts.calls ?? 1), '-timeout', '60s', '-mp', String(await freePort(host)), ...(opts.extra ?? []),
    ];
    const c = spawn(SIPP, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    child = c;
    out = '';
    c.stdout!.on('data', (d) => { out += d; });
    c.stderr!.on('data', (d) => { out += d; });
    exited = new Promise<number | null>((r) => c.once('exit', (code) => r(code)));
    try {
      // sipp binds before it prints anything useful: wait until the port is taken.
      await waitFor('sipp to listen', async () => {
        if (c.exitCode !== null) throw new GiveUp(`sipp exited: ${out.slice(-2000)}`);
        return !(await portFree(host, port, opts.transport ?? 'UDP'));
      }, 10_000, 50);
      break;
    } catch (err) {
      if (attempt >= 3 || !/errno = 98/.test(out)) throw err;
    }
  }
  return {
    host, port, exited,
    messages: () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : ''),
    output: () => out,
    async stop() {
      await stopChild(child, 3000);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The start lines sipp logged (-trace_msg), in order: `>` received by sipp, `<` sent by it, e.g. `> INVITE`, `< 180`. */
export function sippFlow(sipp: Sipp): string[] {
  return sipp.messages().split(/-{47} [^\n]*\n/).map((p) => /^(?:UDP|TCP) message (sent|received)[^\n]*\n\n([^\r\n]*)/.exec(p)).filter((m) => m !== null)
    .map((m) => `${m[1] === 'sent' ? '<' : '>'} ${m[2].startsWith('SIP/2.0') ? m[2].split(' ')[1] : m[2].split(' ')[0]}`);
}

/** A raw UDP peer on `host`: sends text or bytes (to `to`, default its own address), collects what parses as SIP. */
export async function udpPeer(host = '127.0.0.1') {
  const sock = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
  const got: SipMessage[] = [];
  sock.on('message', (b) => { try { got.push(parseMessage(b)); } catch { /* not for this test */ } });
  await new Promise<void>((r) => sock.bind({ address: host, port: 0 }, () => r()));
  return {
    sock, got, port: sock.address().port, host,
    send: (text: string | Buffer, port: number, to = host) => new Promise<void>((r) => sock.send(typeof text === 'string' ? Buffer.from(text) : text, port, to, () => r())),
    close: () => sock.close(),
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
