/** Counts the turns of the event loop in which a clock was read: one immediate per turn, whatever the clocks. */
let turn = 0;
let counting = false;
const endTurn = (): void => {
  turn += 1;
  counting = false;
};

/**
 * A clock read at most once per turn of the event loop: the first reading in a turn is kept until
 * the turn's immediates run. Reading the time is a system call on some virtual machines (some
 * 250 ns here), and under load one turn ends dozens of requests; their readings differ by at most
 * the length of the turn, which is nothing to a log line's millisecond or a rate-limit window.
 * Every clock shares one immediate per turn.
 */
export function turnClock<Time>(read: () => Time): () => Time {
  let time = undefined as Time;
  let readIn = -1;
  return () => {
    if (readIn !== turn) {
      time = read();
      readIn = turn;
      if (!counting) {
        counting = true;
        setImmediate(endTurn);
      }
    }
    return time;
  };
}
