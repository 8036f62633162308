// Renders deploy/helm/callplane as `helm template` would, for CI and for anyone without helm
// (helm is no Debian package). Only what the chart's templates use is understood — `{{ .Values.a.b }}`,
// `{{ .Release.Name }}`, `{{ .Release.Namespace }}`, `{{ .Chart.Name }}`, `{{ .Chart.Version }}`,
// `| quote`, `{{- if .Values.x }}` … `{{- end }}` and the `{{-`/`-}}` whitespace trims — and anything
// else is an error, so a template that needs more is caught here, not in a cluster. A value that is
// not in values.yaml is an error too (helm would render it empty).
//
//   npx tsx scripts/render-chart.ts [--values extra.yaml] [--set worker.replicas=3] [--name callplane] [--namespace default]
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import YAML from 'yaml';

export const CHART_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'deploy', 'helm', 'callplane');

export interface RenderContext {
  Values: Record<string, unknown>;
  Release: { Name: string; Namespace: string };
  Chart: { Name: string; Version: string };
}

function lookup(ctx: RenderContext, ref: string, where: string): unknown {
  if (!/^(\.[A-Za-z_][A-Za-z0-9_]*)+$/.test(ref)) throw new Error(`${where}: unsupported template expression '${ref}'`);
  let v: unknown = ctx;
  for (const part of ref.slice(1).split('.')) {
    if (v === null || typeof v !== 'object' || !(part in v)) throw new Error(`${where}: ${ref} is not set (values.yaml names every value)`);
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

const truthy = (v: unknown) => !(v === false || v === null || v === undefined || v === 0 || v === '' || (Array.isArray(v) && v.length === 0));

/** One template's text rendered with `ctx`. */
export function renderTemplate(text: string, ctx: RenderContext, name = 'template'): string {
  const tag = /\{\{(-?)\s*(.*?)\s*(-?)\}\}/g;
  let out = '';
  let last = 0;
  let trimNext = false;
  /** One entry per open `if`: whether its body is rendered. */
  const open: boolean[] = [];
  const active = () => open.every(Boolean);
  for (let m = tag.exec(text); m; m = tag.exec(text)) {
    let chunk = text.slice(last, m.index);
    if (trimNext) chunk = chunk.replace(/^\s+/, '');
    if (m[1] === '-') chunk = chunk.replace(/\s+$/, '');
    if (active()) out += chunk;
    last = tag.lastIndex;
    trimNext = m[3] === '-';
    const expr = m[2]!;
    const line = text.slice(0, m.index).split('\n').length;
    const where = `${name}:${line}`;
    const cond = /^if\s+(\S+)$/.exec(expr);
    if (cond) {
      open.push(active() ? truthy(lookup(ctx, cond[1]!, where)) : false);
      continue;
    }
    if (expr === 'end') {
      if (open.length === 0) throw new Error(`${where}: {{ end }} without {{ if }}`);
      open.pop();
      continue;
    }
    const value = /^(\S+)(?:\s*\|\s*(quote))?$/.exec(expr);
    if (!value) throw new Error(`${where}: unsupported template construct '{{ ${expr} }}'`);
    const v = lookup(ctx, value[1]!, where);
    if (v !== null && typeof v === 'object') throw new Error(`${where}: ${value[1]} is a map or list (toYaml is not supported: name each field)`);
    const shown = v === null || v === undefined ? '' : String(v as string | number | boolean);
    if (active()) out += value[2] === 'quote' ? JSON.stringify(shown) : shown;
  }
  if (open.length > 0) throw new Error(`${name}: {{ if }} without {{ end }}`);
  let rest = text.slice(last);
  if (trimNext) rest = rest.replace(/^\s+/, '');
  return out + rest;
}

function setPath(values: Record<string, unknown>, dotted: string, raw: string): void {
  const parts = dotted.split('.');
  let o = values;
  for (const p of parts.slice(0, -1)) o = (o[p] ??= {}) as Record<string, unknown>;
  o[parts.at(-1)!] = YAML.parse(raw);
}

function merge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && b && typeof b === 'object' && !Array.isArray(b)
      ? merge(b as Record<string, unknown>, v as Record<string, unknown>) : v;
  }
  return out;
}

export interface RenderedDocument { template: string; object: Record<string, any> }

/** Every template of the chart rendered with its values.yaml, `overrides` on top; the objects parsed. */
export function renderChart(opts: { overrides?: Record<string, unknown>; set?: string[]; name?: string; namespace?: string } = {}): { text: string; documents: RenderedDocument[] } {
  const chart = YAML.parse(fs.readFileSync(path.join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { name: string; version: string };
  let values = merge(YAML.parse(fs.readFileSync(path.join(CHART_DIR, 'values.yaml'), 'utf8')) as Record<string, unknown>, opts.overrides ?? {});
  values = structuredClone(values);
  for (const s of opts.set ?? []) {
    const eq = s.indexOf('=');
    if (eq < 1) throw new Error(`--set ${s}: expected path=value`);
    setPath(values, s.slice(0, eq), s.slice(eq + 1));
  }
  const ctx: RenderContext = {
    Values: values, Release: { Name: opts.name ?? 'callplane', Namespace: opts.namespace ?? 'default' }, Chart: { Name: chart.name, Version: chart.version },
  };
  const dir = path.join(CHART_DIR, 'templates');
  const parts: string[] = [];
  const documents: RenderedDocument[] = [];
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort()) {
    const rendered = renderTemplate(fs.readFileSync(path.join(dir, file), 'utf8'), ctx, `templates/${file}`);
    if (rendered.trim() === '') continue;
    parts.push(`---\n# Source: ${chart.name}/templates/${file}\n${rendered.trim()}\n`);
    for (const doc of YAML.parseAllDocuments(rendered)) {
      if (doc.errors.length) throw new Error(`templates/${file}: the rendered YAML does not parse: ${doc.errors[0]!.message}`);
      const object = doc.toJS() as RenderedDocument['object'] | null;
      if (object) documents.push({ template: file, object });
    }
  }
  return { text: parts.join(''), documents };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      values: { type: 'string', short: 'f', multiple: true }, set: { type: 'string', multiple: true },
      name: { type: 'string' }, namespace: { type: 'string', short: 'n' },
    },
  });
  let overrides: Record<string, unknown> = {};
  for (const f of values.values ?? []) overrides = merge(overrides, YAML.parse(fs.readFileSync(f, 'utf8')) as Record<string, unknown>);
  process.stdout.write(renderChart({ overrides, set: values.set, name: values.name, namespace: values.namespace }).text);
}
