/** How many requests a key has made in its current window, and how long that window still runs. */
export interface RateLimitCount {
  /** Requests counted in the current window, this one included: 1 for the first. */
  readonly current: number;
  /** Milliseconds until the window ends and the count starts again from 0; always more than 0. */
  readonly ttl: number;
}

/**
 * Where the request counters of the rate limiter live, one per client key, each in a fixed
 * window that starts with the key's first request. A store shared by several instances of the
 * service (Redis), so that they limit a client as one, answers asynchronously; one in this
 * process's memory answers at once, so that counting a request costs no promise.
 */
export interface RateLimitStore {
  /**
   * Counts one request by `key`: adds 1 to the count of its current window, or starts a new
   * window of `windowMs` milliseconds with a count of 1 if it has none or it has ended. The
   * count is to be read at once: the store may reuse the object for its next answer.
   */
  incr(key: string, windowMs: number): RateLimitCount | Promise<RateLimitCount>;
}
