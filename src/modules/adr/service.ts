// Activity-record (ADR) export settings and their shipment log: who may configure an export (an
// organization for its own records; a reseller or partner for every organization below it, or,
// naming one with targetAccountId, for that organization), the destination's checks (the address
// policy, the password bound to the server and login it was given for) and the masked answers.
// docs/billing.md, "Activity records".
import type { AccountRow, AdrConfigRow, AdrProtocol, AdrShipmentRow, AdrWindowRow, Db } from '../../db/types.ts';
import { Invalid, NotFound } from '../../http/errors.ts';
import type { Scope } from '../../http/auth.ts';
import { maskSecret, type SecretBox } from '../../lib/crypto.ts';
import { secretTargetRefusal } from '../../lib/secret-target.ts';
import { hostRefusal, type TargetPolicy } from '../../webhooks/ssrf.ts';
import { adrConfigRepo, adrShipmentRepo, adrWindowRepo, destinationKey } from './repository.ts';
import { TRUST_ON_FIRST_USE } from './transfer.ts';
import { ROTATIONS, windowFrom, windowOf } from './windows.ts';

export interface AdrConfigInput {
  deliveryProtocol: string;
  rotationMinutes?: string | number;
  host: string;
  port: number;
  username: string;
  password?: string;
  path?: string;
  hostKeyFingerprint?: string;
}

const PROTOCOLS: readonly AdrProtocol[] = ['sftp', 'ftps', 'ftp'];
/** A host name (RFC 1123 labels) or an IP address (IPv6 without brackets). */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?|[0-9A-Fa-f:.]+)$/;
/** What a line-based protocol (FTP) would read as the end of a command. */
// eslint-disable-next-line no-control-regex -- control characters are exactly what it finds
const CONTROL = /[\u0000-\u001f\u007f]/;

const secs = (ms: number | null) => (ms === null ? null : Math.floor(Number(ms) / 1000));

/** Where the password is sent: protocol, host, port and login; changing any of them needs the password (and an SFTP host key) again. */
const destinationOf = destinationKey;
/** An SFTP host key as OpenSSH prints it: SHA256 and the unpadded base64 of its 32 bytes. */
const FINGERPRINT = /^SHA256:[A-Za-z0-9+/]{43}$/;

export function presentAdrConfig(row: AdrConfigRow, box: SecretBox) {
  return {
    accountId: row.account_id,
    deliveryProtocol: row.protocol,
    rotationMinutes: String(row.rotation_minutes),
    host: row.host,
    port: row.port,
    username: row.username,
    password: maskSecret(box.open(row.password)),
    path: row.path,
    hostKeyFingerprint: row.host_key_fingerprint,
    enabled: row.enabled === 1,
    nextWindowStart: secs(row.next_window_at)!,
    createdAt: secs(row.created_at)!,
    updatedAt: secs(row.updated_at)!,
  };
}

function presentWindow(w: AdrWindowRow) {
  return {
    windowId: w.id, fileName: w.file_name, windowStart: secs(w.window_start)!, windowEnd: secs(w.window_end)!,
    state: w.state, attempts: w.attempt, nextAttemptAt: w.state === 'pending' ? secs(w.run_at) : null,
    records: w.records, bytes: w.bytes === null ? null : Number(w.bytes), checksum: w.checksum,
    shippedAt: secs(w.shipped_at), lastError: w.last_error,
  };
}

function presentShipment(s: AdrShipmentRow) {
  return {
    shipmentId: s.id, windowId: s.window_id, attempt: s.attempt, outcome: s.outcome, message: s.message,
    bytes: s.bytes === null ? null : Number(s.bytes), durationMs: s.duration_ms, nextAttemptAt: secs(s.next_attempt_at), at: secs(s.at)!,
  };
}

export interface AdrServiceDeps {
  db: Db;
  box: SecretBox;
  policy: TargetPolicy;
  now?: () => number;
}

