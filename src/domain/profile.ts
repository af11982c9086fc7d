import { uncodedOpaque } from '../lib/content-coding.js';
import { parseEntityTags } from '../lib/entity-tags.js';

/**
 * The profile's rules, free of HTTP and of storage: what a partial update and a replacement
 * make of a profile, and how its version is shown and compared as an entity tag (RFC 9110).
 */

export interface Profile {
  readonly name: string | null;
  readonly email: string | null;
  readonly bio: string | null;
}

/** The fields a request sets; a field that is absent is left alone by a partial update. */
export type ProfileFields = Partial<Profile>;

export const EMPTY_PROFILE: Profile = Object.freeze({ name: null, email: null, bio: null });

function field<K extends keyof Profile>(fields: ProfileFields, key: K, otherwise: Profile[K]): Profile[K] {
  // A key that was sent counts, even with the value null; nothing inherited does.
  return Object.hasOwn(fields, key) ? (fields[key] ?? null) : otherwise;
}

/** A partial update (POST, PATCH; JSON merge patch of a flat object): the fields sent change, `null` included. */
export function mergeProfile(current: Profile, fields: ProfileFields): Profile {
  return {
    name: field(fields, 'name', current.name),
    email: field(fields, 'email', current.email),
    bio: field(fields, 'bio', current.bio),
  };
}

/** A replacement (PUT): the fields sent, every other one `null`. */
export function replaceProfile(fields: ProfileFields): Profile {
  return mergeProfile(EMPTY_PROFILE, fields);
}

/** The strong entity tag of a profile version: the version number in quotes, e.g. `"3"`. */
export function entityTag(version: number): string {
  return `"${version}"`;
}

/**
 * Whether a precondition header names the current version. Our tags are strong, so strong
 * comparison (If-Match) only fails a weak tag, and weak comparison (If-None-Match) ignores `W/`.
 * The tag of the version sent in any content coding (`"3-gzip"`) names it too, so that a client
 * keeps its preconditions whatever coding it, or a proxy before it, was sent.
 */
function matches(header: string, version: number, comparison: 'strong' | 'weak'): boolean {
  const tags = parseEntityTags(header);
  if (tags === '*') return true; // the profile always exists
  const opaque = String(version);
  return tags.some((tag) => uncodedOpaque(tag.opaque) === opaque && (comparison === 'weak' || !tag.weak));
}

export interface Preconditions {
  ifMatch?: string | undefined;
  ifNoneMatch?: string | undefined;
}

export type PreconditionOutcome = 'proceed' | 'if-match-failed' | 'if-none-match-failed';

/**
 * RFC 9110, 13.2.2, for a resource that always exists and has no modification date: first
 * If-Match, which fails when it names no current tag; then If-None-Match, which fails when it
 * does name it (a write then answers 412). A read's If-None-Match is weighed as its answer goes
 * out, against the tag of the coding it goes in (`plugins/content-codings.ts`).
 */
export function evaluatePreconditions({ ifMatch, ifNoneMatch }: Preconditions, version: number): PreconditionOutcome {
  if (ifMatch !== undefined && !matches(ifMatch, version, 'strong')) return 'if-match-failed';
  if (ifNoneMatch !== undefined && matches(ifNoneMatch, version, 'weak')) return 'if-none-match-failed';
  return 'proceed';
}
