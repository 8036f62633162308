// The deployment artifacts (issue 39) cannot rot silently: the Helm chart renders (scripts/render-chart.ts)
// and every object it makes validates against the Kubernetes schemas (kubernetes-models); the
// settings that must agree across files do (drain time and grace periods, ports, the migration
// step); the Dockerfile's steps match this checkout (scripts/check-image-steps.ts; its apt
// packages are checked by .ci/run, which has Debian's package lists).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import YAML from 'yaml';
import { renderChart, renderTemplate } from '../../scripts/render-chart.ts';
import { aptPackages, checkImageSteps, dockerfileSteps, ROOT } from '../../scripts/check-image-steps.ts';

type Obj = Record<string, any>;

/** The object validated against its Kubernetes schema: throws with the schema's complaint. */
async function validate(object: Obj): Promise<void> {
  const mod = await import(`kubernetes-models/${object.apiVersion}/${object.kind}`) as Record<string, new (o: Obj) => { validate(): void }>;
  const Model = mod[object.kind];
  assert.ok(Model, `kubernetes-models has no ${object.apiVersion} ${object.kind}`);
  new Model(object).validate();
}

const byKind = (docs: { object: Obj }[], kind: string, name?: string) => docs.map((d) => d.object).filter((o) => o.kind === kind && (!name || o.metadata.name === name));
const env = (o: Obj, key: string) => o.data[key] as string;

describe('the Helm chart', () => {
  it('renders with its values, and every object validates against the Kubernetes schemas', async () => {
    const { documents } = renderChart();
    const kinds = documents.map((d) => `${d.object.kind}/${d.object.metadata.name}`).sort();
    assert.deepEqual(kinds, [
      'ConfigMap/callplane-config', 'Deployment/callplane-api', 'Deployment/callplane-worker', 'HorizontalPodAutoscaler/callplane-api',
      'Job/callplane-migrate', 'PodDisruptionBudget/callplane-api', 'PodDisruptionBudget/callplane-worker', 'Secret/callplane-secrets', 'Service/callplane-api',
    ]);
    for (const d of documents) await validate(d.object);
  });

  it('the schemas have teeth: a wrong type, or a required field left out, fails', async () => {
    const api = byKind(renderChart().documents, 'Deployment', 'callplane-api')[0]!;
    await assert.rejects(validate({ ...api, spec: { ...api.spec, replicas: 'two' } }));
    await assert.rejects(validate({ ...api, spec: { ...api.spec, selector: undefined } }));
  });

  it('agrees with itself: worker grace covers the drain, probes on /readyz, the migration is a pre-upgrade hook and processes do not migrate', () => {
    const docs = renderChart().documents;
    const config = byKind(docs, 'ConfigMap')[0]!;
    const worker = byKind(docs, 'Deployment', 'callplane-worker')[0]!;
    const api = byKind(docs, 'Deployment', 'callplane-api')[0]!;
    const drain = Number(env(config, 'CALLPLANE_DRAIN_SECONDS'));
    assert.ok(drain >= 60);
    assert.ok(worker.spec.template.spec.terminationGracePeriodSeconds >= drain + 45, 'the worker is killed before its drain and closing lines are over');
    assert.ok(api.spec.template.spec.terminationGracePeriodSeconds >= drain + 45, 'the API (its Twilio Media Streams drain too) is killed before its drain is over');
    assert.equal(worker.spec.template.spec.hostNetwork, true);
    assert.equal(env(config, 'CALLPLANE_AUTO_MIGRATE'), 'false');
    const [wc] = worker.spec.template.spec.containers;
    const [ac] = api.spec.template.spec.containers;
    assert.deepEqual(wc.args, ['serve', '--role', 'worker']);
    assert.deepEqual(ac.args, ['serve', '--role', 'api']);
    assert.equal(wc.readinessProbe.httpGet.path, '/readyz');
    assert.equal(ac.readinessProbe.httpGet.path, '/readyz');
    assert.equal(wc.ports.find((p: Obj) => p.name === 'metrics').containerPort, Number(env(config, 'CALLPLANE_METRICS_PORT')));
    assert.equal(wc.ports.find((p: Obj) => p.name === 'sip-udp').containerPort, Number(env(config, 'CALLPLANE_SIP_PORT')));
    assert.equal(worker.spec.strategy.rollingUpdate.maxSurge, 0);
    const job = byKind(docs, 'Job')[0]!;
    assert.match(job.metadata.annotations['helm.sh/hook'], /pre-upgrade/);
    assert.deepEqual(job.spec.template.spec.containers[0].args, ['migrate']);
    // The secret the hook reads exists before it (a hook of lower weight).
    const secret = byKind(docs, 'Secret')[0]!;
    assert.ok(Number(secret.metadata.annotations['helm.sh/hook-weight']) < Number(job.metadata.annotations['helm.sh/hook-weight']));
  });

  it('values turn parts off: no HPA without autoscaling, no Secret when it is made elsewhere; a release name and namespace reach every object', async () => {
    const { documents } = renderChart({ overrides: { api: { autoscaling: { enabled: false } }, secrets: { create: false } }, name: 'cp', namespace: 'voice' });
    assert.deepEqual(byKind(documents, 'HorizontalPodAutoscaler'), []);
    assert.deepEqual(byKind(documents, 'Secret'), []);
    for (const d of documents) {
      assert.equal(d.object.metadata.namespace, 'voice');
      assert.match(d.object.metadata.name, /^cp-/);
      await validate(d.object);
    }
  });

  it('the renderer refuses what it does not understand and values that are not there, rather than rendering them empty', () => {
    const ctx = { Values: { a: { b: 'x' } }, Release: { Name: 'r', Namespace: 'n' }, Chart: { Name: 'c', Version: '1' } };
    assert.equal(renderTemplate('v: {{ .Values.a.b | quote }}\n{{- if .Values.a }}\nw: 1\n{{- end }}\n', ctx), 'v: "x"\nw: 1\n');
    assert.throws(() => renderTemplate('{{ include "x" . }}', ctx), /unsupported/);
    assert.throws(() => renderTemplate('{{ .Values.a.c }}', ctx), /not set/);
    assert.throws(() => renderTemplate('{{ .Values.a }}', ctx), /toYaml is not supported/);
    assert.throws(() => renderTemplate('{{- if .Values.a }}', ctx), /without \{\{ end \}\}/);
  });
});

