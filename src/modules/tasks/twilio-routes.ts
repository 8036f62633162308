// What Twilio calls back on while a task's call or text is under way: the status callback (which
// ends the task) and the TwiML URL (what to say when the call is answered). Twilio sends no token:
// each request is checked against X-Twilio-Signature, computed with the auth token of the task's
// organization's twilio provider over the public URL Twilio called and the form it posted.
// A request that fails the check changes nothing.
import formbody from '@fastify/formbody';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App, AppContext } from '../../app.ts';
import type { Db, TaskRow } from '../../db/types.ts';
import { Conflict, Forbidden, Invalid, NotFound } from '../../http/errors.ts';
import { bool } from '../../lib/time.ts';
import { greetingTwiml, parseStatusCallback, TWILIO, verifyTwilioSignature, type TwilioParams } from '../../providers/index.ts';
import { numberingRepo } from '../numbering/repository.ts';
import { TWILIO_STATUS_PATH, TWILIO_TWIML_PATH } from './handler.ts';
import { TaskRuntime } from './runtime.ts';

type Params = Record<string, string | string[]>;

const HANGUP_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>';

function first(params: Params, key: string): string | undefined {
  const v = Object.hasOwn(params, key) ? params[key] : undefined;
  const s = Array.isArray(v) ? v[0] : v;
  return typeof s === 'string' && s !== '' ? s : undefined;
}

/** The form as parsed by @fastify/formbody (strings, or arrays for repeated keys); anything else is no form. */
function formOf(body: unknown): Params {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return {};
  const out: Params = {};
  for (const [k, v] of Object.entries(body)) {
    if (typeof v === 'string' || (Array.isArray(v) && v.every((x) => typeof x === 'string'))) out[k] = v as string | string[];
  }
  return out;
}

