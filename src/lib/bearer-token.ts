import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * The token of an `Authorization: Bearer <token>` header (RFC 6750, 2.1; the scheme in any case),
 * or null when the header is absent or names another scheme.
 */
export function bearerToken(authorization: string | undefined): string | null {
  const match = /^Bearer +(\S+) *$/i.exec(authorization ?? '');
  return match?.[1] ?? null;
}

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * Whether `given` is `secret`, in a time that depends on neither: the two are compared as SHA-256
 * digests, of equal length whatever was sent, so neither the length nor the first differing byte
 * of the secret shows in how long the answer takes.
 */
export function sameSecret(given: string, secret: string): boolean {
  return timingSafeEqual(digest(given), digest(secret));
}
