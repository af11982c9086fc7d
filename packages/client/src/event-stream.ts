/** One server-sent event as the HTML standard's parser dispatches it. */
export interface ServerSentEvent {
  /** The last `id` field seen so far in the stream (the standard's last event ID). */
  id: string;
  /** `event`, or `message` when the event names none. */
  event: string;
  /** The `data` lines, joined by line feeds. */
  data: string;
}

/**
 * The events of a `text/event-stream` body as they arrive (the HTML standard, 9.2.6): lines end
 * with CR, LF or CRLF, comments are skipped, an event without data is not dispatched. `retry` is
 * left to the caller, which decides when to reconnect.
 */
export async function* serverSentEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  let lastId = '';
  let event = '';
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffered += value;
      for (;;) {
        const end = buffered.search(/[\r\n]/);
        // A CR at the end of what came may be the first half of a CRLF: wait for the next piece.
        if (end < 0 || (buffered[end] === '\r' && end === buffered.length - 1)) break;
        const line = buffered.slice(0, end);
        buffered = buffered.slice(buffered.startsWith('\r\n', end) ? end + 2 : end + 1);
        if (line === '') {
          if (data.length > 0) yield { id: lastId, event: event === '' ? 'message' : event, data: data.join('\n') };
          event = '';
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(line.startsWith(' ', colon + 1) ? colon + 2 : colon + 1);
        if (field === 'data') data.push(text);
        else if (field === 'event') event = text;
        else if (field === 'id' && !text.includes('\0')) lastId = text;
      }
    }
  } finally {
    // Left early (the caller stopped, or failed): the connection is let go, and the stream with it.
    await reader.cancel().catch(() => {});
  }
}
