import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/index.js';

describe('the settings of event streams', () => {
  it('default to at most 1000 streams open', () => {
    assert.equal(loadConfig([], {}).streamsMax, 1000);
  });

  it('read STREAMS_MAX', () => {
    assert.equal(loadConfig([], { STREAMS_MAX: '1' }).streamsMax, 1);
    assert.equal(loadConfig([], { STREAMS_MAX: '1000000' }).streamsMax, 1_000_000);
  });

  for (const raw of ['0', '1000001', '-1', '1.5', 'many']) {
    it(`rejects STREAMS_MAX=${raw} naming it`, () => {
      assert.throws(
        () => loadConfig([], { STREAMS_MAX: raw }),
        new ConfigError(`invalid STREAMS_MAX ${JSON.stringify(raw)}: must be an integer from 1 to 1000000`),
      );
    });
  }
});