describe('compose and systemd', () => {
  const compose = YAML.parse(fs.readFileSync(path.join(ROOT, 'deploy', 'compose.yaml'), 'utf8'), { merge: true }) as { services: Record<string, Obj> };
  const seconds = (s: string) => Number(/^(\d+)s$/.exec(s)?.[1]);

  it('compose: every callplane process waits for the one-shot migration, none migrates itself, workers\' ports and ranges are their own and their grace covers the drain', () => {
    const s = compose.services;
    assert.deepEqual(Object.keys(s).sort(), ['api1', 'api2', 'migrate', 'postgres', 'worker1', 'worker2']);
    assert.deepEqual(s.migrate!.command, ['migrate']);
    assert.equal(s.migrate!.depends_on.postgres.condition, 'service_healthy');
    const ranges: [number, number][] = [];
    for (const name of ['api1', 'api2', 'worker1', 'worker2']) {
      const svc = s[name]!;
      assert.equal(svc.depends_on.migrate.condition, 'service_completed_successfully', name);
      assert.equal(svc.environment.CALLPLANE_AUTO_MIGRATE, 'false', name);
      assert.deepEqual(svc.env_file, ['callplane.env']);
      assert.ok(svc.volumes.includes('data:/var/lib/callplane'), name);
      // Every process drains its calls (an API its Twilio Media Streams): 30 s unless its environment says.
      assert.ok(seconds(svc.stop_grace_period) >= Number(svc.environment?.CALLPLANE_DRAIN_SECONDS ?? 30) + 45, `${name}'s stop_grace_period covers its drain`);
      if (!name.startsWith('worker')) continue;
      const e = svc.environment;
      const min = Number(e.CALLPLANE_RTP_PORT_MIN), max = Number(e.CALLPLANE_RTP_PORT_MAX);
      assert.ok(svc.ports.includes(`${min}-${max}:${min}-${max}/udp`), `${name} publishes its RTP range`);
      assert.ok(svc.ports.includes(`${e.CALLPLANE_SIP_PORT}:${e.CALLPLANE_SIP_PORT}/udp`), `${name} publishes its SIP port`);
      assert.ok(seconds(svc.stop_grace_period) >= Number(e.CALLPLANE_DRAIN_SECONDS) + 45, `${name}'s stop_grace_period covers its drain`);
      for (const [a, b] of ranges) assert.ok(max < a || min > b, 'two workers share RTP ports');
      ranges.push([min, max]);
    }
    const example = fs.readFileSync(path.join(ROOT, 'deploy', 'callplane.env.example'), 'utf8');
    for (const key of ['DATABASE_URL', 'CALLPLANE_SECRET_KEY', 'POSTGRES_PASSWORD']) assert.match(example, new RegExp(`^${key}=`, 'm'));
  });

  it('systemd: the worker unit gives its drain time before the kill, every unit starts the built dist/main.js after the migration', () => {
    const read = (f: string) => fs.readFileSync(path.join(ROOT, 'deploy', 'systemd', f), 'utf8');
    const worker = read('callplane-worker@.service');
    const drain = Number(/CALLPLANE_DRAIN_SECONDS=(\d+)/.exec(worker)?.[1]);
    assert.ok(Number(/^TimeoutStopSec=(\d+)/m.exec(worker)?.[1]) >= drain + 45);
    assert.ok(Number(/^TimeoutStopSec=(\d+)/m.exec(read('callplane-api.service'))?.[1]) >= 30 + 45, 'the API unit waits for its streamed calls\' drain (30 s by default)');
    for (const f of ['callplane-api.service', 'callplane-worker@.service']) {
      const unit = read(f);
      assert.match(unit, /^Requires=callplane-migrate\.service$/m, f);
      assert.match(unit, /CALLPLANE_AUTO_MIGRATE=false/, f);
      assert.match(unit, /^ExecStart=\/usr\/bin\/node .*\/opt\/callplane\/dist\/main\.js serve --role (api|worker)$/m, f);
    }
    assert.match(read('callplane-migrate.service'), /^ExecStart=.*dist\/main\.js migrate$/m);
  });
});

describe('the Dockerfile', () => {
  it('its steps match this checkout (what it copies exists, what it starts is what the build makes, non-root, HEALTHCHECK, offline speech)', () => {
    assert.deepEqual(checkImageSteps({ apt: false }), []);
    const steps = dockerfileSteps(fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
    assert.deepEqual(aptPackages(steps).sort(), ['ca-certificates', 'espeak-ng', 'g++', 'make', 'pocketsphinx', 'pocketsphinx-en-us', 'python3', 'tini']);
  });
});
