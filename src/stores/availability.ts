/** Whether the stores can serve requests: what `/readyz` asks. */
export interface StoreHealth {
  /**
   * Null when the stores can serve; otherwise why not, in one sentence fit for an operator
   * (never a secret). May ask the store itself, within its timeout.
   */
  unavailableReason(): Promise<string | null>;
}

/** Stores in this process's memory are always there. */
export const ALWAYS_AVAILABLE: StoreHealth = { unavailableReason: async () => null };

/**
 * A store could not do what was asked: it is unreachable, too slow or failing. Thrown by every
 * store call that fails for such a reason, whatever the store; the client gets a 503.
 */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}
