import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  EMPTY_PROFILE,
  entityTag,
  evaluatePreconditions,
  mergeProfile,
  type Profile,
  replaceProfile,
} from '../../src/domain/profile.js';

const ADA: Profile = { name: 'Ada', email: 'ada@example.com', bio: 'Wrote the first program.' };

const value = fc.option(fc.string(), { nil: null });
const profile = fc.record({ name: value, email: value, bio: value });
const fields = fc.record({ name: value, email: value, bio: value }, { requiredKeys: [] });

describe('mergeProfile', () => {
  it('changes only the fields given', () => {
    assert.deepEqual(mergeProfile(ADA, { bio: 'Mathematician.' }), { ...ADA, bio: 'Mathematician.' });
    assert.deepEqual(mergeProfile(ADA, {}), ADA);
  });

  it('sets a field given as null to null', () => {
    assert.deepEqual(mergeProfile(ADA, { email: null }), { ...ADA, email: null });
  });

  it('ignores anything but the three fields, and leaves its inputs alone', () => {
    const sent = JSON.parse('{"__proto__":{"name":"x"},"constructor":"y","name":"Grace"}');
    const current = { ...ADA };
    assert.deepEqual(mergeProfile(current, sent), { ...ADA, name: 'Grace' });
    assert.deepEqual(mergeProfile(current, JSON.parse('{"__proto__":{"name":"x"}}')), ADA);
    assert.deepEqual(current, ADA);
  });

  it('is, for any profile and fields, the fields given over the profile', () => {
    fc.assert(
      fc.property(profile, fields, (current, given) => {
        assert.deepEqual(mergeProfile(current, given), { ...current, ...given });
      }),
    );
  });
});

describe('replaceProfile', () => {
  it('sets the fields not given to null', () => {
    assert.deepEqual(replaceProfile({ name: 'Ada' }), { name: 'Ada', email: null, bio: null });
    assert.deepEqual(replaceProfile({}), EMPTY_PROFILE);
  });

  it('is, for any fields, the fields given over the empty profile', () => {
    fc.assert(
      fc.property(fields, (given) => {
        assert.deepEqual(replaceProfile(given), { ...EMPTY_PROFILE, ...given });
      }),
    );
  });
});

describe('EMPTY_PROFILE', () => {
  it('is all null and cannot be changed', () => {
    assert.deepEqual(EMPTY_PROFILE, { name: null, email: null, bio: null });
    assert.ok(Object.isFrozen(EMPTY_PROFILE));
  });
});

describe('entityTag', () => {
  it('is the version in quotes', () => {
    assert.equal(entityTag(0), '"0"');
    assert.equal(entityTag(42), '"42"');
  });
});

describe('evaluatePreconditions (version 3)', () => {
  const check = (ifMatch?: string, ifNoneMatch?: string) => evaluatePreconditions({ ifMatch, ifNoneMatch }, 3);

  it('proceeds without preconditions', () => {
    assert.equal(check(), 'proceed');
  });

  for (const header of ['"3"', '*', ' * ', '"1", "3"', '"1","3"', 'W/"1", "3"', '"a,b", "3"', ', "3" ,,']) {
    it(`If-Match ${header} matches`, () => {
      assert.equal(check(header), 'proceed');
    });
  }

  for (const header of [
    '"2"',
    'W/"3"',
    '3',
    '"3',
    '3"',
    '"03"',
    'w/"3"',
    '"3" x',
    '"1" "3"',
    'x"3"',
    '',
    '"*"',
    '"3 "',
  ]) {
    it(`If-Match ${JSON.stringify(header)} does not (strong comparison)`, () => {
      assert.equal(check(header), 'if-match-failed');
    });
  }

  for (const header of ['"3"', 'W/"3"', '*', '"1", W/"3"', 'W/"1",W/"3"', 'junk, "3"']) {
    it(`If-None-Match ${header} matches (weak comparison)`, () => {
      assert.equal(check(undefined, header), 'if-none-match-failed');
    });
  }

  for (const header of ['"2"', '3', 'W/3', '"1", "4"', '']) {
    it(`If-None-Match ${JSON.stringify(header)} does not`, () => {
      assert.equal(check(undefined, header), 'proceed');
    });
  }

  it('checks If-Match before If-None-Match', () => {
    assert.equal(check('"2"', '"3"'), 'if-match-failed');
    assert.equal(check('"3"', '"3"'), 'if-none-match-failed');
    assert.equal(check('"3"', '"2"'), 'proceed');
  });

  it('matches a list of tags exactly when one of them names the version', () => {
    const tag = fc.record({ weak: fc.boolean(), opaque: fc.constantFrom('1', '3', '03', '3,3', 'x', '') });
    const space = fc.constantFrom('', ' ', '\t', ' \t ');
    fc.assert(
      fc.property(fc.array(fc.tuple(tag, space, space), { minLength: 1 }), (tags) => {
        const header = tags
          .map(([t, before, after]) => `${before}${t.weak ? 'W/' : ''}"${t.opaque}"${after}`)
          .join(',');
        const strong = tags.some(([t]) => t.opaque === '3' && !t.weak);
        const weak = tags.some(([t]) => t.opaque === '3');
        assert.equal(check(header), strong ? 'proceed' : 'if-match-failed', header);
        assert.equal(check(undefined, header), weak ? 'if-none-match-failed' : 'proceed', header);
      }),
    );
  });

  it('never throws or loops, whatever the header', () => {
    const header = fc.string({ unit: fc.constantFrom('"', ',', ' ', '\t', 'W', '/', '3', '*', 'x'), maxLength: 40 });
    fc.assert(
      fc.property(header, header, (ifMatch, ifNoneMatch) => {
        assert.ok(['proceed', 'if-match-failed', 'if-none-match-failed'].includes(check(ifMatch, ifNoneMatch)));
      }),
      { numRuns: 1000 },
    );
  });
});
