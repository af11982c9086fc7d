import type { X509Certificate } from 'node:crypto';
import { shown } from '../lib/shown.js';
import {
  certificateFile,
  certificatesOf,
  invalidFile,
  keyPairError,
  privateKeyFile,
  privateKeyOf,
  readText,
} from './files.js';
import { boolean, integer } from './parsers.js';
import { ConfigError, concern, setting } from './setting.js';

const settings = {
  headersTimeoutMs: setting({
    env: 'HEADERS_TIMEOUT_MS',
    help: "time a client has to send a request's headers, in ms, 1 to 2147483647",
    // A client on a poor network sends its headers in well under a second; 10 s leaves room for
    // one that struggles while not holding a connection for long.
    default: 10_000,
    defaultText: '10000, or REQUEST_TIMEOUT_MS if that is less',
    parse: integer(1, 2 ** 31 - 1),
  }),
  requestTimeoutMs: setting({
    env: 'REQUEST_TIMEOUT_MS',
    help: 'time a client has to send a whole request, in ms, 1 to 2147483647, at least HEADERS_TIMEOUT_MS when that is set',
    // Reads the default 1 MiB body at a mere 35 KB/s.
    default: 30_000,
    parse: integer(1, 2 ** 31 - 1),
  }),
  keepAliveTimeoutMs: setting({
    env: 'KEEP_ALIVE_TIMEOUT_MS',
    help: "how long an idle kept-alive connection stays open, in ms, 1 to 2147483647; above the load balancer's idle timeout",
    // Longer than the 60 s idle timeout of common load balancers, so that the service never closes a
    // kept-alive connection just as the balancer sends a request on it (Fastify's own default).
    default: 72_000,
    parse: integer(1, 2 ** 31 - 1),
  }),
  http2: setting({
    env: 'HTTP2',
    help: 'true, false, 1 or 0, in any case: HTTP/2 beside HTTP/1.1 on the same port, with prior knowledge (h2c) in cleartext, or offered by ALPN (h2, http/1.1) with TLS_CERT_FILE',
    default: false,
    parse: boolean,
  }),
  grpc: setting({
    env: 'GRPC',
    help: 'true, false, 1 or 0, in any case: the API over gRPC (wherever HTTP/2 is), gRPC-Web and the Connect protocol on the same port, with gRPC health and reflection',
    default: true,
    parse: boolean,
  }),
  /** With TLS_KEY_FILE, the port serves HTTPS only; both are read again on SIGHUP and when they change. */
  tlsCertFile: setting<string | null>({
    env: 'TLS_CERT_FILE',
    help: 'a PEM file of the server certificate, its chain after it, with TLS_KEY_FILE: the port serves HTTPS only, TLS 1.2 and 1.3; read again on SIGHUP and within seconds of a change',
    default: null,
    defaultText: 'unset: cleartext HTTP',
    parse: certificateFile,
  }),
  tlsKeyFile: setting<string | null>({
    env: 'TLS_KEY_FILE',
    help: 'a PEM file of the unencrypted private key of TLS_CERT_FILE',
    default: null,
    parse: privateKeyFile,
  }),
};

/** How the service speaks HTTP: its timeouts, HTTP/2, and TLS with the server's certificate. */
export const PROTOCOLS = concern({
  settings,
  check(config, given) {
    const { headersTimeoutMs, requestTimeoutMs, tlsCertFile, tlsKeyFile } = config;
    // The headers are part of the request: Node refuses a headers timeout longer than the request's.
    // Left unset, the headers' timeout is the request's when that is the shorter.
    if (!given.has('headersTimeoutMs')) config.headersTimeoutMs = Math.min(headersTimeoutMs, requestTimeoutMs);
    else if (headersTimeoutMs > requestTimeoutMs) {
      throw new ConfigError(
        `invalid HEADERS_TIMEOUT_MS ${headersTimeoutMs}: must not be more than REQUEST_TIMEOUT_MS (${requestTimeoutMs})`,
      );
    }
    const tlsPair = keyPairError(settings.tlsCertFile.env, settings.tlsKeyFile.env, tlsCertFile, tlsKeyFile);
    if (tlsPair !== null) throw tlsPair;
  },
});

/** The server's certificate (its chain after it) and key, as read from TLS_CERT_FILE and TLS_KEY_FILE. */
export interface TlsKeyPair {
  cert: string;
  key: string;
  /** The server's own certificate, the first of the file. */
  certificate: X509Certificate;
}

/**
 * Reads TLS_CERT_FILE and TLS_KEY_FILE as the server uses them, checked as at start: each a PEM
 * file that can be read, the key the certificate's. Throws a ConfigError naming the setting at fault.
 */
export function readTlsKeyPair(certFile: string, keyFile: string): TlsKeyPair {
  // Each file read once, so that what is checked is what is served, even while the files change.
  const read = <T>(key: 'tlsCertFile' | 'tlsKeyFile', path: string, parse: (text: string) => T) => {
    try {
      const text = readText(path);
      return { text, parsed: parse(text) };
    } catch (error) {
      throw invalidFile(settings[key].env, path, (error as Error).message);
    }
  };
  const cert = read('tlsCertFile', certFile, certificatesOf);
  const key = read('tlsKeyFile', keyFile, privateKeyOf);
  const [certificate] = cert.parsed;
  if (certificate === undefined || !certificate.checkPrivateKey(key.parsed)) {
    throw invalidFile(
      settings.tlsKeyFile.env,
      keyFile,
      `is not the key of the certificate in TLS_CERT_FILE ${shown(certFile)}`,
    );
  }
  return { cert: cert.text, key: key.text, certificate };
}
