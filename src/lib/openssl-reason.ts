/**
 * What OpenSSL said, without the code and library Node puts in front of it:
 * `error:0A00018F:SSL routines::ee key too small` is `ee key too small`.
 */
export function opensslReason(error: unknown): string {
  return (error as Error).message.replace(/^error:[0-9A-F]+:[^:]*:[^:]*:/, '');
}
