import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ServerSentEvent, serverSentEvents } from '../../packages/client/src/event-stream.js';

/** A body that arrives in the pieces given. */
function body(...pieces: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const piece of pieces) controller.enqueue(encoder.encode(piece));
      controller.close();
    },
  });
}

async function all(stream: ReadableStream<Uint8Array>): Promise<ServerSentEvent[]> {
  const events: ServerSentEvent[] = [];
  for await (const event of serverSentEvents(stream)) events.push(event);
  return events;
}

describe('serverSentEvents', () => {
  it('reads events as the HTML standard dispatches them: fields, comments, lines joined, the last id kept', async () => {
    const events = await all(
      body(': keep-alive\n\n', 'id: 1\nevent: greeting\ndata: {"a":1}\n\n', 'data: one\ndata:two\n\n', 'id\n\n'),
    );
    assert.deepEqual(events, [
      { id: '1', event: 'greeting', data: '{"a":1}' },
      { id: '1', event: 'message', data: 'one\ntwo' },
    ]);
  });

  it('takes CRLF, CR and LF line ends, a CRLF split between two pieces, and a multi-byte character split too', async () => {
    const euro = new TextEncoder().encode('€');
    const split = new ReadableStream<Uint8Array>({
      start(controller) {
        const encoder = new TextEncoder();
        controller.enqueue(encoder.encode('id: 7\r'));
        controller.enqueue(encoder.encode('\ndata: a'));
        controller.enqueue(euro.subarray(0, 1));
        controller.enqueue(euro.subarray(1));
        controller.enqueue(encoder.encode('\r\n\r\ndata: b\r\rdata: c\n\n'));
        controller.close();
      },
    });
    assert.deepEqual(await all(split), [
      { id: '7', event: 'message', data: 'a€' },
      { id: '7', event: 'message', data: 'b' },
      { id: '7', event: 'message', data: 'c' },
    ]);
  });

  it('drops an event the stream ended in the middle of', async () => {
    assert.deepEqual(await all(body('data: whole\n\ndata: half')), [{ id: '', event: 'message', data: 'whole' }]);
  });
});