export function adrService(deps: AdrServiceDeps) {
  const { db, box, policy } = deps;
  const now = deps.now ?? Date.now;

  /** The account whose export it is: the token's own (an organization, reseller or partner), or one below it named by targetAccountId. */
  const owner = (scope: Scope, targetAccountId: number | undefined): Promise<AccountRow> =>
    scope.target(targetAccountId, ['partner', 'reseller', 'organization']);

  async function check(body: AdrConfigInput, existing: AdrConfigRow | undefined) {
    const protocol = String(body.deliveryProtocol ?? '').trim().toLowerCase() as AdrProtocol;
    if (!PROTOCOLS.includes(protocol)) throw new Invalid(`deliveryProtocol must be sftp, ftps or ftp (got '${String(body.deliveryProtocol).slice(0, 40)}')`);
    const rotationText = String(body.rotationMinutes ?? '60').trim();
    const rotation = /^\d{1,4}$/.test(rotationText) ? Number(rotationText) : NaN;
    if (!ROTATIONS.includes(rotation)) {
      throw new Invalid(`rotationMinutes must be a whole number of minutes that divides a day, 1440 (such as 5, 15, 30, 60 or 1440; got '${rotationText.slice(0, 40)}')`);
    }
    const host = String(body.host ?? '').trim();
    if (!host || host.length > 253 || !HOST.test(host)) throw new Invalid('host must be a host name or an IP address');
    const port = body.port;
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Invalid('port must be an integer from 1 to 65535');
    const username = String(body.username ?? '');
    if (!username.trim() || username.length > 200 || CONTROL.test(username)) throw new Invalid('username must be 1 to 200 characters, without control characters');
    const password = body.password;
    if (password !== undefined && (password.length === 0 || password.length > 500 || CONTROL.test(password))) {
      throw new Invalid('password must be 1 to 500 characters, without control characters');
    }
    if (password === undefined && !existing) throw new Invalid('password is required');
    const path = body.path === undefined || body.path.trim() === '' ? null : body.path.trim();
    if (path !== null && (path.length > 1000 || CONTROL.test(path))) throw new Invalid('path must be at most 1000 characters, without control characters');
    const refusedHost = await hostRefusal(host, policy);
    if (refusedHost) throw new Invalid(`host: ${refusedHost}`);
    if (existing) {
      // The stored password goes only to the server and login it was given for (docs/api.md, "Secrets and their targets").
      const refused = secretTargetRefusal({
        secret: 'password', target: 'the server (deliveryProtocol, host, port, username)',
        before: destinationOf(existing), after: destinationOf({ protocol, host, port, username }), keeps: password === undefined,
      });
      if (refused) throw new Invalid(refused);
    }
    const hostKey = checkHostKey(body.hostKeyFingerprint, protocol, existing, destinationOf({ protocol, host, port, username }));
    return { protocol, rotation, host, port, username, password, path, hostKey };
  }

  /**
   * The SFTP server's host key the export is pinned to (docs/billing.md, "Activity records"): given
   * as OpenSSH prints it, or `trust-on-first-use`; required for SFTP, and again whenever the server
   * changes (as the password is); kept on an update that keeps the server. Not for FTP and FTPS.
   */
  function checkHostKey(raw: string | undefined, protocol: AdrProtocol, existing: AdrConfigRow | undefined, destination: string): string | null {
    if (protocol !== 'sftp') {
      if (raw !== undefined) throw new Invalid('hostKeyFingerprint applies to deliveryProtocol sftp only (FTPS checks the server\'s certificate)');
      return null;
    }
    if (raw === undefined) {
      const kept = existing && destinationOf(existing) === destination ? existing.host_key_fingerprint : null;
      if (kept) return kept;
      throw new Invalid(existing && destinationOf(existing) !== destination
        ? 'hostKeyFingerprint is required again when deliveryProtocol, host, port or username changes: the pinned key was the old server\'s'
        : `hostKeyFingerprint is required for sftp: the server's host key as ssh-keygen -lf prints it (SHA256:…), or "${TRUST_ON_FIRST_USE}" to record the key the first connection sees`);
    }
    const value = raw.trim();
    if (value === TRUST_ON_FIRST_USE) return value;
    const fingerprint = value.replace(/=+$/, '');
    if (!FINGERPRINT.test(fingerprint)) {
      throw new Invalid(`hostKeyFingerprint must be a SHA256 fingerprint as ssh-keygen -lf prints it (SHA256: and 43 base64 characters), or "${TRUST_ON_FIRST_USE}"`);
    }
    return fingerprint;
  }

  return {
    async configure(scope: Scope, targetAccountId: number | undefined, body: AdrConfigInput) {
      const account = await owner(scope, targetAccountId);
      const existing = await adrConfigRepo.find(db, account.id);
      const c = await check(body, existing);
      const t = now();
      const current = windowOf(t, c.rotation).start;
      const row = await db.transaction().execute(async (tx) => {
        const before = await adrConfigRepo.find(tx, account.id, { lock: true });
        const fields = {
          protocol: c.protocol, host: c.host, port: c.port, username: c.username, path: c.path, rotation_minutes: c.rotation,
          host_key_fingerprint: c.hostKey, enabled: 1, updated_at: t,
        };
        if (!before) {
          await adrConfigRepo.insert(tx, {
            account_id: account.id, ...fields, password: box.seal(c.password!),
            next_window_at: current, next_window_end: windowFrom(current, c.rotation).end, created_at: t,
          });
        } else {
          // Windows go on from where they stopped (the next one ends at a boundary of the rotation
          // now in force); an export turned off starts again at the current window.
          const next = before.enabled === 1 ? Number(before.next_window_at) : Math.max(Number(before.next_window_at), current);
          await adrConfigRepo.update(tx, account.id, {
            ...fields,
            ...(c.password !== undefined ? { password: box.seal(c.password) } : {}),
            next_window_at: next, next_window_end: windowFrom(next, c.rotation).end,
          });
        }
        return (await adrConfigRepo.find(tx, account.id))!;
      });
      return { success: true, message: existing ? 'ADR export settings updated' : 'ADR export settings saved', config: presentAdrConfig(row, box) };
    },

    async get(scope: Scope, targetAccountId: number | undefined) {
      const account = await owner(scope, targetAccountId);
      const row = await adrConfigRepo.find(db, account.id);
      if (!row) throw new NotFound('No ADR export is configured');
      return { success: true, message: 'ADR export settings', config: presentAdrConfig(row, box) };
    },

    /** Turns the export off: no new windows; windows already made still ship. */
    async disable(scope: Scope, targetAccountId: number | undefined) {
      const account = await owner(scope, targetAccountId);
      const row = await adrConfigRepo.find(db, account.id);
      if (!row) throw new NotFound('No ADR export is configured');
      await adrConfigRepo.update(db, account.id, { enabled: 0, updated_at: now() });
      return { success: true, message: 'ADR export turned off', config: presentAdrConfig((await adrConfigRepo.find(db, account.id))!, box) };
    },

    async exports(scope: Scope, targetAccountId: number | undefined, q: { limit?: number }) {
      const account = await owner(scope, targetAccountId);
      const limit = q.limit ?? 50;
      const [windows, shipments] = await Promise.all([
        adrWindowRepo.list(db, account.id, { limit }), adrShipmentRepo.list(db, account.id, { limit }),
      ]);
      return {
        success: true, message: 'ADR exports', accountId: account.id,
        windows: windows.map(presentWindow), shipments: shipments.map(presentShipment),
      };
    },
  };
}

export type AdrService = ReturnType<typeof adrService>;
