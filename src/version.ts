import { createRequire } from 'node:module';

// package.json sits one level above both src/ and dist/.
export const { version: VERSION } = createRequire(import.meta.url)('../package.json') as { version: string };
