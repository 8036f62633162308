// How the offline engines run their programs (src/speech/run-tool.ts), with coreutils standing in:
// input on stdin, output bounded, a time limit and an abort that kill the child and wait for it
// (no process left running, none left a zombie), and a missing program named with its package.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorLines, runTool } from '../../src/speech/run-tool.ts';
import { SpeechError } from '../../src/speech/types.ts';
import { childrenOf, processExists } from '../helpers/children.ts';

const base = { engine: 'test-engine', debianPackage: 'coreutils', timeoutMs: 5000, maxStdoutBytes: 1024 * 1024 };

describe('running a speech program', () => {
  it('feeds stdin and returns stdout, stderr and the exit code', async () => {
    const r = await runTool('cat', [], { ...base, stdin: 'hello' });
    assert.deepEqual([r.stdout.toString(), r.code, r.signal], ['hello', 0, null]);
    const e = await runTool('sh', ['-c', 'echo "INFO: fine" >&2; echo "ERROR: it broke" >&2; exit 3'], base);
    assert.equal(e.code, 3);
    assert.equal(errorLines(e.stderr), 'ERROR: it broke');
    assert.equal(errorLines('INFO: a\nINFO: last words\n'), 'INFO: last words');
  });

  it('kills the child on abort and answers once it is gone', async () => {
    const ac = new AbortController();
    let pid = 0;
    const p = runTool('sleep', ['30'], { ...base, signal: ac.signal, onSpawn: (n) => { pid = n; } });
    while (pid === 0) await new Promise((r) => setTimeout(r, 5));
    assert.ok(processExists(pid));
    ac.abort();
    await assert.rejects(p, (e: unknown) => e instanceof Error && e.name === 'AbortError');
    assert.equal(processExists(pid), false, 'exited and reaped');
    assert.deepEqual(childrenOf().filter((c) => c.comm === 'sleep'), []);
    // A reason given to abort() is what the promise rejects with.
    const custom = new AbortController();
    const q = runTool('sleep', ['30'], { ...base, signal: custom.signal });
    custom.abort(new Error('the caller hung up'));
    await assert.rejects(q, /the caller hung up/);
  });

  it('kills the child at the time limit and when it writes too much', async () => {
    let pid = 0;
    await assert.rejects(runTool('sleep', ['30'], { ...base, timeoutMs: 100, onSpawn: (n) => { pid = n; } }),
      (e: unknown) => e instanceof SpeechError && e.kind === 'timeout' && e.engine === 'test-engine' && /sleep took longer than 100 ms/.test(e.message));
    assert.equal(processExists(pid), false);
    await assert.rejects(runTool('yes', [], { ...base, maxStdoutBytes: 64 * 1024 }),
      (e: unknown) => e instanceof SpeechError && /wrote more than 65536 bytes/.test(e.message));
    assert.deepEqual(childrenOf().filter((c) => c.comm === 'yes' || c.comm === 'sleep'), []);
  });

  it('names the Debian package when the program is missing', async () => {
    await assert.rejects(runTool('no-such-program-here', [], { ...base, debianPackage: 'some-package' }),
      (e: unknown) => e instanceof SpeechError && e.kind === 'unavailable' && /no-such-program-here is not installed \(install the Debian package: apt-get install some-package\)/.test(e.message));
  });
});
