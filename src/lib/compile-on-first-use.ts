/**
 * A function that compiles its implementation on its first call and reuses it after. Fastify
 * compiles a validator and a serializer for every route and status code at start-up, most of
 * which (error statuses, HEAD routes) are rarely or never used; compiling each when first
 * needed lets the service answer sooner after it starts.
 */
export function compileOnFirstUse<Input, Output>(compile: () => (input: Input) => Output): (input: Input) => Output {
  let compiled: ((input: Input) => Output) | undefined;
  return (input) => {
    compiled ??= compile();
    return compiled(input);
  };
}
