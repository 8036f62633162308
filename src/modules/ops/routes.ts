// Liveness, readiness and metrics: what an orchestrator and Prometheus ask of every process.
import { Type } from '@sinclair/typebox';
import type { Database } from '../../db/index.ts';
import { migrationsApplied } from '../../db/migrate.ts';
import type { Metrics } from '../../http/metrics.ts';
import type { App } from '../../http/types.ts';

export interface OpsContext {
  database: Database;
  metrics: Metrics;
  vad?: { readonly status: object };
  /** True once the process is stopping (SIGTERM): /readyz answers 503 so no new work is sent here. */
  draining?: () => boolean;
}

export async function opsRoutes(app: App, ctx: OpsContext): Promise<void> {
  const open = { config: { public: true } };

  app.get('/healthz', {
    ...open,
    schema: { operationId: 'healthz', tags: ['Operations'], description: 'Liveness: the process answers. Touches no database.',
      response: { 200: Type.Object({ status: Type.Literal('ok') }) } },
  }, async () => ({ status: 'ok' as const }));

  app.get('/readyz', {
    ...open,
    schema: { operationId: 'readyz', tags: ['Operations'], description: 'Readiness: the process is not shutting down, the database answers and every migration is applied.',
      response: { 200: Type.Object({ status: Type.String(), database: Type.String() }, { additionalProperties: true }),
        503: Type.Object({ status: Type.String(), reason: Type.String() }) } },
  }, async (_req, reply) => {
    // Draining (docs/deploy.md): calls and requests in progress still run here; new ones go elsewhere.
    if (ctx.draining?.()) return reply.status(503).send({ status: 'draining', reason: 'shutting down' });
    try {
      await ctx.database.ping();
      if (!(await migrationsApplied(ctx.database))) {
        return reply.status(503).send({ status: 'unavailable', reason: 'migrations pending' });
      }
      // Also which voice activity detector this process's calls get (docs/voice.md: Silero, or energy and why).
      const vad = ctx.vad ? { vad: ctx.vad.status } : {};
      // Reports the engine (an operator's fact); nothing here decides by it.
      // eslint-disable-next-line no-restricted-syntax
      return { status: 'ready', database: ctx.database.dialect, ...vad };
    } catch {
      return reply.status(503).send({ status: 'unavailable', reason: 'database unreachable' });
    }
  });

  app.get('/metrics', { ...open, schema: { hide: true } }, async (_req, reply) => {
    reply.header('content-type', ctx.metrics.registry.contentType);
    return ctx.metrics.registry.metrics();
  });
}
