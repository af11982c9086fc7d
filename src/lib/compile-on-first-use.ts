/** A value made by `make` when first asked for, and the same value after. */
export function onFirstUse<Value>(make: () => Value): () => Value {
  let made: { value: Value } | undefined;
  return () => {
    made ??= { value: make() };
    return made.value;
  };
}

/**
 * A function that compiles its implementation on its first call and reuses it after. Fastify
 * compiles a validator and a serializer for every route and status code at start-up, most of
 * which (error statuses, HEAD routes) are rarely or never used; compiling each when first
 * needed lets the service answer sooner after it starts.
 */
export function compileOnFirstUse<Input, Output>(compile: () => (input: Input) => Output): (input: Input) => Output {
  const compiled = onFirstUse(compile);
  return (input) => compiled()(input);
}
