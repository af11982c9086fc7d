import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import {
  entityTag,
  mergeProfile,
  type Preconditions,
  type Profile,
  type ProfileFields,
  replaceProfile,
} from '../domain/profile.js';
import { errorResponse, errorResponses, RETRY_AFTER_HEADER } from '../errors.js';
import { CONTROL_CHARACTERS as CONTROLS, visibleLine } from '../schemas.js';
import { readProfile, writeProfile } from '../services/profile.js';
import type { ProfileStore } from '../stores/profile.js';

const NAME_MAX = 100;
const EMAIL_MAX = 254;
const BIO_MAX = 1000;

// Patterns of \u escapes rather than Unicode properties, which need the `u` flag that not every
// OpenAPI tool gives a pattern. Controls (C0, DEL, C1: NUL, ESC, ...) are typed by no one, and bidi
// controls (U+202E and the others) only disguise an address.
const BIDI_CONTROLS = '\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069';
const EMAIL_CHARACTER = `[^\\s@${CONTROLS}${BIDI_CONTROLS}]`;
const EMAIL_LABEL = `[^\\s@.${CONTROLS}${BIDI_CONTROLS}]`;
// Tab, line feed and carriage return are how text is laid out; every other control is refused.
const TEXT = '^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$';

// Each field is a string with its rule, or null. One message per field states the whole
// rule, so a client learns everything it needs from a single detail.
const Name = Type.Union([visibleLine({ minLength: 1, maxLength: NAME_MAX }), Type.Null()], {
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

/** What every answer with the profile's version carries: its tag, and that caches must ask again. */
const VERSION_HEADERS = {
  ETag: Type.String({
    description: 'Strong entity tag of this version of the profile.',
    pattern: '^"[^"]*"$',
    examples: ['"3"'],
  }),
  'Cache-Control': Type.Literal('no-cache', { description: 'A cache must ask again (If-None-Match) before reuse.' }),
};

export const ProfileSchema = Type.Object(
  { name: Name, email: Email, bio: Bio },
  {
    additionalProperties: false,
    title: 'Profile',
    description: 'The whole profile.',
    examples: [{ name: 'Ada Lovelace', email: 'ada@example.com', bio: 'Wrote the first program.' }],
  },
);

/** The profile as an answer: with its version's headers. */
const ProfileBody = { ...ProfileSchema, headers: VERSION_HEADERS };

export const FieldsBody = Type.Object(
  { name: Type.Optional(Name), email: Type.Optional(Email), bio: Type.Optional(Bio) },
  {
    additionalProperties: false,
    title: 'ProfileUpdate',
    description: 'Any of the fields; no other key. Lengths count Unicode characters.',
    errorMessage: { type: 'must be a JSON object' },
    examples: [{ bio: 'Wrote the first program.' }, { email: null }],
  },
);

const ReadHeaders = Type.Object({
  'if-none-match': Type.Optional(
    Type.String({
      description:
        'ETags, or `*`: 304 when one names the tag the 200 would carry, that of the version in the coding chosen for this request (weak comparison).',
    }),
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
  description: 'Not modified: If-None-Match names the tag the 200 would carry, which this answer carries. No body.',
  headers: VERSION_HEADERS,
} as const;

/** The profile's store is unavailable, or too many writes raced: try again after Retry-After. */
const UNAVAILABLE = errorResponse(503, RETRY_AFTER_HEADER);

/** The conditions a request sets on the profile's version. */
function preconditionsOf(headers: { 'if-match'?: string; 'if-none-match'?: string }): Preconditions {
  return { ifMatch: headers['if-match'], ifNoneMatch: headers['if-none-match'] };
}

/** Every profile response carries its version's tag; caches must ask again before reusing it. */
function versionHeaders(reply: FastifyReply, version: number): FastifyReply {
  return reply.header('etag', entityTag(version)).header('cache-control', 'no-cache');
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
        response: { 200: ProfileBody, 304: NOT_MODIFIED, ...errorResponses(412), 503: UNAVAILABLE },
      },
    },
    async (request, reply) => {
      // An If-None-Match naming the tag this answer goes out with makes it a 304 (`plugins/content-codings.ts`).
      const current = await readProfile(store, request.headers['if-match']);
      return versionHeaders(reply, current.version).send(current.profile);
    },
  );

  for (const { method, operationId, summary, description, consumes, change: apply } of WRITES) {
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
        response: { 200: ProfileBody, ...errorResponses(400, 412, 413, 415), 503: UNAVAILABLE },
      },
      handler: async (request, reply) => {
        const change = (current: Profile) => apply(current, request.body);
        const stored = await writeProfile(store, preconditionsOf(request.headers), change);
        return versionHeaders(reply, stored.version).send(stored.profile);
      },
    });
  }
};
