import { createRequire } from 'node:module';

// package.json sits one level above both src/ and dist/.
export const { version: VERSION, license: LICENSE } = createRequire(import.meta.url)('../package.json') as {
  version: string;
  license: string;
};

/** The one version of the API there is: what `API-Version` says and what clients may ask for. */
export const API_VERSION = '1';
