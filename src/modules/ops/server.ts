// The metrics listener of a process without an HTTP server of its own (`--role worker`): the same
// /metrics, /healthz and /readyz as an API process serves (routes.ts), on CALLPLANE_METRICS_PORT,
// so Prometheus scrapes the workers' call and latency histograms and an orchestrator probes them.
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { App } from '../../http/types.ts';
import { opsRoutes, type OpsContext } from './routes.ts';

export interface OpsServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startOpsServer(ctx: OpsContext, listen: { host: string; port: number }): Promise<OpsServer> {
  const app = Fastify({ logger: false, return503OnClosing: false }).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;
  await app.register(opsRoutes, ctx);
  await app.listen(listen);
  return {
    port: (app.server.address() as AddressInfo).port,
    close: () => app.close(),
  };
}
