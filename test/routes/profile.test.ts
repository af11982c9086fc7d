import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import type { Profile } from '../../src/domain/profile.js';
import { CODINGS } from '../../src/lib/content-coding.js';
import { MAX_WRITE_ATTEMPTS } from '../../src/services/profile.js';
import { MemoryProfileStore } from '../../src/stores/memory-profile.js';
import type { ProfileSnapshot, ProfileStore } from '../../src/stores/profile.js';
import { assertEnvelope, type Client, type TestResponse, transports } from '../helpers.js';

const PATH = '/api/profile';
const JSON_TYPE = { 'content-type': 'application/json' };
const EMPTY: Profile = { name: null, email: null, bio: null };
const ADA: Profile = { name: 'Ada Lovelace', email: 'ada@example.com', bio: 'Wrote the first program.' };
const WRITE_METHODS = ['POST', 'PATCH', 'PUT'] as const;

/** Every code point (no surrogate) that `test` accepts, as one-character strings. */
function codePoints(test: RegExp): string[] {
  const found: string[] = [];
  for (let code = 0; code <= 0x10ffff; code++) {
    if (code >= 0xd800 && code <= 0xdfff) continue;
    const char = String.fromCodePoint(code);
    if (test.test(char)) found.push(char);
  }
  return found;
}

/** White space and default-ignorable code points (U+200B, U+2060, U+FEFF, ...): a name of these alone is blank. */
const BLANK = codePoints(/^[\p{White_Space}\p{Default_Ignorable_Code_Point}]$/u);
/** Controls (C0, DEL, C1) and bidi controls (U+202E, ...): none may be in an email. */
const HIDDEN_IN_EMAIL = codePoints(/^[\p{Cc}\p{Bidi_Control}]$/u);
/** Controls a bio may not hold: all but tab and the line breaks. */
const BIO_CONTROLS = codePoints(/^(?![\t\n\r])\p{Cc}$/u);

/** Text of 0 to `max` characters, each from `chars`. */
const textOf = (chars: string[], max: number) =>
  fc.array(fc.constantFrom(...chars), { maxLength: max }).map((list) => list.join(''));
/** `text` with `inserted` put in at a random place. */
const withInserted = (text: string, inserted: fc.Arbitrary<string>) =>
  fc.tuple(fc.nat(text.length), inserted).map(([at, char]) => text.slice(0, at) + char + text.slice(at));

const NAME_RULE =
  'must be a string of 1 to 100 characters, not blank or invisible, without control characters, or null';
const EMAIL_RULE =
  'must be an email address (local@domain.tld) of at most 254 characters, without white space, control or bidi control characters, or null';
const BIO_RULE =
  'must be a string of at most 1000 characters, without control characters other than tab and line breaks, or null';

/** The strong tag of `version` as sent in the content coding of `res`: `"3"` plain, `"3-gzip"` in gzip. */
function tagOf(res: TestResponse, version: number): string {
  const coding = res.headers['content-encoding'];
  return coding === undefined ? `"${version}"` : `"${version}-${coding}"`;
}

/**
 * Asserts a 200 carrying exactly `profile` (as text: key order counts) at `version`, with its headers,
 * its tag that of the coding it came in.
 */
function assertProfile(res: TestResponse, profile: Profile, version: number): void {
  assert.equal(res.status, 200, res.text);
  assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
  assert.equal(res.headers.etag, tagOf(res, version));
  assert.equal(res.headers['cache-control'], 'no-cache');
  assert.equal(typeof res.headers['x-request-id'], 'string');
  assert.equal(res.text, JSON.stringify({ name: profile.name, email: profile.email, bio: profile.bio }));
}

/** Asserts a 304 tagged as the 200 to the same request would be (`"3"`, or `"3-br"` in br), with no body and no Content-Length. */
function assertNotModified(res: TestResponse, version: number, coding?: string): void {
  assert.equal(res.status, 304, res.text);
  assert.equal(res.text, '');
  assert.equal(res.headers.etag, coding === undefined ? `"${version}"` : `"${version}-${coding}"`);
  assert.equal(res.headers['cache-control'], 'no-cache');
  assert.equal(res.headers['content-type'], undefined);
  assert.equal(res.headers['content-length'], undefined);
  assert.equal(res.headers['content-encoding'], undefined);
  assert.equal(typeof res.headers['x-request-id'], 'string');
}

/** The version an ETag names, in whichever coding it came. */
function versionOf(res: TestResponse): number {
  const tag = res.headers.etag;
  assert.equal(typeof tag, 'string');
  assert.match(tag as string, /^"\d+(-(gzip|br|deflate|zstd))?"$/);
  assert.equal(tag, tagOf(res, Number.parseInt((tag as string).slice(1), 10)));
  return Number.parseInt((tag as string).slice(1), 10);
}

