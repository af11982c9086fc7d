import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { errorResponses } from '../errors.js';

const MAX_PAGE = 2_147_483_647;
const DEFAULT_PAGE = 1;

export const SearchQuery = Type.Object({
  keyword: Type.String({
    description: 'What to search for; must not be blank.',
    pattern: '\\S',
    errorMessage: 'must not be blank',
    examples: ['books'],
  }),
  page: Type.Optional(
    Type.Integer({
      description: `Page number, ${DEFAULT_PAGE} to ${MAX_PAGE}.`,
      minimum: 1,
      maximum: MAX_PAGE,
      default: DEFAULT_PAGE,
      errorMessage: `must be an integer from 1 to ${MAX_PAGE}`,
      examples: [2],
    }),
  ),
});

export const SearchResult = Type.Object(
  {
    keyword: Type.String({ examples: ['books'] }),
    page: Type.Integer({ examples: [2] }),
    results: Type.String({ examples: ["Search results for 'books' (page 2)"] }),
  },
  { additionalProperties: false, title: 'SearchResult' },
);

export const searchRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/api/search',
    {
      schema: {
        operationId: 'search',
        summary: 'Search echo',
        description: 'Echoes the search parameters back as a search-style result.',
        tags: ['search'],
        querystring: SearchQuery,
        response: { 200: SearchResult, ...errorResponses(400) },
      },
    },
    async (request) => {
      const { keyword, page = DEFAULT_PAGE } = request.query;
      return { keyword, page, results: `Search results for '${keyword}' (page ${page})` };
    },
  );
};
