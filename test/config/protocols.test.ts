import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { readTlsKeyPair } from '../../src/config/protocols.js';
import { makeTlsFiles, OPENSSL_MISSING, OPENSSL_SKIP_REASON, type TlsFiles } from '../tls-files.js';

describe('loadConfig: HTTP/2 and TLS', { skip: OPENSSL_MISSING && OPENSSL_SKIP_REASON }, () => {
  let files: TlsFiles;
  let chain: string;
  before(() => {
    files = makeTlsFiles();
    // The certificate followed by its CA: a chain, as TLS_CERT_FILE may hold one.
    chain = join(files.dir, 'chain.pem');
    writeFileSync(chain, readFileSync(files.serverCert, 'utf8') + readFileSync(files.ca, 'utf8'));
  });
  after(() => files?.remove());

  it('reads HTTP2 as a boolean in any case, and the certificate, its chain and its key', () => {
    for (const [raw, value] of [
      ['true', true],
      ['1', true],
      ['False', false],
      ['0', false],
    ] as const) {
      assert.equal(loadConfig([], { HTTP2: raw }).http2, value);
    }
    const config = loadConfig([], { HTTP2: 'true', TLS_CERT_FILE: chain, TLS_KEY_FILE: files.serverKey });
    assert.deepEqual([config.http2, config.tlsCertFile, config.tlsKeyFile], [true, chain, files.serverKey]);
    const pair = readTlsKeyPair(chain, files.serverKey);
    assert.equal(pair.cert, readFileSync(chain, 'utf8'));
    assert.equal(pair.key, readFileSync(files.serverKey, 'utf8'));
    assert.equal(pair.certificate.subject, 'CN=redis.test');
  });

  it('rejects each bad HTTP2 or TLS setting in one line naming it', () => {
    const missing = join(files.dir, 'missing.pem');
    const pem = 'is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)';
    const cases: [Record<string, string>, string][] = [
      [{ HTTP2: 'yes' }, 'invalid HTTP2 "yes": must be true, false, 1 or 0'],
      [{ TLS_CERT_FILE: files.serverCert }, 'invalid TLS_CERT_FILE: needs TLS_KEY_FILE, the key of the certificate'],
      [
        { TLS_KEY_FILE: files.serverKey },
        'invalid TLS_KEY_FILE: needs TLS_CERT_FILE, the certificate it is the key of',
      ],
      [
        { TLS_CERT_FILE: missing, TLS_KEY_FILE: files.serverKey },
        `invalid TLS_CERT_FILE ${JSON.stringify(missing)}: cannot be read (ENOENT)`,
      ],
      [
        { TLS_CERT_FILE: files.notPem, TLS_KEY_FILE: files.serverKey },
        `invalid TLS_CERT_FILE ${JSON.stringify(files.notPem)}: ${pem}`,
      ],
      [
        { TLS_CERT_FILE: files.serverKey, TLS_KEY_FILE: files.serverKey },
        `invalid TLS_CERT_FILE ${JSON.stringify(files.serverKey)}: ${pem}`,
      ],
      [
        { TLS_CERT_FILE: files.serverCert, TLS_KEY_FILE: files.serverCert },
        `invalid TLS_KEY_FILE ${JSON.stringify(files.serverCert)}: is not a PEM private key (-----BEGIN PRIVATE KEY-----)`,
      ],
      [
        { TLS_CERT_FILE: files.serverCert, TLS_KEY_FILE: files.dir },
        `invalid TLS_KEY_FILE ${JSON.stringify(files.dir)}: cannot be read (EISDIR)`,
      ],
      [
        { TLS_CERT_FILE: files.serverCert, TLS_KEY_FILE: files.clientKey },
        `invalid TLS_KEY_FILE ${JSON.stringify(files.clientKey)}: is not the key of the certificate in TLS_CERT_FILE ${JSON.stringify(files.serverCert)}`,
      ],
    ];
    for (const [env, message] of cases) {
      assert.throws(() => loadConfig([], env), new ConfigError(message), JSON.stringify(env));
    }
    // Read again at a reload, the files are refused alike.
    assert.throws(
      () => readTlsKeyPair(files.notPem, files.serverKey),
      new ConfigError(`invalid TLS_CERT_FILE ${JSON.stringify(files.notPem)}: ${pem}`),
    );
    assert.throws(
      () => readTlsKeyPair(chain, files.clientKey),
      new ConfigError(
        `invalid TLS_KEY_FILE ${JSON.stringify(files.clientKey)}: is not the key of the certificate in TLS_CERT_FILE ${JSON.stringify(chain)}`,
      ),
    );
  });
});
