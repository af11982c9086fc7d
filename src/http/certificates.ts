import { createSecureContext, type Server as TlsServer } from 'node:tls';
import type { FastifyBaseLogger } from 'fastify';
import { readText, readTextAsync } from '../config/files.js';
import { ConfigError } from '../config/index.js';
import { readTlsKeyPair, type TlsKeyPair } from '../config/protocols.js';
import { opensslReason } from '../lib/openssl-reason.js';

/**
 * The server's certificate and key, from TLS_CERT_FILE and TLS_KEY_FILE, read at start and again
 * on request (SIGHUP) or when the files change, which is looked for every two seconds by reading
 * them: a Kubernetes secret is updated by swapping a symbolic link, which a watch on the files would
 * not see. A new pair is served to new connections; those open keep theirs. Files that cannot be
 * used, and a pair OpenSSL refuses to serve (an RSA key too short for its security level, a
 * certificate signed with too weak a digest), are refused with one warning, and the pair in use stays.
 */

/** How often the files are read to see whether they changed, in ms. */
export const CERTIFICATE_POLL_MS = 2000;

/** TLS versions served: 1.2 and 1.3, none older. */
export const TLS_VERSIONS = { minVersion: 'TLSv1.2', maxVersion: 'TLSv1.3' } as const;

/**
 * The pair of the files, read and checked as at start, and then built into a TLS context as the
 * server would build it: what OpenSSL refuses is refused here, before the server is given it.
 * Throws a ConfigError naming the settings.
 */
function servablePair(certFile: string, keyFile: string): TlsKeyPair {
  const pair = readTlsKeyPair(certFile, keyFile);
  try {
    createSecureContext({ cert: pair.cert, key: pair.key, ...TLS_VERSIONS });
  } catch (error) {
    throw new ConfigError(
      `invalid TLS_CERT_FILE ${JSON.stringify(certFile)} with TLS_KEY_FILE ${JSON.stringify(keyFile)}: OpenSSL refuses to serve the pair (${opensslReason(error)})`,
    );
  }
  return pair;
}

/** What the log says of a certificate. */
function described({ certificate }: TlsKeyPair) {
  return {
    subject: certificate.subject.replaceAll('\n', ', '),
    not_after: new Date(certificate.validTo).toISOString(),
    fingerprint256: certificate.fingerprint256,
  };
}

export class ServerCertificate {
  readonly #certFile: string;
  readonly #keyFile: string;
  #pair: TlsKeyPair;
  /** The texts of the files last refused: each bad state is warned of once. */
  #refused: string | undefined;
  #server: TlsServer | undefined;
  #log: FastifyBaseLogger | undefined;
  #poll: NodeJS.Timeout | undefined;
  #checking = false;

  /** Reads the pair; throws the ConfigError of a file, or a pair, that cannot be used. */
  constructor(certFile: string, keyFile: string) {
    this.#certFile = certFile;
    this.#keyFile = keyFile;
    this.#pair = servablePair(certFile, keyFile);
  }

  /** The options of a TLS server that serves the pair read at start. */
  get serverOptions(): { cert: string; key: string } & typeof TLS_VERSIONS {
    return { cert: this.#pair.cert, key: this.#pair.key, ...TLS_VERSIONS };
  }

  /** Serves new pairs on `server` from now on: on `reload()`, and when the files change. */
  follow(server: TlsServer, log: FastifyBaseLogger): void {
    this.#server = server;
    this.#log = log;
    log.info({ tls_cert_file: this.#certFile, ...described(this.#pair) }, 'TLS certificate in use');
    this.#poll = setInterval(() => void this.#checkFiles(), CERTIFICATE_POLL_MS).unref();
  }

  stop(): void {
    clearInterval(this.#poll);
  }

  /** Reads the files again (SIGHUP) and serves them, or says in one warning why not. */
  reload(): void {
    this.#load('reload asked for');
  }

  /** Loads the files when their text differs from the pair in use and from the last refused. */
  async #checkFiles(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    try {
      const state = await Promise.all([readTextAsync(this.#certFile), readTextAsync(this.#keyFile)]).then(
        (texts) => texts.join('\0'),
        (error: Error) => `unreadable: ${error.message}`,
      );
      if (state !== `${this.#pair.cert}\0${this.#pair.key}` && state !== this.#refused) this.#load('files changed');
    } finally {
      this.#checking = false;
    }
  }

  /** The files' texts as the check compares them, or why they cannot be read. */
  #stateNow(): string {
    try {
      return `${readText(this.#certFile)}\0${readText(this.#keyFile)}`;
    } catch (error) {
      return `unreadable: ${(error as Error).message}`;
    }
  }

  #load(reason: string): void {
    let pair: TlsKeyPair;
    try {
      pair = servablePair(this.#certFile, this.#keyFile);
      this.#server?.setSecureContext({ cert: pair.cert, key: pair.key, ...TLS_VERSIONS });
    } catch (error) {
      this.#refused = this.#stateNow();
      this.#log?.warn(
        { reason, error: (error as Error).message, in_use: described(this.#pair) },
        'TLS certificate not loaded: the one in use stays',
      );
      return;
    }
    this.#pair = pair;
    this.#refused = undefined;
    this.#log?.info({ reason, tls_cert_file: this.#certFile, ...described(pair) }, 'TLS certificate loaded');
  }
}
