// Prometheus metrics; one registry per app so tests can build many apps in one process.
import client from 'prom-client';

export interface Metrics {
  registry: client.Registry;
  observeRequest(method: string, route: string, status: number, seconds: number): void;
}

export function createMetrics(): Metrics {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, prefix: 'callplane_' });
  const duration = new client.Histogram({
    name: 'callplane_http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  return {
    registry,
    observeRequest(method, route, status, seconds) {
      duration.labels(method, route, String(status)).observe(seconds);
    },
  };
}
