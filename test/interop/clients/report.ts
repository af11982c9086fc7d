/** What a generated client's call gave: its status and body, as the interop suite reads them. */
export interface Answer {
  status: number;
  data: unknown;
}

/** Makes every call in turn and prints each answer, one JSON line per operation. */
export async function report(calls: Record<string, () => Promise<Answer>>): Promise<void> {
  for (const [operation, call] of Object.entries(calls)) {
    const { status, data } = await call();
    console.log(JSON.stringify({ operation, status, data }));
  }
}
