/**
 * A clock read at most once per turn of the event loop: the first reading in a turn is kept until
 * the turn's immediates run. Reading the time is a system call on some virtual machines (some
 * 250 ns here), and under load one turn ends dozens of requests; their readings differ by at most
 * the length of the turn, which is nothing to a log line's millisecond or a rate-limit window.
 */
export function turnClock<Time>(read: () => Time): () => Time {
  let time = undefined as Time;
  let fresh = false;
  const expire = (): void => {
    fresh = false;
  };
  return () => {
    if (!fresh) {
      time = read();
      fresh = true;
      setImmediate(expire);
    }
    return time;
  };
}