/** Requests to the profile on one client, each with `always` among its headers (an Accept-Encoding, say). */
function profileClient(client: Client, always: Record<string, string> = {}) {
  return {
    get: (headers: Record<string, string> = {}, method = 'GET') =>
      client.send({ method, path: PATH, headers: { ...always, ...headers } }),
    write: (method: string, body: unknown, headers: Record<string, string> = {}) =>
      client.send({
        method,
        path: PATH,
        headers: { ...JSON_TYPE, ...always, ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
  };
}

type ProfileClient = ReturnType<typeof profileClient>;

/**
 * The memory store, replaced by an empty one before each test: one app per suite (building
 * one takes longer than most tests), and still a fresh profile, at version 0, for every test.
 */
class FreshStore implements ProfileStore {
  #store = new MemoryProfileStore(0);

  reset(): void {
    this.#store = new MemoryProfileStore(0);
  }

  get(): Promise<ProfileSnapshot> {
    return this.#store.get();
  }

  compareAndSet(expectedVersion: number, next: Profile): Promise<ProfileSnapshot | null> {
    return this.#store.compareAndSet(expectedVersion, next);
  }
}

type Connect = (typeof transports)[number][1];

/**
 * The fixture of a suite: one app over a FreshStore (building one takes longer than most
 * tests), its profile emptied before each test and, with `seed`, then set to ADA at version 1.
 */
function profileSuite(connect: Connect, { seed, coding }: { seed: boolean; coding?: string }) {
  const store = new FreshStore();
  const suite = {
    client: undefined as unknown as Client,
    profile: undefined as unknown as ProfileClient,
    /** A rejected request changes nothing: the profile and its ETag are still those of the seed. */
    async assertUnchanged(): Promise<void> {
      assertProfile(await suite.profile.get(), ADA, 1);
    },
  };
  before(async () => {
    // Unlimited: the properties send more requests than a rate-limit window allows.
    // With a coding, every answer of the profile is sent in it, however small.
    const codings = coding === undefined ? {} : { compressionMinBytes: 0 };
    suite.client = await connect({ rateLimitMax: 0, ...codings }, { profileStore: store });
    suite.profile = profileClient(suite.client, coding === undefined ? {} : { 'accept-encoding': coding });
  });
  beforeEach(async () => {
    store.reset();
    if (seed) assertProfile(await suite.profile.write('PUT', ADA), ADA, 1);
  });
  after(() => suite.client.close());
  return suite;
}

for (const [transport, connect] of transports) {
  describe(`GET /api/profile (${transport})`, () => {
    const suite = profileSuite(connect, { seed: false });

    it('starts with all three fields null, at ETag "0"', async () => {
      assertProfile(await suite.profile.get(), EMPTY, 0);
    });

    it('answers HEAD with the headers of GET and no body', async () => {
      const res = await suite.profile.get({}, 'HEAD');
      assert.equal(res.status, 200);
      assert.equal(res.text, '');
      assert.equal(res.headers.etag, '"0"');
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal(typeof res.headers['x-request-id'], 'string');
    });

    it('tolerates a trailing slash', async () => {
      assertProfile(await suite.client.send({ path: `${PATH}/` }), EMPTY, 0);
    });

    it('gives each app its own profile', async () => {
      assertProfile(await suite.profile.write('PUT', ADA), ADA, 1);
      const other = await connect();
      try {
        const res = await profileClient(other).get();
        assert.equal(res.status, 200);
        assert.deepEqual(res.json(), EMPTY);
        assert.notEqual(res.headers.etag, '"1"');
      } finally {
        await other.close();
      }
    });

    for (const header of ['"1"', 'W/"1"', '*', '"0", "1"', 'W/"7",W/"1"']) {
      it(`answers If-None-Match: ${header} naming the current tag with 304, for GET and HEAD`, async () => {
        await suite.profile.write('PUT', ADA);
        assertNotModified(await suite.profile.get({ 'if-none-match': header }), 1);
        assertNotModified(await suite.profile.get({ 'if-none-match': header }, 'HEAD'), 1);
      });
    }

    for (const header of ['"0"', 'W/"0"', '"2"', '1', '""']) {
      it(`answers If-None-Match: ${header} naming another tag with the profile`, async () => {
        await suite.profile.write('PUT', ADA);
        assertProfile(await suite.profile.get({ 'if-none-match': header }), ADA, 1);
      });
    }

    it('answers a tag that was current before a write with the new profile', async () => {
      const before = await suite.profile.get();
      await suite.profile.write('POST', { name: 'Ada' });
      const after = await suite.profile.get({ 'if-none-match': String(before.headers.etag) });
      assertProfile(after, { ...EMPTY, name: 'Ada' }, 1);
      assertNotModified(await suite.profile.get({ 'if-none-match': String(after.headers.etag) }), 1);
    });

    it('honours If-Match on GET: 412 unless it names the current tag', async () => {
      const error = assertEnvelope(await suite.profile.get({ 'if-match': '"1"' }), 412, 'PRECONDITION_FAILED');
      assert.equal(error.message, 'If-Match does not match the current ETag of the profile.');
      assertProfile(await suite.profile.get({ 'if-match': '"0"' }), EMPTY, 0);
      assertProfile(await suite.profile.get({ 'if-match': '*' }), EMPTY, 0);
    });
  });

  describe(`POST, PATCH and PUT /api/profile (${transport})`, () => {
    const suite = profileSuite(connect, { seed: false });

    for (const method of ['POST', 'PATCH'] as const) {
      it(`${method} changes only the fields sent and answers the whole profile with a new ETag`, async () => {
        assertProfile(await suite.profile.write(method, { name: 'Ada' }), { ...EMPTY, name: 'Ada' }, 1);
        assertProfile(
          await suite.profile.write(method, { email: ADA.email }),
          { ...EMPTY, name: 'Ada', email: ADA.email },
          2,
        );
        assertProfile(await suite.profile.write(method, { bio: ADA.bio, name: ADA.name }), ADA, 3);
        assertProfile(await suite.profile.get(), ADA, 3);
      });

      it(`${method} sets a field sent as null to null`, async () => {
        await suite.profile.write('PUT', ADA);
        assertProfile(await suite.profile.write(method, { email: null }), { ...ADA, email: null }, 2);
        assertProfile(await suite.profile.write(method, { name: null, bio: null }), EMPTY, 3);
        assertProfile(await suite.profile.get(), EMPTY, 3);
      });

      it(`${method} with an empty object changes no field but is a write: the ETag changes`, async () => {
        await suite.profile.write('PUT', ADA);
        assertProfile(await suite.profile.write(method, {}), ADA, 2);
      });
    }

    it('PATCH accepts application/merge-patch+json', async () => {
      const type = { 'content-type': 'application/merge-patch+json' };
      assertProfile(await suite.profile.write('PATCH', ADA, type), ADA, 1);
      assertProfile(await suite.profile.write('PATCH', { bio: null }, type), { ...ADA, bio: null }, 2);
      assertProfile(await suite.profile.get(), { ...ADA, bio: null }, 2);
    });

    it('PUT replaces the whole profile: fields not sent become null', async () => {
      assertProfile(await suite.profile.write('PUT', ADA), ADA, 1);
      assertProfile(await suite.profile.write('PUT', { bio: 'Only a bio.' }), { ...EMPTY, bio: 'Only a bio.' }, 2);
      assertProfile(await suite.profile.write('PUT', { name: 'Grace', email: null }), { ...EMPTY, name: 'Grace' }, 3);
      assertProfile(await suite.profile.write('PUT', {}), EMPTY, 4);
      assertProfile(await suite.profile.get(), EMPTY, 4);
    });

    it('changes the ETag on every write, even one that sets the same values', async () => {
      for (let version = 1; version <= 3; version++) {
        assertProfile(await suite.profile.write('PUT', ADA), ADA, version);
      }
      assertProfile(await suite.profile.write('POST', ADA), ADA, 4);
      assertProfile(await suite.profile.write('PATCH', ADA), ADA, 5);
    });

    it('answers the profile in the order name, email, bio whatever the order sent', async () => {
      const res = await suite.profile.write('PUT', '{"bio":"b","email":"e@x.io","name":"n"}');
      assert.equal(res.text, '{"name":"n","email":"e@x.io","bio":"b"}');
    });

    it('keeps Unicode exactly as sent', async () => {
      const unicode = { name: 'Zoë 世界 😀', email: 'zoë@exämple.de', bio: 'é\u0301 \t "quoted" \\ \r\n' };
      assertProfile(await suite.profile.write('PUT', unicode), unicode, 1);
      assertProfile(await suite.profile.get(), unicode, 1);
    });

    it('answers other methods with 405 and the Allow list', async () => {
      for (const method of ['DELETE', 'OPTIONS']) {
        const res = await suite.client.send({ method, path: PATH });
        assertEnvelope(res, 405, 'METHOD_NOT_ALLOWED');
        assert.equal(res.headers.allow, 'GET, HEAD, POST, PATCH, PUT');
      }
    });
  });

  describe(`/api/profile validation (${transport})`, () => {
    const suite = profileSuite(connect, { seed: true });

    const email254 = `${'l'.repeat(64)}@${'d'.repeat(185)}.com`;
    const accepted: [string, Partial<Profile>][] = [
      ['a one-character name', { name: 'A' }],
      ['a 100-character name', { name: 'n'.repeat(100) }],
      ['a name of 100 emoji (200 UTF-16 units)', { name: '😀'.repeat(100) }],
      ['a name with white space around it', { name: '  Ada  ' }],
      ['a name with a zero-width joiner and a bidi mark in it', { name: '👩\u200d💻 \u200fעדה' }],
      ['a name that is one visible character among invisible ones', { name: '\u200b\ufeffA\u2060' }],
      ['the shortest email', { email: 'a@b.c' }],
      ['a 254-character email', { email: email254 }],
      ['an email with a plus, dots and subdomains', { email: 'first.last+tag@mail.example.co.uk' }],
      ['a non-ASCII email', { email: 'zoë@exämple.de' }],
      ['an email with a zero-width non-joiner, as Persian writes', { email: 'می\u200cخواهم@example.ir' }],
      ['an empty bio', { bio: '' }],
      ['a blank bio', { bio: '   ' }],
      ['a 1000-character bio', { bio: 'b'.repeat(1000) }],
      ['a bio with tabs and line breaks', { bio: 'Poet.\tMathematician.\r\nWrote the first program.\n' }],
      ['a bio with bidi controls and zero-width characters', { bio: 'Ada \u2067عدا\u2069 \u200b\u202eexample' }],
      ['a bio of 1000 emoji (2000 UTF-16 units)', { bio: '😀'.repeat(1000) }],
      ['every field null', { name: null, email: null, bio: null }],
    ];
    for (const [label, fields] of accepted) {
      it(`accepts ${label}`, async () => {
        assertProfile(await suite.profile.write('POST', fields), { ...ADA, ...fields }, 2);
      });
    }

    const rejected: [string, string, unknown, string][] = [
      ['an empty name', 'name', '', NAME_RULE],
      ['a blank name', 'name', '   ', NAME_RULE],
      ['a name of tabs and new lines', 'name', '\t\n', NAME_RULE],
      ['a name of Unicode spaces', 'name', '\u00a0\u3000\u2003', NAME_RULE],
      ['a name of zero-width characters', 'name', '\u200b\u2060\ufeff', NAME_RULE],
      ['a name of a zero-width space alone', 'name', '\u200b', NAME_RULE],
      ['a name of spaces and invisible characters', 'name', ' \u200c\u00ad \u034f\u180e\ufe0f\u{e0020} ', NAME_RULE],
      ['a name with a NUL in it', 'name', 'Ada\u0000', NAME_RULE],
      ['a name with an escape sequence', 'name', '\u001b[31mAda', NAME_RULE],
      ['a name with a new line in it', 'name', 'Ada\nLovelace', NAME_RULE],
      ['a 101-character name', 'name', 'n'.repeat(101), NAME_RULE],
      ['a name of 101 emoji', 'name', '😀'.repeat(101), NAME_RULE],
      ['a number as the name', 'name', 123, NAME_RULE],
      ['true as the name', 'name', true, NAME_RULE],
      ['an array as the name', 'name', ['Ada'], NAME_RULE],
      ['an object as the name', 'name', { first: 'Ada' }, NAME_RULE],
      ['an email without @', 'email', 'ada.example.com', EMAIL_RULE],
      ['an email without a dot in the domain', 'email', 'ada@example', EMAIL_RULE],
      ['an email with a dot only in the local part', 'email', 'ada.lovelace@example', EMAIL_RULE],
      ['an email without a local part', 'email', '@example.com', EMAIL_RULE],
      ['an email without a domain', 'email', 'ada@', EMAIL_RULE],
      ['an email whose domain starts with a dot', 'email', 'ada@.example.com', EMAIL_RULE],
      ['an email whose domain ends with a dot', 'email', 'ada@example.', EMAIL_RULE],
      ['an email with an empty domain label', 'email', 'ada@example..com', EMAIL_RULE],
      ['an email with two @', 'email', 'ada@lovelace@example.com', EMAIL_RULE],
      ['an email with a space', 'email', 'ada lovelace@example.com', EMAIL_RULE],
      ['an email with a space around it', 'email', ' ada@example.com', EMAIL_RULE],
      ['an email with a NUL in it', 'email', 'ada\u0000@example.com', EMAIL_RULE],
      ['an email with a control character in the domain', 'email', 'ada@exa\u0007mple.com', EMAIL_RULE],
      ['an email with DEL', 'email', 'ada\u007f@example.com', EMAIL_RULE],
      ['an email with a C1 control', 'email', 'ada\u0085@example.com', EMAIL_RULE],
      ['an email with a right-to-left override', 'email', 'ada@\u202emoc.elpmaxe', EMAIL_RULE],
      ['an email with a right-to-left mark', 'email', 'ada\u200f@example.com', EMAIL_RULE],
      ['an email with an isolate', 'email', 'ada@example.\u2066com\u2069', EMAIL_RULE],
      ['an email with an Arabic letter mark', 'email', '\u061cada@example.com', EMAIL_RULE],
      ['an empty email', 'email', '', EMAIL_RULE],
      ['a 255-character email', 'email', `l${email254}`, EMAIL_RULE],
      ['a number as the email', 'email', 42, EMAIL_RULE],
      ['an object as the email', 'email', {}, EMAIL_RULE],
      ['a 1001-character bio', 'bio', 'b'.repeat(1001), BIO_RULE],
      ['a bio of 1001 emoji', 'bio', '😀'.repeat(1001), BIO_RULE],
      ['a bio with a NUL in it', 'bio', 'Wrote\u0000 the first program.', BIO_RULE],
      ['a bio with an escape sequence', 'bio', '\u001b[2J\u001b[HWrote the first program.', BIO_RULE],
      ['a bio with a backspace', 'bio', 'Ada\b\b\bGrace', BIO_RULE],
      ['a bio with a vertical tab or a form feed', 'bio', 'a\u000bb\u000cc', BIO_RULE],
      ['a bio with a C1 control', 'bio', 'Ada\u009b31m', BIO_RULE],
      ['a number as the bio', 'bio', 5, BIO_RULE],
      ['false as the bio', 'bio', false, BIO_RULE],
      ['an array as the bio', 'bio', ['x'], BIO_RULE],
    ];
    for (const [label, field, value, message] of rejected) {
      it(`rejects ${label}, changing nothing`, async () => {
        for (const method of WRITE_METHODS) {
          const res = await suite.profile.write(method, { [field]: value });
          assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field, message, value }]);
        }
        await suite.assertUnchanged();
      });
    }

    for (const body of [
      '{"age":36}',
      '{"Name":"Ada"}',
      '{"__proto__":{"name":"x"}}',
      '{"constructor":{"prototype":{"name":"x"}}}',
      '{"prototype":null}',
      '{"":1}',
    ]) {
      it(`rejects the unknown key in ${body}, changing nothing`, async () => {
        const [[key, value]] = Object.entries(JSON.parse(body)) as [[string, unknown]];
        for (const method of WRITE_METHODS) {
          const res = await suite.profile.write(method, body);
          assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: key, message: 'is not allowed', value }]);
        }
        await suite.assertUnchanged();
        assert.equal(({} as Record<string, unknown>).name, undefined);
      });
    }

    it('reports every invalid field at once, unknown keys first, and changes nothing', async () => {
      const body = '{"name":"","email":"nope","bio":7,"age":36,"__proto__":1,"constructor":2}';
      for (const method of WRITE_METHODS) {
        assertEnvelope(await suite.profile.write(method, body), 400, 'VALIDATION_ERROR', [
          { field: 'age', message: 'is not allowed', value: 36 },
          { field: '__proto__', message: 'is not allowed', value: 1 },
          { field: 'constructor', message: 'is not allowed', value: 2 },
          { field: 'name', message: NAME_RULE, value: '' },
          { field: 'email', message: EMAIL_RULE, value: 'nope' },
          { field: 'bio', message: BIO_RULE, value: 7 },
        ]);
      }
      await suite.assertUnchanged();
    });

    // Found by the fuzz suite: the envelope repeating such a value overflowed the serializer's stack (a 500).
    it('reports an invalid value nested 100,000 deep in full, changing nothing', async () => {
      const depth = 100_000;
      const value = `${'['.repeat(depth)}${']'.repeat(depth)}`;
      for (const method of WRITE_METHODS) {
        const res = await suite.profile.write(method, `{"name":${value}}`);
        assert.equal(res.status, 400, res.text.slice(0, 300));
        assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
        const detail = `[{"field":"name","message":"${NAME_RULE}","value":${value}}]`;
        assert.ok(
          res.text.startsWith(
            `{"error":{"code":"VALIDATION_ERROR","message":"The request is not valid.","details":${detail},`,
          ),
        );
      }
      await suite.assertUnchanged();
    });

    it('rejects the whole request when one field of several is invalid', async () => {
      const res = await suite.profile.write('POST', { name: 'Grace', email: 'grace@example', bio: 'Admiral.' });
      assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: 'email', message: EMAIL_RULE, value: 'grace@example' }]);
      await suite.assertUnchanged();
    });

    for (const [label, body] of [
      ['an array', '[{"name":"Ada"}]'],
      ['a string', '"Ada"'],
      ['a number', '1'],
      ['true', 'true'],
    ] as const) {
      it(`rejects ${label} as the body, changing nothing`, async () => {
        for (const method of WRITE_METHODS) {
          assertEnvelope(await suite.profile.write(method, body), 400, 'VALIDATION_ERROR', [
            { field: 'body', message: 'must be a JSON object', value: JSON.parse(body) },
          ]);
        }
        await suite.assertUnchanged();
      });
    }

    it('rejects null, an empty body and no body, changing nothing', async () => {
      const missing = [{ field: 'body', message: 'must be a JSON object', value: null }];
      for (const method of WRITE_METHODS) {
        assertEnvelope(await suite.profile.write(method, 'null'), 400, 'VALIDATION_ERROR', missing);
        assertEnvelope(await suite.profile.write(method, ''), 400, 'VALIDATION_ERROR', missing);
        assertEnvelope(await suite.client.send({ method, path: PATH }), 400, 'VALIDATION_ERROR', missing);
      }
      await suite.assertUnchanged();
    });

    it('rejects malformed JSON, changing nothing', async () => {
      for (const method of WRITE_METHODS) {
        assertEnvelope(await suite.profile.write(method, '{"name":'), 400, 'MALFORMED_JSON');
      }
      await suite.assertUnchanged();
    });

    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx']) {
      it(`rejects Content-Type ${type} with 415, changing nothing`, async () => {
        for (const method of WRITE_METHODS) {
          const res = await suite.profile.write(method, { name: 'Grace' }, { 'content-type': type });
          const error = assertEnvelope(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
          assert.equal(error.message, `The request body must be application/json, not ${type}.`);
        }
        await suite.assertUnchanged();
      });
    }

    it('rejects a body without a Content-Type with 415, changing nothing', async () => {
      for (const method of WRITE_METHODS) {
        const res = await suite.client.send({ method, path: PATH, body: '{"name":"Grace"}' });
        assertEnvelope(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
      }
      await suite.assertUnchanged();
    });

    const numRuns = transport === 'inject' ? 200 : 30;

    it('rejects every name made only of white space and invisible characters, changing nothing', async () => {
      const blank = textOf(BLANK, 100).filter((name) => name !== '');
      await fc.assert(
        fc.asyncProperty(blank, async (name) => {
          const res = await suite.profile.write('POST', { name });
          assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: 'name', message: NAME_RULE, value: name }]);
        }),
        { numRuns },
      );
      await suite.assertUnchanged();
    });

    it('accepts a name with a visible character among invisible ones, as sent', async () => {
      const visible = fc
        .string({ unit: 'grapheme', minLength: 1, maxLength: 4 })
        .filter((text) => /^\P{Cc}*$/u.test(text) && /[^\p{White_Space}\p{Default_Ignorable_Code_Point}]/u.test(text));
      const name = fc
        .tuple(
          textOf(BLANK, 10).map((t) => t.replace(/\p{Cc}/gu, '')),
          visible,
          textOf(BLANK, 10).map((t) => t.replace(/\p{Cc}/gu, '')),
        )
        .map((parts) => parts.join(''));
      await fc.assert(
        fc.asyncProperty(name, async (sent) => {
          const res = await suite.profile.write('POST', { name: sent });
          assert.equal(res.status, 200, res.text);
          assert.equal(res.json().name, sent);
        }),
        { numRuns },
      );
    });

    it('rejects an email with a control or bidi control character anywhere, changing nothing', async () => {
      const email = fc
        .constantFrom('ada@example.com', 'zoë@exämple.de', 'a@b.c')
        .chain((valid) => withInserted(valid, fc.constantFrom(...HIDDEN_IN_EMAIL)));
      await fc.assert(
        fc.asyncProperty(email, async (sent) => {
          const res = await suite.profile.write('PATCH', { email: sent });
          assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: 'email', message: EMAIL_RULE, value: sent }]);
        }),
        { numRuns },
      );
      await suite.assertUnchanged();
    });

    it('rejects a bio with a control other than tab and line breaks anywhere, changing nothing', async () => {
      const bio = fc
        .string({ unit: 'grapheme', maxLength: 50 })
        .chain((text) => withInserted(text, fc.constantFrom(...BIO_CONTROLS)));
      await fc.assert(
        fc.asyncProperty(bio, async (sent) => {
          const res = await suite.profile.write('PUT', { ...ADA, bio: sent });
          assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: 'bio', message: BIO_RULE, value: sent }]);
        }),
        { numRuns },
      );
      await suite.assertUnchanged();
    });

    it('reports an invalid body before a failed precondition', async () => {
      const res = await suite.profile.write('PUT', { name: '' }, { 'if-match': '"0"' });
      assertEnvelope(res, 400, 'VALIDATION_ERROR', [{ field: 'name', message: NAME_RULE, value: '' }]);
      await suite.assertUnchanged();
    });
  });

  for (const coding of [undefined, 'gzip', 'br']) {
    describe(`/api/profile If-Match and If-None-Match on writes (${transport}, answers ${coding ?? 'plain'})`, () => {
      const suite = profileSuite(connect, { seed: true, coding });

      for (const method of WRITE_METHODS) {
        it(`${method} with If-Match naming the current ETag writes`, async () => {
          assertProfile(
            await suite.profile.write(method, { name: 'Grace' }, { 'if-match': '"1"' }),
            expected(method),
            2,
          );
          assertProfile(
            await suite.profile.write(method, { name: 'Grace' }, { 'if-match': '"2"' }),
            expected(method),
            3,
          );
        });

        for (const header of ['"0"', '"2"', 'W/"1"', '1', '"1" "2"', '"01"']) {
          it(`${method} with If-Match: ${header} fails with 412, changing nothing`, async () => {
            const res = await suite.profile.write(method, { name: 'Grace' }, { 'if-match': header });
            const error = assertEnvelope(res, 412, 'PRECONDITION_FAILED');
            assert.equal(error.message, 'If-Match does not match the current ETag of the profile.');
            assert.equal(res.headers.etag, undefined);
            await suite.assertUnchanged();
          });
        }

        for (const header of ['*', '"0", "1"', 'W/"1", "1"']) {
          it(`${method} with If-Match: ${header} writes`, async () => {
            assertProfile(
              await suite.profile.write(method, { name: 'Grace' }, { 'if-match': header }),
              expected(method),
              2,
            );
          });
        }

        for (const header of ['*', '"1"', 'W/"1"']) {
          it(`${method} with If-None-Match: ${header} fails with 412, changing nothing`, async () => {
            const res = await suite.profile.write(method, { name: 'Grace' }, { 'if-none-match': header });
            const error = assertEnvelope(res, 412, 'PRECONDITION_FAILED');
            assert.equal(error.message, 'If-None-Match matches the current ETag of the profile.');
            await suite.assertUnchanged();
          });
        }

        it(`${method} with If-None-Match naming an old ETag writes`, async () => {
          assertProfile(
            await suite.profile.write(method, { name: 'Grace' }, { 'if-none-match': '"0"' }),
            expected(method),
            2,
          );
        });
      }

      it('lets a client that read, then wrote with the tag it read, write only once', async () => {
        const read = await suite.profile.get();
        const tag = String(read.headers.etag);
        assertProfile(
          await suite.profile.write('PATCH', { bio: 'First.' }, { 'if-match': tag }),
          { ...ADA, bio: 'First.' },
          2,
        );
        assertEnvelope(
          await suite.profile.write('PATCH', { bio: 'Second.' }, { 'if-match': tag }),
          412,
          'PRECONDITION_FAILED',
        );
        assertProfile(await suite.profile.get(), { ...ADA, bio: 'First.' }, 2);
      });

      it("takes the tag of the version in any coding, the client's own or another, on a write", async () => {
        for (const [tag, version] of [
          ['"1-gzip"', 2],
          ['"2-br"', 3],
          ['"3-deflate"', 4],
          ['"4-zstd"', 5],
        ] as const) {
          assertProfile(
            await suite.profile.write('PATCH', { bio: tag }, { 'if-match': tag }),
            { ...ADA, bio: tag },
            version,
          );
        }
        for (const tag of ['"4-gzip"', 'W/"5-gzip"', '"5-compress"', '"5-"', '"5-gzip-gzip"']) {
          assertEnvelope(
            await suite.profile.write('PATCH', { bio: 'x' }, { 'if-match': tag }),
            412,
            'PRECONDITION_FAILED',
          );
        }
        for (const tag of ['"5-gzip"', 'W/"5-br"']) {
          assertEnvelope(
            await suite.profile.write('PATCH', { bio: 'x' }, { 'if-none-match': tag }),
            412,
            'PRECONDITION_FAILED',
          );
        }
      });
    });
  }
}

