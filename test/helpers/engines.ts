// Runs a suite once per engine: `forEachEngine('accounts', (h) => { it(…) })`.
import { after, before, describe } from 'node:test';
import { ENGINE_SKIP_REASON, ENGINES, SKIPPED_ENGINES, startHarness, type Harness, type HarnessOptions } from './harness.ts';

export function forEachEngine(name: string, body: (h: () => Harness) => void, env?: Record<string, string>, opts?: HarnessOptions): void {
  for (const engine of ENGINES) {
    describe(`${name} [${engine}]`, () => {
      let harness: Harness | undefined;
      before(async () => { harness = await startHarness(engine, env, opts); });
      after(async () => { await harness?.close(); });
      body(() => {
        if (!harness) throw new Error('harness not started');
        return harness;
      });
    });
  }
  for (const engine of SKIPPED_ENGINES) {
    describe(`${name} [${engine}]`, { skip: ENGINE_SKIP_REASON }, () => {});
  }
}
