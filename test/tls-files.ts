import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Whether `openssl` is on PATH; without it the tests of TLS files skip, saying so once. */
export const OPENSSL_MISSING = spawnSync('openssl', ['version']).error !== undefined;
export const OPENSSL_SKIP_REASON = 'TLS file tests need openssl';
if (OPENSSL_MISSING) process.stdout.write(`SKIPPED: ${OPENSSL_SKIP_REASON}\n`);

/** The DNS name in the server certificates. */
export const SERVER_NAME = 'redis.test';

/** A private CA and certificates it signed, as PEM files in a directory of their own. */
export interface TlsFiles {
  dir: string;
  /** The private CA. */
  ca: string;
  /** Another CA, which signed nothing here. */
  otherCa: string;
  /** For 127.0.0.1 and SERVER_NAME. */
  serverCert: string;
  serverKey: string;
  /** For SERVER_NAME only: reached by address, it needs the name to check. */
  nameOnlyCert: string;
  nameOnlyKey: string;
  /** A client certificate for mutual TLS. */
  clientCert: string;
  clientKey: string;
  /** A file that is no PEM. */
  notPem: string;
  /** A self-signed certificate whose key is RSA-512: it parses and matches, and OpenSSL refuses to serve it. */
  weakCert: string;
  weakKey: string;
  /** The server's key, encrypted with a passphrase. */
  encryptedKey: string;
  /** Removes the directory. */
  remove(): void;
}

function openssl(dir: string, args: string[]): void {
  const result = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${result.stderr}`);
}

/** A new EC key and a certificate for `subject`, signed by the CA `ca` (self-signed if none), valid for a day. */
function certificate(dir: string, name: string, subject: string, ca?: string, altNames?: string): void {
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`];
  if (ca === undefined) {
    openssl(dir, ['req', '-x509', ...key, '-out', `${name}.pem`, '-days', '1', '-subj', subject]);
    return;
  }
  openssl(dir, ['req', ...key, '-out', `${name}.csr`, '-subj', subject]);
  const extensions = `${name}.ext`;
  writeFileSync(join(dir, extensions), altNames === undefined ? '' : `subjectAltName=${altNames}\n`);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '1',
    '-extfile',
    extensions,
  ]);
}

/** Makes a private CA, server and client certificates, and another CA, in a new temporary directory. */
export function makeTlsFiles(): TlsFiles {
  const dir = mkdtempSync(join(tmpdir(), 'greeting-tls-'));
  certificate(dir, 'ca', '/CN=Greeting Test CA');
  certificate(dir, 'other-ca', '/CN=Another Test CA');
  certificate(dir, 'server', `/CN=${SERVER_NAME}`, 'ca', `IP:127.0.0.1,DNS:${SERVER_NAME}`);
  certificate(dir, 'name-only', `/CN=${SERVER_NAME}`, 'ca', `DNS:${SERVER_NAME}`);
  certificate(dir, 'client', '/CN=greeting-service', 'ca');
  writeFileSync(join(dir, 'not.pem'), 'this is no certificate\n');
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'rsa:512',
    '-nodes',
    '-keyout',
    'weak.key',
    '-out',
    'weak.pem',
    '-days',
    '1',
    '-subj',
    '/CN=weak',
  ]);
  openssl(dir, ['pkey', '-in', 'server.key', '-aes256', '-passout', 'pass:secret', '-out', 'encrypted.key']);
  const file = (name: string) => join(dir, name);
  return {
    dir,
    ca: file('ca.pem'),
    otherCa: file('other-ca.pem'),
    serverCert: file('server.pem'),
    serverKey: file('server.key'),
    nameOnlyCert: file('name-only.pem'),
    nameOnlyKey: file('name-only.key'),
    clientCert: file('client.pem'),
    clientKey: file('client.key'),
    notPem: file('not.pem'),
    weakCert: file('weak.pem'),
    weakKey: file('weak.key'),
    encryptedKey: file('encrypted.key'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
