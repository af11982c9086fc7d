/**
 * The services of the API over gRPC, by name: known before their code is loaded, so that the
 * rules of every `/api` request (rate limit, faults, headers) apply to their calls.
 */
export const GRPC_API_SERVICES = ['helloworld.Greeter', 'greeting.v1.GreetingService'] as const;
