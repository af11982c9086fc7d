import {
  expectEnvelope,
  expectEqual,
  expectKeys,
  expectObject,
  expectStatus,
  fail,
  header,
  type JsonObject,
  show,
  skip,
} from '../assert.js';
import type { Check, Context } from '../context.js';
import type { Response } from '../http.js';

const CLAUSE = 'spec 4.5, 2.5; contract: Profile';
const FIELDS = ['name', 'email', 'bio'];

interface Copy {
  profile: JsonObject;
  etag: string;
}

function expectProfile(res: Response): Copy {
  const profile = expectKeys(expectObject(res, 200), FIELDS, `${res.request.method} ${res.request.path}`);
  for (const field of FIELDS) {
    if (profile[field] !== null && typeof profile[field] !== 'string')
      fail(`${field}: a string or null`, show(profile[field]));
  }
  const etag = header(res, 'etag');
  if (etag === undefined || !/^"[^"]*"$/.test(etag))
    fail(`${res.request.method} ${res.request.path}: a strong ETag`, show(etag));
  return { profile, etag };
}

async function read(ctx: Context): Promise<Copy> {
  return expectProfile(await ctx.get('/api/profile'));
}

/** The profile before the first write of this run, and the tags its writes were answered with. */
const ORIGINAL = 'profile.original';
const WRITTEN = 'profile.written';

/** A write of this run to the profile; the tag of a successful answer is this run's, whatever the check expected. */
async function sendWrite(
  ctx: Context,
  method: string,
  ifMatch: string,
  body: string,
  contentType: string,
): Promise<Response> {
  const res = await ctx.send({
    method,
    path: '/api/profile',
    headers: { 'Content-Type': contentType, 'If-Match': ifMatch },
    body,
  });
  const etag = header(res, 'etag');
  if (res.status >= 200 && res.status < 300 && etag !== undefined) {
    const written = (ctx.state.get(WRITTEN) as Set<string> | undefined) ?? new Set<string>();
    ctx.state.set(WRITTEN, written.add(etag));
  }
  return res;
}

/** A conditional write; the first one of a run keeps the profile it found, for profile.restore. */
async function write(
  ctx: Context,
  method: string,
  body: unknown,
  contentType = 'application/json',
): Promise<{ res: Response; before: Copy }> {
  const before = await read(ctx);
  if (!ctx.state.has(ORIGINAL)) ctx.state.set(ORIGINAL, before);
  const res = await sendWrite(ctx, method, before.etag, JSON.stringify(body), contentType);
  return { res, before };
}

/** A successful write: 200 with the whole profile, as expected, under a new tag that GET then serves. */
async function expectWritten(
  ctx: Context,
  method: string,
  body: JsonObject,
  expected: (before: JsonObject) => JsonObject,
  contentType?: string,
): Promise<void> {
  const { res, before } = await write(ctx, method, body, contentType);
  const after = expectProfile(res);
  expectEqual(
    after.profile,
    expected(before.profile),
    `${method} ${res.request.path} ${JSON.stringify(body)}: the profile`,
  );
  if (after.etag === before.etag) fail('a new ETag after a change', show(after.etag));
  const now = await read(ctx);
  expectEqual(now, after, `GET ${res.request.path} after the write (profile and ETag)`);
  expectStatus(await ctx.get('/api/profile', { 'If-None-Match': before.etag }), 200);
}

const MARK = 'Conformance check';

