import { boolean, integer } from './parsers.js';
import { concern, setting } from './setting.js';

const settings = {
  compression: setting({
    env: 'COMPRESSION',
    help: 'true, false, 1 or 0, in any case; false or 0: every answer goes out uncompressed, whatever Accept-Encoding asks (request bodies in content codings are still decoded)',
    default: true,
    parse: boolean,
  }),
  compressionMinBytes: setting({
    env: 'COMPRESSION_MIN_BYTES',
    help: 'smallest answer body, in bytes, 0 to 2147483647, sent in the content coding the client prefers (zstd where the runtime has it, br, gzip, deflate)',
    default: 1024,
    parse: integer(0, 2 ** 31 - 1),
  }),
};

/** Content codings: which answers go out compressed. */
export const CODINGS = concern({ settings });
