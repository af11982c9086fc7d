import { expectEqual, expectKeys, expectObject, expectValidation } from '../assert.js';
import type { Check } from '../context.js';

const CLAUSE = 'spec 4.3; contract: The four specified endpoints';

export const searchChecks: Check[] = [
  {
    id: 'search.result',
    group: 'search',
    clause: 'spec 4.3, 2.3',
    title: 'keyword and page come back, with the results text built from them',
    async run(ctx) {
      const body = expectKeys(
        expectObject(await ctx.get('/api/search?keyword=books&page=2'), 200),
        ['keyword', 'page', 'results'],
        'search result',
      );
      expectEqual(body, { keyword: 'books', page: 2, results: "Search results for 'books' (page 2)" }, 'body');
    },
  },
  {
    id: 'search.default-page',
    group: 'search',
    clause: 'spec 4.3, 2.3',
    title: 'page defaults to 1',
    async run(ctx) {
      const body = expectObject(await ctx.get('/api/search?keyword=books'), 200);
      expectEqual(body, { keyword: 'books', page: 1, results: "Search results for 'books' (page 1)" }, 'body');
    },
  },
  {
    id: 'search.unicode-keyword',
    group: 'search',
    clause: CLAUSE,
    title: 'a Unicode keyword, and one with reserved characters, come back exactly',
    async run(ctx) {
      for (const keyword of ['Wörld 🌍', 'a&b=c+d', "it's"]) {
        const body = expectObject(await ctx.get(`/api/search?keyword=${encodeURIComponent(keyword)}`), 200);
        expectEqual(body.keyword, keyword, 'keyword');
      }
    },
  },
  {
    id: 'search.max-page',
    group: 'search',
    clause: CLAUSE,
    title: 'page 2147483647 is accepted, and unknown parameters are ignored',
    async run(ctx) {
      const body = expectObject(await ctx.get('/api/search?keyword=x&page=2147483647&colour=red'), 200);
      expectEqual(body.page, 2147483647, 'page');
    },
  },
  {
    id: 'search.keyword-required',
    group: 'search',
    clause: CLAUSE,
    title: 'a missing or blank keyword is a 400 VALIDATION_ERROR naming keyword',
    async run(ctx) {
      expectValidation(await ctx.get('/api/search'), 'keyword', null);
      expectValidation(await ctx.get('/api/search?keyword='), 'keyword', '');
      expectValidation(await ctx.get('/api/search?keyword=%20%20'), 'keyword', '  ');
    },
  },
  {
    id: 'search.page-invalid',
    group: 'search',
    clause: CLAUSE,
    title: 'a page that is not an integer from 1 to 2147483647 is a 400 naming page, with the value as sent',
    async run(ctx) {
      for (const page of ['abc', '1.5', '0', '-1', '2147483648', '1e2', ' 1']) {
        expectValidation(await ctx.get(`/api/search?keyword=x&page=${encodeURIComponent(page)}`), 'page', page);
      }
    },
  },
  {
    id: 'search.repeated-parameter',
    group: 'search',
    clause: CLAUSE,
    title: 'a repeated parameter is a 400 naming it',
    async run(ctx) {
      expectValidation(await ctx.get('/api/search?keyword=x&page=1&page=2'), 'page');
      expectValidation(await ctx.get('/api/search?keyword=a&keyword=b'), 'keyword');
    },
  },
  {
    id: 'search.all-errors',
    group: 'search',
    clause: 'spec 7.2 rule 4',
    title: 'every invalid field is named at once',
    async run(ctx) {
      const error = expectValidation(await ctx.get('/api/search?page=abc'), 'keyword', null);
      expectValidation(await ctx.get('/api/search?page=abc'), 'page', 'abc');
      expectEqual(error.details.length, 2, 'number of details');
    },
  },
  {
    id: 'search.bad-percent-encoding',
    group: 'search',
    clause: 'contract: Rate limiting, versioning, limits (percent-encoding)',
    title: 'a query value that is not percent-encoded UTF-8 is a 400 naming the parameter',
    async run(ctx) {
      for (const value of ['%ED%A0%80', '%ZZ', '%', '%C3']) {
        expectValidation(await ctx.get(`/api/search?keyword=${value}`), 'keyword');
      }
    },
  },
];