export const profileChecks: Check[] = [
  {
    id: 'profile.read',
    group: 'profile',
    clause: CLAUSE,
    title: 'GET /api/profile answers name, email and bio, each a string or null, with a strong ETag',
    async run(ctx) {
      await read(ctx);
    },
  },
  {
    id: 'profile.not-modified',
    group: 'profile',
    clause: CLAUSE,
    title:
      'If-None-Match with the current ETag (alone, in a list, weakly, or *) is a 304 without a body; another tag a 200',
    async run(ctx) {
      const { etag } = await read(ctx);
      const res = await ctx.get('/api/profile', { 'If-None-Match': etag });
      expectStatus(res, 304);
      expectEqual(res.body.length, 0, '304 body length');
      expectEqual(header(res, 'etag'), etag, '304 ETag');
      for (const tags of [`"conformance-other", ${etag}`, '*', `W/${etag}`]) {
        expectStatus(await ctx.get('/api/profile', { 'If-None-Match': tags }), 304);
      }
      expectStatus(await ctx.get('/api/profile', { 'If-None-Match': '"conformance-other"' }), 200);
    },
  },
  {
    id: 'profile.post',
    group: 'profile',
    clause: CLAUSE,
    needs: 'write',
    title: 'POST changes only the fields sent and answers the whole profile with a new ETag',
    run: (ctx) => expectWritten(ctx, 'POST', { name: MARK }, (before) => ({ ...before, name: MARK })),
  },
  {
    id: 'profile.patch',
    group: 'profile',
    clause: CLAUSE,
    needs: 'write',
    title: 'PATCH, as application/merge-patch+json too, changes only the fields sent; null clears one',
    async run(ctx) {
      await expectWritten(ctx, 'PATCH', { bio: 'Written by the conformance kit.' }, (b) => ({
        ...b,
        bio: 'Written by the conformance kit.',
      }));
      const patch = { email: 'check@conformance.example', bio: null };
      await expectWritten(ctx, 'PATCH', patch, (b) => ({ ...b, ...patch }), 'application/merge-patch+json');
    },
  },
  {
    id: 'profile.put',
    group: 'profile',
    clause: CLAUSE,
    needs: 'write',
    title: 'PUT replaces the whole profile: the fields not sent become null',
    run: (ctx) => expectWritten(ctx, 'PUT', { name: MARK }, () => ({ name: MARK, email: null, bio: null })),
  },
  {
    id: 'profile.stale-if-match',
    group: 'profile',
    clause: CLAUSE,
    needs: 'write',
    title: 'a POST, PUT or PATCH whose If-Match is not the current ETag (strongly) is a 412 and changes nothing',
    async run(ctx) {
      const before = await read(ctx);
      for (const [method, tag] of [
        ['POST', '"conformance-stale"'],
        ['PUT', '"conformance-stale"'],
        ['PATCH', `W/${before.etag}`],
      ] as const) {
        const res = await sendWrite(ctx, method, tag, JSON.stringify({ name: 'Stale' }), 'application/json');
        expectEnvelope(res, 412, 'PRECONDITION_FAILED');
      }
      expectEqual(await read(ctx), before, 'the profile after a 412');
    },
  },
  {
    id: 'profile.invalid',
    group: 'profile',
    clause: CLAUSE,
    needs: 'write',
    title: 'every invalid field is reported at once in a 400, and nothing changes',
    async run(ctx) {
      const body = { age: 36, name: '  ', email: 'ada@example', bio: 42 };
      const { res, before } = await write(ctx, 'POST', body);
      const error = expectEnvelope(res, 400, 'VALIDATION_ERROR');
      expectEqual(error.details.map((detail) => detail.field).sort(), ['age', 'bio', 'email', 'name'], 'fields named');
      for (const [field, value] of Object.entries(body)) {
        expectEqual(error.details.find((detail) => detail.field === field)?.value, value, `the value of ${field}`);
      }
      const long = await write(ctx, 'PATCH', {
        name: 'n'.repeat(101),
        email: `${'e'.repeat(250)}@x.io`,
        bio: 'b'.repeat(1001),
      });
      expectEqual(
        expectEnvelope(long.res, 400, 'VALIDATION_ERROR').details.length,
        3,
        'details for three fields too long',
      );
      expectEqual(await read(ctx), before, 'the profile after the refused writes');
    },
  },
  {
    id: 'profile.restore',
    group: 'profile',
    clause: CLAUSE,
    needs: 'write',
    title: 'the profile found before the writes is restored, under If-Match',
    async run(ctx) {
      const original = ctx.state.get(ORIGINAL) as Copy | undefined;
      if (original === undefined) skip('nothing was written');
      const now = await read(ctx);
      if (now.etag === original.etag) return;
      const written = (ctx.state.get(WRITTEN) as Set<string> | undefined) ?? new Set<string>();
      // A tag none of this run's writes was answered with: another client's change, not to be undone.
      if (!written.has(now.etag)) {
        fail(
          `the profile as this run's writes left it (ETag ${[...written].join(' or ') || 'of a write answered 2xx'}), to restore`,
          `ETag ${now.etag}, which no answer to this run's writes carried: changed by another client; not restored`,
        );
      }
      const res = await ctx.send({
        method: 'PUT',
        path: '/api/profile',
        headers: { 'Content-Type': 'application/json', 'If-Match': now.etag },
        body: JSON.stringify(original.profile),
      });
      if (res.status !== 200)
        fail('the original profile restored (200)', `${res.status} ${show(res.text)}: not restored`);
      expectEqual(expectProfile(res).profile, original.profile, 'the restored profile');
    },
  },
];
