/**
 * Work done a few at a time: `take` runs its work at once while fewer than `max` are under way,
 * else when its turn comes; each must `release` its turn once done, exactly once. Waiting work
 * is taken an owner at a time in rotation, so that one owner's many wait behind others' few
 * rather than ahead of them.
 */
export class Turns {
  readonly #max: number;
  #running = 0;
  /** Each owner's waiting work, oldest first; the owner whose turn is next first. */
  readonly #waiting = new Map<string, (() => void)[]>();

  constructor(max: number) {
    this.#max = max;
  }

  take(work: () => void, owner = ''): void {
    if (this.#running < this.#max) {
      this.#running += 1;
      work();
      return;
    }
    const queue = this.#waiting.get(owner);
    if (queue === undefined) this.#waiting.set(owner, [work]);
    else queue.push(work);
  }

  release(): void {
    this.#running -= 1;
    const next = this.#waiting.entries().next().value;
    if (next === undefined) return;
    const [owner, queue] = next;
    const work = queue.shift() as () => void;
    // The owner goes to the back of the rotation, or out of it once it has nothing waiting.
    this.#waiting.delete(owner);
    if (queue.length > 0) this.#waiting.set(owner, queue);
    this.#running += 1;
    work();
  }
}