/** The profile after writing `{name: "Grace"}` over ADA with `method`. */
function expected(method: (typeof WRITE_METHODS)[number]): Profile {
  return method === 'PUT' ? { ...EMPTY, name: 'Grace' } : { ...ADA, name: 'Grace' };
}

/**
 * The memory store with a few milliseconds between a read and what follows, as a shared store
 * reached over the network has: concurrent writers then really race. Counts how many
 * compare-and-sets lost.
 */
class RoundTripStore implements ProfileStore {
  readonly #inner = new MemoryProfileStore(0);
  lostRaces = 0;

  async get(): Promise<ProfileSnapshot> {
    const snapshot = await this.#inner.get();
    await sleep(2);
    return snapshot;
  }

  async compareAndSet(expectedVersion: number, next: Profile): Promise<ProfileSnapshot | null> {
    const stored = await this.#inner.compareAndSet(expectedVersion, next);
    if (stored === null) this.lostRaces++;
    return stored;
  }
}

const WRITERS = 50;

for (const [transport, connect] of transports) {
  for (const [storeKind, coding] of [
    ['memory', undefined],
    ['round-trip', undefined],
    ['memory', 'gzip'],
    ['round-trip', 'br'],
  ] as const) {
    describe(`/api/profile under concurrent writes (${transport}, ${storeKind} store, answers ${coding ?? 'plain'})`, () => {
      let client: Client;
      let store: RoundTripStore | undefined;
      let profile: ProfileClient;
      beforeEach(async () => {
        store = storeKind === 'round-trip' ? new RoundTripStore() : undefined;
        // Readers read as fast as the writes let them, as many times as a slow machine allows: no
        // rate limit may answer them.
        const config = { rateLimitMax: 0, ...(coding === undefined ? {} : { compressionMinBytes: 0 }) };
        client = await connect(config, { profileStore: store ?? new MemoryProfileStore(0) });
        profile = profileClient(client, coding === undefined ? {} : { 'accept-encoding': coding });
        // Over HTTP, open the connections first, so that the writes arrive together rather than
        // one connection set-up apart.
        await Promise.all(Array.from({ length: WRITERS }, () => profile.get()));
      });
      afterEach(() => client.close());

      /** With the round-trip store, writers must really have raced, or the test proves nothing. */
      function assertRaced(): void {
        if (store !== undefined) assert.ok(store.lostRaces > 0, 'some compare-and-set lost a race');
      }

      it(`lets exactly one of ${WRITERS} writers holding the same ETag win; the others get 412`, async () => {
        const tag = String((await profile.write('PUT', ADA)).headers.etag);
        const results = await Promise.all(
          Array.from({ length: WRITERS }, (_, i) =>
            profile.write('PATCH', { bio: `writer ${i}` }, { 'if-match': tag }),
          ),
        );
        const winners = results.filter((res) => res.status === 200);
        assert.equal(winners.length, 1);
        for (const res of results.filter((r) => r.status !== 200)) {
          assertEnvelope(res, 412, 'PRECONDITION_FAILED');
        }
        const winner = winners[0] as TestResponse;
        const bio = winner.json().bio as string;
        assertProfile(winner, { ...ADA, bio }, 2);
        assertProfile(await profile.get(), { ...ADA, bio }, 2);
        assertRaced();
      });

      it(`applies every one of ${WRITERS} unconditional writes: none is lost`, async () => {
        const results = await Promise.all(
          Array.from({ length: WRITERS }, (_, i) => profile.write('POST', { bio: `writer ${i}` })),
        );
        const versions = results.map((res, i) => {
          assertProfile(res, { ...EMPTY, bio: `writer ${i}` }, versionOf(res));
          return versionOf(res);
        });
        assert.deepEqual(
          versions.sort((a, b) => a - b),
          Array.from({ length: WRITERS }, (_, i) => i + 1),
        );
        const final = await profile.get();
        assert.equal(versionOf(final), WRITERS);
        // The last write to land is the one whose response carried the final version.
        assert.equal(final.text, results.find((res) => versionOf(res) === WRITERS)?.text);
        assertRaced();
      });

      it(`writes with If-Match: * all succeed, retried like unconditional ones`, async () => {
        const results = await Promise.all(
          Array.from({ length: WRITERS }, (_, i) => profile.write('PATCH', { name: `w${i}` }, { 'if-match': '*' })),
        );
        assert.deepEqual(
          results.map((res) => res.status),
          Array(WRITERS).fill(200),
        );
        assert.equal(versionOf(await profile.get()), WRITERS);
        assertRaced();
      });

      it('never shows a reader fields from two different writes', async () => {
        // Each writer writes name, email and bio that all carry its id; each write's response
        // says which version it made. Every read must then be exactly one written version.
        const written = new Map<number, string>([[0, JSON.stringify(EMPTY)]]);
        let writing = true;
        const reads: TestResponse[] = [];
        const reader = async () => {
          while (writing) {
            reads.push(await profile.get());
            // Let the writes progress: through inject, a read may never leave the microtask queue.
            await nextTurn();
          }
        };
        const readers = Array.from({ length: 4 }, reader);
        const writes = await Promise.all(
          Array.from({ length: WRITERS }, (_, i) =>
            profile.write(i % 2 === 0 ? 'PUT' : 'POST', {
              name: `writer ${i}`,
              email: `writer${i}@example.com`,
              bio: `bio of writer ${i}`,
            }),
          ),
        );
        writing = false;
        await Promise.all(readers);
        // On a busy machine a writer may lose every race it runs, and get the 503 that says so: what
        // is checked here is what readers see, so such a write is left out, having changed nothing.
        const stored = writes.filter((res) => res.status !== 503);
        for (const res of writes.filter((res) => res.status === 503)) assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
        for (const res of stored) {
          assert.equal(res.status, 200, res.text);
          written.set(versionOf(res), res.text);
        }
        assert.ok(stored.length > WRITERS / 2, `${stored.length} of ${WRITERS} writes stored`);
        assert.equal(written.size, stored.length + 1);
        assert.ok(reads.length > 0);
        for (const read of [...reads, await profile.get()]) {
          assert.equal(read.status, 200);
          const { name, email, bio } = read.json() as Profile;
          const id = name?.slice('writer '.length);
          assert.equal(email, name === null ? null : `writer${id}@example.com`, read.text);
          assert.equal(bio, name === null ? null : `bio of writer ${id}`, read.text);
          assert.equal(read.text, written.get(versionOf(read)), `version ${versionOf(read)} is what its write made`);
        }
        assertRaced();
      });
    });
  }

  describe(`/api/profile when writes keep losing races (${transport})`, () => {
    it(`gives up after ${MAX_WRITE_ATTEMPTS} attempts with 503 and Retry-After, changing nothing`, async () => {
      let attempts = 0;
      const inner = new MemoryProfileStore(0);
      const alwaysLosing: ProfileStore = {
        get: () => inner.get(),
        compareAndSet: async () => {
          attempts++;
          return null;
        },
      };
      const client = await connect({}, { profileStore: alwaysLosing });
      try {
        const res = await profileClient(client).write('POST', { name: 'Ada' });
        const error = assertEnvelope(res, 503, 'SERVICE_UNAVAILABLE');
        assert.equal(error.message, 'The profile is being changed by too many requests at once; try again.');
        assert.equal(res.headers['retry-after'], '1');
        assert.equal(attempts, MAX_WRITE_ATTEMPTS);
        assertProfile(await profileClient(client).get(), EMPTY, 0);
      } finally {
        await client.close();
      }
    });
  });
}

