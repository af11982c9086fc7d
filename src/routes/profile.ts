import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import {
  entityTag,
  evaluatePreconditions,
  mergeProfile,
  type PreconditionOutcome,
  type Preconditions,
  type Profile,
  type ProfileFields,
  replaceProfile,
} from '../domain/profile.js';
import { apiError, errorResponses } from '../errors.js';
import { VISIBLE_LINE } from '../schemas.js';
import type { ProfileSnapshot, ProfileStore } from '../stores/profile.js';

const NAME_MAX = 100;
const EMAIL_MAX = 254;
const BIO_MAX = 1000;

/**
 * How often a write that keeps losing races to other writes is tried, in all, before a 503,
 * and the longest pause between two tries. 50 writers racing through a store with 5 ms
 * between read and write need at most about 14 tries; 20 tries give up after 1.6 s on
 * average, 3.3 s at most.
 */
export const MAX_WRITE_ATTEMPTS = 20;
const MAX_PAUSE_MS = 250;

// Patterns of \u escapes rather than Unicode properties, which need the `u` flag that not every
// OpenAPI tool gives a pattern. Controls (C0, DEL, C1: NUL, ESC, ...) are typed by no one, and bidi
// controls (U+202E and the others) only disguise an address.
const CONTROLS = '\\u0000-\\u001f\\u007f-\\u009f';
const BIDI_CONTROLS = '\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069';
const EMAIL_CHARACTER = `[^\\s@${CONTROLS}${BIDI_CONTROLS}]`;
const EMAIL_LABEL = `[^\\s@.${CONTROLS}${BIDI_CONTROLS}]`;
// Tab, line feed and carriage return are how text is laid out; every other control is refused.
const TEXT = '^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$';

// Each field is a string with its rule, or null. One message per field states the whole
// rule, so a client learns everything it needs from a single detail.
const Name = Type.Union([Type.String({ minLength: 1, maxLength: NAME_MAX, format: VISIBLE_LINE }), Type.Null()], {
  description: `1 to ${NAME_MAX} characters, at least one of them visible (not white space or an invisible character such as U+200B), no control characters; or null.`,
  errorMessage: `must be a string of 1 to ${NAME_MAX} characters, not blank or invisible, without control characters, or null`,
  examples: ['Ada Lovelace'],
});
const Email = Type.Union(
  // local@domain: exactly one @, a dot inside the domain. A shape check, not RFC 5322.
  [
    Type.String({
      maxLength: EMAIL_MAX,
      pattern: `^${EMAIL_CHARACTER}+@${EMAIL_LABEL}+(?:\\.${EMAIL_LABEL}+)+$`,
    }),
    Type.Null(),
  ],
  {
    description: `An address local@domain with a dot in the domain, at most ${EMAIL_MAX} characters, without white space, control or bidi control characters; or null.`,
    errorMessage: `must be an email address (local@domain.tld) of at most ${EMAIL_MAX} characters, without white space, control or bidi control characters, or null`,
    examples: ['ada@example.com'],
  },
);
const Bio = Type.Union([Type.String({ maxLength: BIO_MAX, pattern: TEXT }), Type.Null()], {
  description: `At most ${BIO_MAX} characters; tabs and line breaks, but no other control characters; or null.`,
  errorMessage: `must be a string of at most ${BIO_MAX} characters, without control characters other than tab and line breaks, or null`,
  examples: ['Wrote the first program.'],
});

const ETAG_HEADER = {
  etag: Type.String({ description: 'Strong entity tag of this version of the profile.', examples: ['"3"'] }),
};

const ProfileBody = Type.Object(
  { name: Name, email: Email, bio: Bio },
  {
    additionalProperties: false,
    description: 'The whole profile, with its `ETag` header.',
    headers: ETAG_HEADER,
    examples: [{ name: 'Ada Lovelace', email: 'ada@example.com', bio: 'Wrote the first program.' }],
  },
);

const FieldsBody = Type.Object(
  { name: Type.Optional(Name), email: Type.Optional(Email), bio: Type.Optional(Bio) },
  {
    additionalProperties: false,
    description: 'Any of the fields; no other key. Lengths count Unicode characters.',
    errorMessage: { type: 'must be a JSON object' },
    examples: [{ bio: 'Wrote the first program.' }, { email: null }],
  },
);

const ReadHeaders = Type.Object({
  'if-none-match': Type.Optional(
    Type.String({ description: 'ETags, or `*`: 304 when one names the current version (weak comparison).' }),
  ),
  'if-match': Type.Optional(Type.String({ description: 'ETags, or `*`: 412 when none names the current version.' })),
});

const WriteHeaders = Type.Object({
  'if-match': Type.Optional(
    Type.String({
      description:
        'ETags, or `*`: the write is made only if one names the current version (strong comparison), else 412.',
    }),
  ),
  'if-none-match': Type.Optional(
    Type.String({ description: 'ETags, or `*`: 412 when one names the current version (weak comparison).' }),
  ),
});

