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

describe('loadConfig: the WebSocket echo', () => {
  it('has the contract’s defaults, WS_MAX_MESSAGE_BYTES that of BODY_LIMIT', () => {
    const config = loadConfig([], {});
    assert.deepEqual(
      [
        config.wsMaxConnections,
        config.wsMaxMessageBytes,
        config.wsMaxBufferedBytes,
        config.wsPingIntervalMs,
        config.wsPermessageDeflate,
      ],
      [1000, 1024 * 1024, 4 * 1024 * 1024, 30_000, false],
    );
    assert.equal(loadConfig([], { BODY_LIMIT: '5000' }).wsMaxMessageBytes, 5000);
    assert.equal(loadConfig([], { BODY_LIMIT: '5000', WS_MAX_MESSAGE_BYTES: '70' }).wsMaxMessageBytes, 70);
    assert.equal(loadConfig([], { WS_PERMESSAGE_DEFLATE: 'TRUE' }).wsPermessageDeflate, true);
  });

  it('refuses a bad value with one line naming it', () => {
    for (const [name, raw, message] of [
      ['WS_MAX_CONNECTIONS', '0', 'invalid WS_MAX_CONNECTIONS "0": must be an integer from 1 to 1000000'],
      ['WS_MAX_MESSAGE_BYTES', '1.5', 'invalid WS_MAX_MESSAGE_BYTES "1.5": must be an integer from 1 to 2147483647'],
      ['WS_MAX_BUFFERED_BYTES', '-1', 'invalid WS_MAX_BUFFERED_BYTES "-1": must be an integer from 1 to 2147483647'],
      ['WS_PING_INTERVAL_MS', '5', 'invalid WS_PING_INTERVAL_MS "5": must be an integer from 10 to 2147483647'],
      ['WS_PERMESSAGE_DEFLATE', 'yes', 'invalid WS_PERMESSAGE_DEFLATE "yes": must be true, false, 1 or 0'],
    ] as const) {
      assert.throws(() => loadConfig([], { [name]: raw }), new ConfigError(message));
    }
  });
});