for (const [transport, connect] of transports) {
  describe(`the profile's ETag in each content coding (${transport})`, () => {
    const suite = profileSuite(connect, { seed: true });
    /** A bio long enough that the profile's answer is over COMPRESSION_MIN_BYTES. */
    const LONG = { ...ADA, bio: 'x'.repeat(1000) };

    it('tags a small, plain answer "2" and a large one "2-<coding>", HEAD alike', async () => {
      await suite.profile.write('PUT', LONG);
      assertProfile(await suite.profile.get({ 'accept-encoding': 'identity' }), LONG, 2);
      for (const coding of CODINGS) {
        for (const method of ['GET', 'HEAD']) {
          const res = await suite.profile.get({ 'accept-encoding': coding }, method);
          assert.equal(res.headers['content-encoding'], coding, method);
          assert.equal(res.headers.etag, `"2-${coding}"`, method);
          if (method === 'GET') assertProfile(res, LONG, 2);
        }
      }
      const small = await suite.profile.write('PUT', ADA);
      assert.equal(small.headers['content-encoding'], undefined);
      assertProfile(await suite.profile.get({ 'accept-encoding': 'gzip' }), ADA, 3);
    });

    it('answers If-None-Match naming the tag its 200 would carry, in the coding chosen now, with 304 carrying that tag', async () => {
      await suite.profile.write('PUT', LONG);
      for (const method of ['GET', 'HEAD']) {
        const gzip = { 'accept-encoding': 'gzip' };
        assertNotModified(await suite.profile.get({ ...gzip, 'if-none-match': '"2-gzip"' }, method), 2, 'gzip');
        assertNotModified(await suite.profile.get({ ...gzip, 'if-none-match': 'W/"2-gzip"' }, method), 2, 'gzip');
        assertNotModified(await suite.profile.get({ ...gzip, 'if-none-match': '"1", "2-gzip"' }, method), 2, 'gzip');
        assertNotModified(await suite.profile.get({ ...gzip, 'if-none-match': '*' }, method), 2, 'gzip');
        assertNotModified(await suite.profile.get({ 'if-none-match': '"2"' }, method), 2);
        assertNotModified(await suite.profile.get({ 'if-none-match': '*' }, method), 2);
      }
    });

    it('answers If-None-Match naming the version in another coding than the one chosen now with the 200 and its tag', async () => {
      await suite.profile.write('PUT', LONG);
      // The plain copy, to a client that now takes br: RFC 9110 (13.1.2) compares the selected representation's tag.
      const plain = await suite.profile.get({ 'accept-encoding': 'br', 'if-none-match': '"2"' });
      assert.equal(plain.headers['content-encoding'], 'br');
      assertProfile(plain, LONG, 2);
      // A client that no longer takes gzip holds no copy it can use.
      const refused = await suite.profile.get({ 'accept-encoding': 'identity', 'if-none-match': '"2-gzip"' });
      assert.equal(refused.headers['content-encoding'], undefined);
      assertProfile(refused, LONG, 2);
      assertProfile(await suite.profile.get({ 'if-none-match': 'W/"2-br"' }), LONG, 2);
      assertProfile(await suite.profile.get({ 'accept-encoding': 'gzip', 'if-none-match': '"1-gzip"' }), LONG, 2);
      // Under COMPRESSION_MIN_BYTES the answer goes plain whatever the client takes: its tag is the plain one.
      await suite.profile.write('PUT', ADA);
      assertNotModified(await suite.profile.get({ 'accept-encoding': 'br', 'if-none-match': '"3"' }), 3);
      assertProfile(await suite.profile.get({ 'accept-encoding': 'br', 'if-none-match': '"3-br"' }), ADA, 3);
    });

    it('keeps a client behind a compressing proxy safe from lost updates: the coded tag it read writes once', async () => {
      await suite.profile.write('PUT', LONG);
      const tag = String((await suite.profile.get({ 'accept-encoding': 'br' })).headers.etag);
      assert.equal(tag, '"2-br"');
      assertProfile(
        await suite.profile.write('PATCH', { name: 'Grace' }, { 'if-match': tag }),
        { ...LONG, name: 'Grace' },
        3,
      );
      assertEnvelope(
        await suite.profile.write('PATCH', { name: 'Ada' }, { 'if-match': tag }),
        412,
        'PRECONDITION_FAILED',
      );
      assertEnvelope(await suite.profile.get({ 'if-match': tag }), 412, 'PRECONDITION_FAILED');
    });
  });
}
