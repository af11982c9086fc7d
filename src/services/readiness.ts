import type { StoreHealth } from '../stores/availability.js';

/** The one check a caller may leave out: every instance shares the store, so its failure is no instance's own. */
export const EXCLUDABLE_CHECK = 'store';

/** One check's state; `reason` says why it failed, in one sentence fit for an operator. */
export interface CheckResult {
  state: 'ok' | 'failed' | 'excluded';
  reason: string | null;
}

/** The checks of readiness, in the order they are decided: the first that fails says why. */
export interface CheckResults {
  shutdown: CheckResult;
  operator: CheckResult;
  store: CheckResult;
}

/**
 * The one place that decides whether the service is ready for traffic, and if not, why: shutting
 * down, taken out of service by an operator, or the stores unable to serve. Liveness is not its
 * concern: none of these is cured by a restart.
 */
export class Readiness {
  readonly #draining: () => boolean;
  readonly #stores: StoreHealth;
  /** The request id of the operator's request that took the service out, while it is out. */
  #disabledBy: string | null = null;

  constructor(draining: () => boolean, stores: StoreHealth) {
    this.#draining = draining;
    this.#stores = stores;
  }

  /** Takes the service out of service, naming the request that did; false if it already was. */
  disable(requestId: string): boolean {
    if (this.#disabledBy !== null) return false;
    this.#disabledBy = requestId;
    return true;
  }

  /** Puts the service back in service; false if it was not out. */
  enable(): boolean {
    const was = this.#disabledBy !== null;
    this.#disabledBy = null;
    return was;
  }

  /**
   * Null when ready; otherwise why not, in one sentence fit for an operator. Shutting down wins
   * over the rest, and the store is not asked once another check has failed or when excluded.
   */
  async notReadyReason(excludeStore = false): Promise<string | null> {
    const own = this.#ownReason();
    if (own !== null || excludeStore) return own;
    return this.#storeReason();
  }

  /** Every check with its state, the store asked unless excluded. */
  async checks(excludeStore = false): Promise<CheckResults> {
    const store = excludeStore ? null : await this.#storeReason();
    return {
      shutdown: result(this.#draining() ? SHUTTING_DOWN : null),
      operator: result(this.#disabledBy === null ? null : this.#disabledReason(this.#disabledBy)),
      store: excludeStore ? { state: 'excluded', reason: null } : result(store),
    };
  }

  #ownReason(): string | null {
    if (this.#draining()) return SHUTTING_DOWN;
    return this.#disabledBy === null ? null : this.#disabledReason(this.#disabledBy);
  }

  #disabledReason(requestId: string): string {
    return `Not ready: taken out of service by an operator (POST /readyz/disable, request ${requestId}).`;
  }

  async #storeReason(): Promise<string | null> {
    const reason = await this.#stores.unavailableReason();
    return reason === null ? null : `Not ready: ${reason}`;
  }
}

const SHUTTING_DOWN = 'The service is shutting down.';

function result(reason: string | null): CheckResult {
  return { state: reason === null ? 'ok' : 'failed', reason };
}
