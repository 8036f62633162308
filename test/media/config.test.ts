// The RTP port range settings: defaults, and the values refused at start.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { checkPortRange } from '../../src/media/port-pool.ts';

describe('CALLPLANE_RTP_PORT_MIN / _MAX', () => {
  it('defaults to 10000-20000 and takes an even range', () => {
    const d = loadConfig({});
    assert.deepEqual([d.rtpPortMin, d.rtpPortMax], [10_000, 20_000]);
    const c = loadConfig({ CALLPLANE_RTP_PORT_MIN: '40000', CALLPLANE_RTP_PORT_MAX: '40100' });
    assert.deepEqual([c.rtpPortMin, c.rtpPortMax], [40_000, 40_100]);
    // What the config accepts, the pool accepts.
    assert.equal(checkPortRange({ portMin: c.rtpPortMin, portMax: c.rtpPortMax }), null);
  });

  it('refuses odd ports, an empty or reversed range, and ports outside 1024-65534', () => {
    for (const [min, max, message] of [
      ['10001', '20000', /must be even/], ['10000', '20001', /must be even/], ['20000', '20000', /below/], ['30000', '20000', /below/],
      ['1022', '2000', /between 1024 and 65534/], ['10000', '65536', /between 1024 and 65534/], ['ten', '20000', /integer/],
    ] as const) {
      assert.throws(() => loadConfig({ CALLPLANE_RTP_PORT_MIN: min, CALLPLANE_RTP_PORT_MAX: max }), (err: Error) => err instanceof ConfigError && message.test(err.message), `${min}-${max}`);
    }
  });
});