const NOT_MODIFIED = {
  type: 'null',
  description: 'Not modified: If-None-Match names the current version. No body.',
  headers: ETAG_HEADER,
} as const;

/** Every profile response carries its version's tag; caches must ask again before reusing it. */
function versionHeaders(reply: FastifyReply, version: number): FastifyReply {
  return reply.header('etag', entityTag(version)).header('cache-control', 'no-cache');
}

function preconditionFailed(outcome: Exclude<PreconditionOutcome, 'proceed'>) {
  return apiError(
    412,
    outcome === 'if-match-failed'
      ? 'If-Match does not match the current ETag of the profile.'
      : 'If-None-Match matches the current ETag of the profile.',
  );
}

/**
 * Applies `change` to the current profile and stores the result if nobody wrote in between.
 * When another write came first, the preconditions are checked again against that write:
 * an If-Match naming the old version then fails with 412, while an unconditional write (or
 * `If-Match: *`) is applied again on top of it, so no write is ever lost.
 */
async function write(
  store: ProfileStore,
  preconditions: Preconditions,
  change: (current: Profile) => Profile,
): Promise<ProfileSnapshot> {
  for (let attempt = 1; ; attempt++) {
    const current = await store.get();
    const outcome = evaluatePreconditions(preconditions, current.version);
    if (outcome !== 'proceed') throw preconditionFailed(outcome);
    const stored = await store.compareAndSet(current.version, change(current.profile));
    if (stored !== null) return stored;
    if (attempt === MAX_WRITE_ATTEMPTS) {
      throw apiError(503, 'The profile is being changed by too many requests at once; try again.', [], {
        'retry-after': '1',
      });
    }
    // A random pause that grows with each attempt ("full jitter") spreads racing writers apart.
    await sleep(Math.random() * Math.min(2 ** attempt, MAX_PAUSE_MS));
  }
}

const WRITES = [
  {
    method: 'POST',
    operationId: 'updateProfile',
    summary: 'Update the profile',
    description: 'Changes the fields sent, `null` included, and leaves the others as they are.',
    consumes: ['application/json'],
    change: mergeProfile,
  },
  {
    method: 'PATCH',
    operationId: 'patchProfile',
    summary: 'Patch the profile',
    description:
      'Same as POST: changes the fields sent, `null` included (JSON merge patch, RFC 7396, of a flat object).',
    consumes: ['application/json', 'application/merge-patch+json'],
    change: mergeProfile,
  },
  {
    method: 'PUT',
    operationId: 'replaceProfile',
    summary: 'Replace the profile',
    description: 'Replaces the whole profile: fields not sent become `null`.',
    consumes: ['application/json'],
    change: (_current: Profile, fields: ProfileFields) => replaceProfile(fields),
  },
] as const;

export interface ProfileRoutesOptions {
  store: ProfileStore;
}

/** `/api/profile`: read it with GET (conditional with If-None-Match), write it with POST, PATCH and PUT. */
export const profileRoutes: FastifyPluginAsyncTypebox<ProfileRoutesOptions> = async (app, { store }) => {
  app.get(
    '/api/profile',
    {
      schema: {
        operationId: 'getProfile',
        summary: 'The profile',
        description:
          'The profile with all three fields, and its `ETag`. With If-None-Match naming that tag: 304, no body.',
        tags: ['profile'],
        headers: ReadHeaders,
        response: { 200: ProfileBody, 304: NOT_MODIFIED, ...errorResponses(412, 503) },
      },
    },
    async (request, reply) => {
      const current = await store.get();
      const outcome = evaluatePreconditions(
        { ifMatch: request.headers['if-match'], ifNoneMatch: request.headers['if-none-match'] },
        current.version,
      );
      // A safe method whose If-None-Match names the current tag: the client's copy is current.
      if (outcome === 'if-none-match-failed') return versionHeaders(reply, current.version).code(304).send();
      if (outcome !== 'proceed') throw preconditionFailed(outcome);
      return versionHeaders(reply, current.version).send(current.profile);
    },
  );

  for (const { method, operationId, summary, description, consumes, change } of WRITES) {
    app.route({
      method,
      url: '/api/profile',
      schema: {
        operationId,
        summary,
        description: `${description} Answers the whole profile and its new \`ETag\`.`,
        tags: ['profile'],
        consumes: [...consumes],
        headers: WriteHeaders,
        body: FieldsBody,
        response: { 200: ProfileBody, ...errorResponses(400, 412, 413, 415, 503) },
      },
      handler: async (request, reply) => {
        const preconditions = { ifMatch: request.headers['if-match'], ifNoneMatch: request.headers['if-none-match'] };
        const stored = await write(store, preconditions, (current) => change(current, request.body));
        return versionHeaders(reply, stored.version).send(stored.profile);
      },
    });
  }
};
