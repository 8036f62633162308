// A scenario's checks decided on what one of its conversations did (docs/testing-agents.md,
// "Checks"): the deterministic ones here, from the observation the runner made of the recorded
// conversation; the judged ones by judge.ts. A verdict that does not decide (a simulated judge, a
// latency check in text mode) is kept with its reason, labelled, and left out of the pass.
import { compilePattern, type Check, type CheckKind, type Json } from './document.ts';

/** What a scenario's conversation did, as recorded. */
export interface Observation {
  /** The conversation's lines in order (the agent's and the simulated caller's). */
  lines: Array<{ who: 'agent' | 'caller'; text: string }>;
  /** Every tool call the agent made, with its checked arguments (undefined when they were not valid JSON). */
  toolCalls: Array<{ name: string; args: Record<string, unknown> | undefined; result: string; mocked: boolean }>;
  /** The agent ended the conversation (end_conversation, or a transfer). */
  ended: boolean;
  /** The agent's turns. */
  turns: number;
  /** Each agent turn's latency (voice mode); none in text mode. */
  latenciesMs?: number[];
  /** What voice mode measured: each turn's latency, the barge-ins, what the caller heard (its lines as the recogniser gave them). */
  voice?: { latenciesMs: number[]; bargeIns: number; heard: Array<{ who: 'agent' | 'caller'; text: string }> };
  /** The analysis of the conversation, made only when a check asks for it. */
  analysis?: { outcome: string; fields: Record<string, unknown> } | { error: string };
}

export interface Verdict {
  check: CheckKind;
  /** What was checked, in words (`said /confirm/`). */
  what: string;
  /** null: not decided (see `decides`). */
  passed: boolean | null;
  reason: string;
  /** false: kept for the reader, not counted (a simulated judge, no latency in text mode). */
  decides: boolean;
  simulated?: boolean;
}

/** Deep equality of JSON-like values (object key order aside). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((x, i) => sameJson(x, (b as unknown[])[i]));
  const ka = Object.keys(a as object);
  const kb = Object.keys(b as object);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b as object, k) && sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** Every key of `subset` is in `args` with an equal value. */
export function argsMatch(subset: Record<string, Json> | undefined, args: Record<string, unknown> | undefined): boolean {
  if (!subset) return true;
  if (!args) return false;
  return Object.entries(subset).every(([k, v]) => Object.hasOwn(args, k) && sameJson(args[k], v));
}

const show = (v: unknown) => JSON.stringify(v);

export function describeCheck(c: Check): { kind: CheckKind; what: string } {
  const [kind, value] = Object.entries(c)[0] as [CheckKind, unknown];
  switch (kind) {
    case 'toolCalled': {
      const t = value as { name: string; args?: unknown; not?: boolean };
      return { kind, what: `${t.not ? 'tool not called' : 'tool called'}: ${t.name}${t.args ? ` with ${show(t.args)}` : ''}` };
    }
    case 'said': case 'neverSaid': return { kind, what: `${kind} /${value as string}/i` };
    case 'analysis': return { kind, what: `analysis field ${(value as { field: string }).field} equals ${show((value as { equals: unknown }).equals)}` };
    case 'judge': return { kind, what: `judge: ${value as string}` };
    default: return { kind, what: `${kind}: ${show(value)}` };
  }
}

/** The verdict of one deterministic check (a `judge` check is judge.ts's). */
export function decideCheck(c: Check, o: Observation): Verdict {
  const { kind, what } = describeCheck(c);
  const v = (passed: boolean, reason: string): Verdict => ({ check: kind, what, passed, reason, decides: true });
  const agentLines = o.lines.filter((l) => l.who === 'agent');
  if ('toolCalled' in c) {
    const t = c.toolCalled;
    const named = o.toolCalls.filter((x) => x.name === t.name);
    const matching = named.filter((x) => argsMatch(t.args, x.args));
    if (t.not) {
      return matching.length === 0 ? v(true, `${t.name} was not called${t.args ? ' with those arguments' : ''}`)
        : v(false, `${t.name} was called ${matching.length} time(s)${t.args ? ' with those arguments' : ''}: ${show(matching[0]!.args)}`);
    }
    if (matching.length > 0) return v(true, `${t.name} was called with ${show(matching[0]!.args)}`);
    if (named.length > 0) return v(false, `${t.name} was called, but never with ${show(t.args)}: ${named.map((x) => show(x.args)).join('; ')}`);
    const others = [...new Set(o.toolCalls.map((x) => x.name))];
    return v(false, `${t.name} was never called${others.length ? ` (tools called: ${others.join(', ')})` : ' (no tool was called)'}`);
  }
  if ('said' in c || 'neverSaid' in c) {
    const pattern = 'said' in c ? c.said : c.neverSaid;
    const re = compilePattern(pattern);
    const hit = agentLines.find((l) => re.test(l.text));
    const clip = (s: string) => (s.length > 200 ? `${s.slice(0, 200)}…` : s);
    if ('said' in c) return hit ? v(true, `the agent said: "${clip(hit.text)}"`) : v(false, `no line of the agent's ${agentLines.length} matched /${pattern}/i`);
    return hit ? v(false, `the agent said: "${clip(hit.text)}"`) : v(true, `none of the agent's ${agentLines.length} lines matched /${pattern}/i`);
  }
  if ('endedCall' in c) {
    return o.ended === c.endedCall ? v(true, o.ended ? 'the agent ended the conversation' : 'the agent did not end the conversation')
      : v(false, o.ended ? 'the agent ended the conversation' : `the agent did not end the conversation (after ${o.turns} turns)`);
  }
  if ('maxTurns' in c) {
    return o.turns <= c.maxTurns ? v(true, `${o.turns} agent turns`) : v(false, `${o.turns} agent turns, more than ${c.maxTurns}`);
  }
  if ('turnLatencyMs' in c) {
    if (!o.latenciesMs || o.latenciesMs.length === 0) {
      return { check: kind, what, passed: null, reason: 'not measured: text mode has no spoken turns (voice mode measures each turn\'s latency)', decides: false };
    }
    const worst = Math.max(...o.latenciesMs);
    return worst <= c.turnLatencyMs ? v(true, `the slowest turn took ${worst} ms`) : v(false, `the slowest turn took ${worst} ms, over ${c.turnLatencyMs} ms`);
  }
  if ('outcome' in c || 'analysis' in c) {
    const a = o.analysis;
    if (!a) return v(false, 'the conversation was not analysed');
    if ('error' in a) return v(false, `the analysis failed: ${a.error}`);
    if ('outcome' in c) return a.outcome === c.outcome ? v(true, `the outcome was ${a.outcome}`) : v(false, `the outcome was ${a.outcome}, not ${c.outcome}`);
    const got = a.fields[c.analysis.field];
    return sameJson(got ?? null, c.analysis.equals) ? v(true, `${c.analysis.field} was ${show(got)}`) : v(false, `${c.analysis.field} was ${show(got ?? null)}, not ${show(c.analysis.equals)}`);
  }
  throw new Error(`decideCheck: ${kind} is judged, not decided here`);
}

/** A scenario iteration passes when every verdict that decides passed. */
export const passes = (verdicts: readonly Verdict[]) => verdicts.every((x) => !x.decides || x.passed === true);