export async function twilioRoutes(app: App, ctx: AppContext): Promise<void> {
  const db: Db = ctx.database.db;
  const { config, box } = ctx;
  const runtime = ctx.tasks ?? new TaskRuntime({ database: ctx.database, config, box });
  // Scoped to this plugin: the rest of the API stays JSON-only.
  await app.register(formbody);

  /**
   * The task named by ?taskId and the auth token of its organization's twilio provider, once the
   * signature over the URL Twilio called and `signed` (the form; nothing for a GET) is valid.
   */
  async function verified(req: FastifyRequest, signed: TwilioParams): Promise<{ task: TaskRow; accountSid: string }> {
    const taskId = (req.query as Record<string, unknown>).taskId;
    if (typeof taskId !== 'string' || taskId === '') throw new Invalid('taskId query parameter is required');
    const task = taskId.length <= 64 ? await db.selectFrom('tasks').selectAll().where('id', '=', taskId).executeTakeFirst() : undefined;
    if (!task) throw new NotFound(`Task ${taskId} was not found`);
    // The organization's twilio provider, enabled or not: a call placed before it was disabled still reports.
    const provider = await numberingRepo.find(db, task.org_id, TWILIO);
    const settings = provider ? {
      ...(JSON.parse(provider.config) as Record<string, string>),
      ...(provider.secrets ? box.openJson<Record<string, string>>(provider.secrets) : {}),
    } : {};
    const header = req.headers['x-twilio-signature'];
    const signature = Array.isArray(header) ? header[0] : header;
    // config.publicUrl + req.url is the URL Twilio was given (handler.ts builds it from the same
    // base); the status callback URL went through new URL() (withTaskId), which may have
    // lower-cased the host or dropped a default port, so that spelling is accepted too.
    const url = `${config.publicUrl}${req.url}`;
    const urls = [url, new URL(url).toString()];
    if (!settings.authToken || !urls.some((u) => verifyTwilioSignature(settings.authToken, u, signed, signature))) {
      req.log.warn({ taskId, hasSignature: Boolean(signature) }, 'twilio request refused: signature missing or invalid');
      throw new Forbidden('X-Twilio-Signature is missing or does not match this request');
    }
    return { task, accountSid: settings.accountSid ?? '' };
  }

  /** The callback names our Twilio account and the task's own call or message (once we know its sid). */
  function checkIdentity(task: TaskRow, accountSid: string, params: Params, sidKeys: string[]): string | undefined {
    const given = first(params, 'AccountSid');
    if (given !== undefined && given !== accountSid) throw new Forbidden('AccountSid does not match the organization\'s twilio account');
    const sid = sidKeys.map((k) => first(params, k)).find((s) => s !== undefined);
    if (sid !== undefined && task.provider_ref && sid !== task.provider_ref) {
      throw new Conflict(`${sidKeys[0]} ${sid} is not the ${task.type} of task ${task.id}`);
    }
    return sid;
  }

  const hidden = { hide: true } as const;

  app.post(TWILIO_STATUS_PATH, { config: { public: true }, schema: hidden }, async (req, reply) => {
    const form = formOf(req.body);
    const { task, accountSid } = await verified(req, form);
    const cancelRequested = task.cancel_requested_at !== null;
    const event = parseStatusCallback(form, { cancelRequested });
    if (!event) throw new Invalid('not a Twilio status callback: CallSid and CallStatus, or MessageSid and MessageStatus, are required');
    if ((event.kind === 'call') !== (task.type === 'call') || task.type === 'ping') {
      throw new Invalid(`a ${event.kind} status callback for task ${task.id}, which is a ${task.type}`);
    }
    checkIdentity(task, accountSid, form, event.kind === 'call' ? ['CallSid'] : ['MessageSid', 'SmsSid']);

    if (event.final) {
      // After a cancel request the call was ended by us (Twilio reports that hang-up as
      // `completed`): a call that ended normally is then canceled; one that failed stays failed.
      const state = cancelRequested && event.final.state === 'finished' ? 'canceled' : event.final.state;
      // Only a running task moves: a duplicate, or a callback after the task ended (or after it
      // went back to the queue), changes nothing.
      const moved = await runtime.engine.transition(db, task.id, ['running'], state, {
        result: JSON.stringify(event.final.result),
        error: state === 'failed' ? event.final.error ?? null : null,
        provider: TWILIO,
        provider_ref: event.providerRef,
      });
      // The worker waiting for this call, when it runs in this process, stops now instead of at
      // its next heartbeat (in another process the heartbeat still finds the lease gone).
      if (moved) runtime.settled(task.id);
      return reply.status(204).send();
    }
    await noteProgress(task.id, event.providerRef, event.status, event.sequenceNumber);
    return reply.status(204).send();
  });

  /**
   * Records a call's or text's progress (ringing, in-progress, sent…) in result.status while the
   * task runs. A progress event numbered lower than one already recorded is older: kept out.
   */
  async function noteProgress(id: string, providerRef: string, status: string, seq: number | undefined): Promise<void> {
    await db.transaction().execute(async (tx) => {
      let q = tx.selectFrom('tasks').select(['result', 'provider_ref']).where('id', '=', id).where('state', '=', 'running');
      if (ctx.database.dialect === 'postgres') q = q.forUpdate();
      const row = await q.executeTakeFirst();
      if (!row) return;
      let result: Record<string, unknown> = {};
      try {
        const parsed: unknown = row.result ? JSON.parse(row.result) : {};
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) result = parsed as Record<string, unknown>;
      } catch { /* not ours to keep */ }
      const known = typeof result.sequenceNumber === 'number' ? result.sequenceNumber : undefined;
      if (seq !== undefined && known !== undefined && seq <= known) return;
      const next = { ...result, provider: TWILIO, providerRef, status, ...(seq !== undefined ? { sequenceNumber: seq } : {}) };
      await tx.updateTable('tasks')
        .set({ result: JSON.stringify(next), provider: TWILIO, provider_ref: row.provider_ref ?? providerRef, updated_at: Date.now() })
        .where('id', '=', id).where('state', '=', 'running').execute();
    });
  }

  /** The call's instructions: the greeting while the task runs; a hang-up once it has ended. */
  async function twiml(req: FastifyRequest, reply: FastifyReply, params: Params, signed: TwilioParams) {
    const { task, accountSid } = await verified(req, signed);
    if (task.type !== 'call') throw new Invalid(`task ${task.id} is a ${task.type}, not a call`);
    checkIdentity(task, accountSid, params, ['CallSid']);
    const body = task.state === 'running'
      ? greetingTwiml({ greeting: task.greeting ?? undefined, waitToGreet: bool(task.wait_to_greet) })
      : HANGUP_TWIML;
    return reply.status(200).type('text/xml; charset=utf-8').send(body);
  }

  // Twilio fetches the TwiML URL with POST by default (the form signed); with GET its parameters
  // are in the query string, which the signed URL already covers.
  app.post(TWILIO_TWIML_PATH, { config: { public: true }, schema: hidden }, async (req, reply) => {
    const form = formOf(req.body);
    return twiml(req, reply, form, form);
  });
  app.get(TWILIO_TWIML_PATH, { config: { public: true }, schema: hidden }, async (req, reply) =>
    twiml(req, reply, formOf(req.query), {}));
}
