import type { StoreHealth } from '../stores/availability.js';

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

  /** Null when ready; otherwise why not, in one sentence fit for an operator. Shutting down wins over the rest. */
  async notReadyReason(): Promise<string | null> {
    if (this.#draining()) return 'The service is shutting down.';
    if (this.#disabledBy !== null) {
      return `Not ready: taken out of service by an operator (POST /readyz/disable, request ${this.#disabledBy}).`;
    }
    const reason = await this.#stores.unavailableReason();
    return reason === null ? null : `Not ready: ${reason}`;
  }
}
