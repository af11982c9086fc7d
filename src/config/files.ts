/** The files settings name: read safely, secrets, the operator's token, PEM certificates and keys. */

import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readFileSync, type Stats } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { shown } from '../lib/shown.js';
import { ConfigError } from './setting.js';

/** The largest file a setting may name: a certificate chain or a CA bundle is a few hundred KB. */
const MAX_FILE_BYTES = 1024 * 1024;

/** A file that is neither regular nor a directory, for the error that refuses it. */
function kindOf(stat: Stats): string {
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isSocket()) return 'a socket';
  return 'a device';
}

/** Opened without waiting: a FIFO's open would wait for a writer. */
const READ_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

/**
 * Throws unless an open file is a regular one of at most 1 MiB, whose read never waits on another
 * process: checked on the descriptor, not the path, which could be replaced between check and read.
 */
function checkReadable(stat: Stats): void {
  if (stat.isDirectory()) throw Object.assign(new Error('a directory'), { code: 'EISDIR' });
  if (!stat.isFile()) throw new Error(`is not a regular file but ${kindOf(stat)}`);
  if (stat.size > MAX_FILE_BYTES) throw new Error(`is larger than ${MAX_FILE_BYTES / 1024 / 1024} MiB`);
}

/** The one-line Error of a file that cannot be read. */
function unreadable(error: unknown): Error {
  const { code } = error as NodeJS.ErrnoException;
  return code === undefined ? (error as Error) : new Error(`cannot be read (${code})`);
}

/** A setting's file's text (see checkReadable), or an Error saying in one line why it cannot be read. */
export function readText(path: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(path, READ_FLAGS);
    checkReadable(fstatSync(fd));
    return readFileSync(fd, 'utf8');
  } catch (error) {
    throw unreadable(error);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** `readText` off the event loop: for the files read again while the service runs. */
export async function readTextAsync(path: string): Promise<string> {
  let file: FileHandle | undefined;
  try {
    file = await open(path, READ_FLAGS);
    checkReadable(await file.stat());
    return await file.readFile('utf8');
  } catch (error) {
    throw unreadable(error);
  } finally {
    await file?.close();
  }
}

/**
 * A secret in a file, as container secrets give it (a password, a token): its content with one
 * trailing newline stripped. Read at start, and again by its user when it may have been rotated.
 */
export function readSecretFile(path: string): string {
  const secret = readText(path).replace(/\r?\n$/, '');
  if (secret === '') throw new Error('is empty');
  return secret;
}

/** RFC 6750's b64token: what a bearer token may be made of, so that it can be sent in Authorization. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const MIN_TOKEN_LENGTH = 16;

/** The operator's bearer token in its file (see readSecretFile), checked to be one a client can send. */
export function readAdminToken(path: string): string {
  const token = readSecretFile(path);
  if (!B64TOKEN.test(token) || token.length < MIN_TOKEN_LENGTH) {
    throw new Error(
      `must hold a bearer token of at least ${MIN_TOKEN_LENGTH} characters: letters, digits and -._~+/, then = padding (openssl rand -base64 32 makes one)`,
    );
  }
  return token;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

/** The certificates of a PEM text, the first one first: none is an Error. */
export function certificatesOf(text: string): X509Certificate[] {
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  try {
    if (blocks.length === 0) throw new Error('no certificate');
    return blocks.map((block) => new X509Certificate(block));
  } catch {
    throw new Error('is not a PEM file of certificates (-----BEGIN CERTIFICATE-----)');
  }
}

function pemCertificates(path: string): X509Certificate[] {
  return certificatesOf(readText(path));
}

export function certificateFile(path: string): string {
  pemCertificates(path);
  return path;
}

export function privateKeyFile(path: string): string {
  privateKey(path);
  return path;
}

/** The private key of a PEM text; an encrypted or unreadable one is an Error. */
export function privateKeyOf(text: string): KeyObject {
  try {
    return createPrivateKey(text);
  } catch {
    throw new Error(
      /ENCRYPTED/.test(text)
        ? 'is an encrypted key: the service takes it unencrypted'
        : 'is not a PEM private key (-----BEGIN PRIVATE KEY-----)',
    );
  }
}

function privateKey(path: string): KeyObject {
  return privateKeyOf(readText(path));
}

/** A setting that names a file, `name` its variable, refused: one line naming the setting and the file. */
export function invalidFile(name: string, path: string, message: string): ConfigError {
  return new ConfigError(`invalid ${name} ${shown(path)}: ${message}`);
}

/**
 * Why a certificate file and a key file, set by the variables `certName` and `keyName`, do not make a pair: one set
 * without the other, or a key that is not the certificate's (its first, the others being its
 * chain). Null when they do, or when neither is set.
 */
export function keyPairError(
  certName: string,
  keyName: string,
  certFile: string | null,
  keyFile: string | null,
): ConfigError | null {
  if (certFile === null && keyFile === null) return null;
  if (certFile === null)
    return new ConfigError(`invalid ${keyName}: needs ${certName}, the certificate it is the key of`);
  if (keyFile === null) return new ConfigError(`invalid ${certName}: needs ${keyName}, the key of the certificate`);
  if (pemCertificates(certFile)[0]?.checkPrivateKey(privateKey(keyFile)) === true) return null;
  return invalidFile(keyName, keyFile, `is not the key of the certificate in ${certName} ${shown(certFile)}`);
}
