/**
 * Work done a few at a time: `take` runs its work at once while fewer than `max` are under way,
 * else when its turn comes; each must `release` its turn once done, exactly once.
 */
export class Turns {
  readonly #max: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(max: number) {
    this.#max = max;
  }

  take(work: () => void): void {
    if (this.#running >= this.#max) {
      this.#waiting.push(work);
      return;
    }
    this.#running += 1;
    work();
  }

  release(): void {
    this.#running -= 1;
    const next = this.#waiting.shift();
    if (next === undefined) return;
    this.#running += 1;
    next();
  }
}
