import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assertEnvelope, type Client, transports } from '../helpers.js';

const CODE_MESSAGE = 'must be a three-letter currency code';
const AMOUNT_MESSAGE = 'must be a decimal number from 0 to 1000000000000 with at most 10 fraction digits';
const UNSUPPORTED = 'is not a supported currency';

for (const [transport, connect] of transports) {
  describe(`GET /api/exchange (${transport})`, () => {
    let client: Client;
    before(async () => {
      client = await connect();
    });
    after(() => client.close());

    function exchange(query: string) {
      return client.send({ path: `/api/exchange${query}` });
    }

    /** Asserts a 200 whose body is exactly this text: every digit of every number counts. */
    async function assertConverted(query: string, expected: string): Promise<void> {
      const res = await exchange(query);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal(typeof res.headers['x-request-id'], 'string');
      assert.equal(res.text, expected);
    }

    it('converts 100 USD to EUR at 0.92', async () => {
      await assertConverted(
        '?from=USD&to=EUR&amount=100',
        '{"from":"USD","to":"EUR","amount":100,"rate":0.92,"result":92}',
      );
    });

    it('rounds to the target’s minor units: 0 (JPY), 2 (USD) and 3 (KWD)', async () => {
      await assertConverted(
        '?from=USD&to=JPY&amount=100.5',
        '{"from":"USD","to":"JPY","amount":100.5,"rate":150.85,"result":15160}',
      );
      await assertConverted(
        '?from=KWD&to=USD&amount=100',
        '{"from":"KWD","to":"USD","amount":100,"rate":3.249919,"result":324.99}',
      );
      await assertConverted(
        '?from=EUR&to=KWD&amount=250',
        '{"from":"EUR","to":"KWD","amount":250,"rate":0.334457,"result":83.614}',
      );
    });

    it('rounds a result that is exactly halfway to the even neighbour, both ways', async () => {
      // 0.125 × 0.92 = 0.115 → 0.12 and 0.375 × 0.92 = 0.345 → 0.34 (half-up would give 0.35).
      await assertConverted(
        '?from=USD&to=EUR&amount=0.125',
        '{"from":"USD","to":"EUR","amount":0.125,"rate":0.92,"result":0.12}',
      );
      await assertConverted(
        '?from=USD&to=EUR&amount=0.375',
        '{"from":"USD","to":"EUR","amount":0.375,"rate":0.92,"result":0.34}',
      );
      // 10 × 150.85 = 1508.5 → 1508 and 30 × 150.85 = 4525.5 → 4526.
      await assertConverted(
        '?from=USD&to=JPY&amount=10',
        '{"from":"USD","to":"JPY","amount":10,"rate":150.85,"result":1508}',
      );
      await assertConverted(
        '?from=USD&to=JPY&amount=30',
        '{"from":"USD","to":"JPY","amount":30,"rate":150.85,"result":4526}',
      );
      // 0.68775 × 0.92 / 0.786 = 0.805 exactly, although 0.92 / 0.786 has no finite decimal form.
      await assertConverted(
        '?from=GBP&to=EUR&amount=0.68775',
        '{"from":"GBP","to":"EUR","amount":0.68775,"rate":1.170483,"result":0.8}',
      );
    });

    it('answers the same currency with rate 1 and the amount unchanged', async () => {
      await assertConverted(
        '?from=EUR&to=EUR&amount=12.345',
        '{"from":"EUR","to":"EUR","amount":12.345,"rate":1,"result":12.345}',
      );
      await assertConverted(
        '?from=jpy&to=JPY&amount=1.5',
        '{"from":"JPY","to":"JPY","amount":1.5,"rate":1,"result":1.5}',
      );
    });

    it('reads codes in any case and answers them in upper case', async () => {
      await assertConverted(
        '?from=usd&to=eUr&amount=100',
        '{"from":"USD","to":"EUR","amount":100,"rate":0.92,"result":92}',
      );
    });

    it('converts the largest amount, with results beyond 2^53 exact', async () => {
      await assertConverted(
        '?from=USD&to=EUR&amount=1000000000000',
        '{"from":"USD","to":"EUR","amount":1000000000000,"rate":0.92,"result":920000000000}',
      );
      await assertConverted(
        '?from=KWD&to=VND&amount=1000000000000',
        '{"from":"KWD","to":"VND","amount":1000000000000,"rate":80484.237894,"result":80484237894052649}',
      );
      await assertConverted(
        '?from=USD&to=EUR&amount=1000000000000.0000000000',
        '{"from":"USD","to":"EUR","amount":1000000000000,"rate":0.92,"result":920000000000}',
      );
    });

    it('keeps every one of 10 fraction digits', async () => {
      await assertConverted(
        '?from=USD&to=EUR&amount=123.4567890123',
        '{"from":"USD","to":"EUR","amount":123.4567890123,"rate":0.92,"result":113.58}',
      );
      await assertConverted(
        '?from=USD&to=USD&amount=999999999999.9999999999',
        '{"from":"USD","to":"USD","amount":999999999999.9999999999,"rate":1,"result":999999999999.9999999999}',
      );
      await assertConverted(
        '?from=USD&to=EUR&amount=0.0000000001',
        '{"from":"USD","to":"EUR","amount":0.0000000001,"rate":0.92,"result":0}',
      );
    });

    it('converts 0, and reads leading and trailing zeros as the same number', async () => {
      await assertConverted('?from=USD&to=EUR&amount=0', '{"from":"USD","to":"EUR","amount":0,"rate":0.92,"result":0}');
      await assertConverted(
        '?from=USD&to=EUR&amount=00100.500',
        '{"from":"USD","to":"EUR","amount":100.5,"rate":0.92,"result":92.46}',
      );
    });

    it('ignores unknown parameters', async () => {
      await assertConverted(
        '?from=USD&to=EUR&amount=100&round=up',
        '{"from":"USD","to":"EUR","amount":100,"rate":0.92,"result":92}',
      );
    });

    const badAmounts: [string, unknown][] = [
      ['-1', '-1'],
      ['-0', '-0'],
      ['%2B1', '+1'],
      ['+1', ' 1'],
      ['1000000000000.01', '1000000000000.01'],
      ['1000000000000.0000000001', '1000000000000.0000000001'],
      ['1000000000001', '1000000000001'],
      ['1.00000000001', '1.00000000001'],
      ['0.12345678901', '0.12345678901'],
      ['abc', 'abc'],
      ['1e3', '1e3'],
      ['0x10', '0x10'],
      ['.5', '.5'],
      ['5.', '5.'],
      ['1,5', '1,5'],
      ['NaN', 'NaN'],
      ['', ''],
    ];
    for (const [amount, value] of badAmounts) {
      it(`rejects amount=${amount} with the value as sent`, async () => {
        assertEnvelope(await exchange(`?from=USD&to=EUR&amount=${amount}`), 400, 'VALIDATION_ERROR', [
          { field: 'amount', message: AMOUNT_MESSAGE, value },
        ]);
      });
    }

    it('rejects a repeated amount with the values as sent', async () => {
      assertEnvelope(await exchange('?from=USD&to=EUR&amount=1&amount=2'), 400, 'VALIDATION_ERROR', [
        { field: 'amount', message: 'must be given once', value: ['1', '2'] },
      ]);
    });

    for (const code of ['US', 'USDD', 'U1D', '', 'U-D', '%C3%9CSD', '%20USD']) {
      it(`rejects the malformed code ${JSON.stringify(code)} in from and in to`, async () => {
        const value = decodeURIComponent(code);
        assertEnvelope(await exchange(`?from=${code}&to=EUR&amount=1`), 400, 'VALIDATION_ERROR', [
          { field: 'from', message: CODE_MESSAGE, value },
        ]);
        assertEnvelope(await exchange(`?from=USD&to=${code}&amount=1`), 400, 'VALIDATION_ERROR', [
          { field: 'to', message: CODE_MESSAGE, value },
        ]);
      });
    }

    it('rejects repeated codes with the values as sent', async () => {
      assertEnvelope(await exchange('?from=USD&from=EUR&to=EUR&to=EUR&amount=1'), 400, 'VALIDATION_ERROR', [
        { field: 'from', message: 'must be given once', value: ['USD', 'EUR'] },
        { field: 'to', message: 'must be given once', value: ['EUR', 'EUR'] },
      ]);
    });

    it('requires every parameter, reporting all at once', async () => {
      assertEnvelope(await exchange(''), 400, 'VALIDATION_ERROR', [
        { field: 'from', message: 'is required', value: null },
        { field: 'to', message: 'is required', value: null },
        { field: 'amount', message: 'is required', value: null },
      ]);
      assertEnvelope(await exchange('?to=EUR&amount=1'), 400, 'VALIDATION_ERROR', [
        { field: 'from', message: 'is required', value: null },
      ]);
      assertEnvelope(await exchange('?from=U1D&to=EUR&amount=1000000000000.5'), 400, 'VALIDATION_ERROR', [
        { field: 'from', message: CODE_MESSAGE, value: 'U1D' },
        { field: 'amount', message: AMOUNT_MESSAGE, value: '1000000000000.5' },
      ]);
    });

    it('answers 422 for a well-formed code that is not in the table, with the value as sent', async () => {
      const from = assertEnvelope(await exchange('?from=zzz&to=EUR&amount=1'), 422, 'UNSUPPORTED_CURRENCY', [
        { field: 'from', message: UNSUPPORTED, value: 'zzz' },
      ]);
      assert.equal(from.message, 'No exchange rate for ZZZ.');
      assertEnvelope(await exchange('?from=USD&to=ZZZ&amount=1'), 422, 'UNSUPPORTED_CURRENCY', [
        { field: 'to', message: UNSUPPORTED, value: 'ZZZ' },
      ]);
    });

    it('names both codes when neither is in the table', async () => {
      const error = assertEnvelope(await exchange('?from=ZZZ&to=ABC&amount=1'), 422, 'UNSUPPORTED_CURRENCY', [
        { field: 'from', message: UNSUPPORTED, value: 'ZZZ' },
        { field: 'to', message: UNSUPPORTED, value: 'ABC' },
      ]);
      assert.equal(error.message, 'No exchange rate for ZZZ and ABC.');
    });

    it('reports malformed input before unsupported codes', async () => {
      assertEnvelope(await exchange('?from=ZZZ&to=EUR&amount=-1'), 400, 'VALIDATION_ERROR', [
        { field: 'amount', message: AMOUNT_MESSAGE, value: '-1' },
      ]);
      assertEnvelope(await exchange('?from=ZZZ&to=E1R&amount=1'), 400, 'VALIDATION_ERROR', [
        { field: 'to', message: CODE_MESSAGE, value: 'E1R' },
      ]);
    });

    it('answers HEAD like GET, without a body', async () => {
      const res = await client.send({ method: 'HEAD', path: '/api/exchange?from=USD&to=EUR&amount=100' });
      assert.equal(res.status, 200);
      assert.equal(res.text, '');
    });
  });
}
