import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { CURRENCIES, type Currency, findCurrency, RATES_AS_OF } from '../../src/domain/currencies.js';
import { AMOUNT_PATTERN, convert } from '../../src/domain/exchange.js';
import { Decimal } from '../../src/lib/decimal.js';

function currency(code: string): Currency {
  const found = findCurrency(code);
  assert.ok(found, code);
  return found;
}

/** A conversion as plain-notation text, the way the service writes it. */
function converted(amount: string, from: string, to: string): { amount: string; rate: string; result: string } {
  const { amount: value, rate, result } = convert(amount, currency(from), currency(to));
  return { amount: value.toFixed(), rate: rate.toFixed(), result: result.toFixed() };
}

describe('the currency table', () => {
  it('has at least 20 ISO 4217 currencies, each once, in code order', () => {
    assert.ok(CURRENCIES.length >= 20);
    const codes = CURRENCIES.map((c) => c.code);
    assert.ok(codes.every((code) => /^[A-Z]{3}$/.test(code)));
    assert.deepEqual(codes, [...new Set(codes)].sort());
    assert.ok(CURRENCIES.every((c) => c.name.trim().length > 0));
  });

  it('gives the minor units of ISO 4217', () => {
    const units = (code: string) => currency(code).minor_units;
    assert.deepEqual(['JPY', 'KRW', 'KWD', 'BHD', 'USD', 'EUR'].map(units), [0, 0, 3, 3, 2, 2]);
    assert.ok(CURRENCIES.every((c) => [0, 2, 3].includes(c.minor_units)));
  });

  it('states rates per US dollar as positive decimal strings, dated', () => {
    assert.equal(currency('USD').rate, '1');
    assert.equal(currency('EUR').rate, '0.92');
    for (const { code, rate } of CURRENCIES) {
      assert.match(rate, /^\d+(?:\.\d*[1-9])?$/, code);
      assert.ok(new Decimal(rate).gt(0), code);
    }
    assert.match(RATES_AS_OF, /^\d{4}-\d{2}-\d{2}$/);
    assert.equal(new Date(`${RATES_AS_OF}T00:00:00Z`).toISOString().slice(0, 10), RATES_AS_OF);
  });

  it('finds a currency by code in any case', () => {
    assert.equal(findCurrency('eur')?.name, 'Euro');
    assert.equal(findCurrency('Jpy')?.code, 'JPY');
    assert.equal(findCurrency('ZZZ'), undefined);
  });
});

describe('AMOUNT_PATTERN', () => {
  const pattern = new RegExp(AMOUNT_PATTERN);

  it('accepts plain decimals from 0 to 10^12 with up to 10 fraction digits', () => {
    for (const amount of [
      '0',
      '0.0',
      '100',
      '0100',
      '92.5',
      '0.0000000001',
      '999999999999.9999999999',
      '1000000000000',
      '1000000000000.0000000000',
      '0001000000000000',
    ]) {
      assert.ok(pattern.test(amount), amount);
    }
  });

  it('rejects signs, exponents, bare points, more digits and larger amounts', () => {
    for (const amount of [
      '',
      '-1',
      '-0',
      '+1',
      '1e3',
      '.5',
      '5.',
      '1.2.3',
      ' 1',
      '1 ',
      '0x10',
      'abc',
      '1,5',
      '1.00000000000',
      '1000000000000.01',
      '1000000000000.0000000001',
      '1000000000001',
      '10000000000000',
      '١٢',
    ]) {
      assert.ok(!pattern.test(amount), amount);
    }
  });

  it('agrees with a decimal reading of the rule for any text of digits and points', () => {
    const text = fc.string({ unit: fc.constantFrom('0', '1', '9', '.'), maxLength: 30 });
    const nearMax = fc
      .tuple(fc.constantFrom('', '0', '00'), fc.constantFrom('999999999999', '1000000000000', '1000000000001'))
      .chain(([zeros, whole]) =>
        fc.string({ unit: fc.constantFrom('0', '1', '9'), maxLength: 12 }).map((f) => `${zeros}${whole}.${f}`),
      );
    fc.assert(
      fc.property(fc.oneof(text, nearMax), (amount) => {
        const expected =
          /^\d+(?:\.\d+)?$/.test(amount) &&
          (amount.split('.')[1] ?? '').length <= 10 &&
          new Decimal(amount).lte('1000000000000');
        assert.equal(pattern.test(amount), expected, amount);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('convert', () => {
  it('converts at the table’s cross rate', () => {
    assert.deepEqual(converted('100', 'USD', 'EUR'), { amount: '100', rate: '0.92', result: '92' });
    assert.deepEqual(converted('100', 'EUR', 'USD'), { amount: '100', rate: '1.086957', result: '108.7' });
    assert.deepEqual(converted('100', 'GBP', 'JPY'), { amount: '100', rate: '191.92112', result: '19192' });
  });

  it('rounds the result to the target’s minor units: 0, 2 and 3', () => {
    assert.equal(converted('100', 'USD', 'JPY').result, '15085');
    assert.equal(converted('100', 'KWD', 'USD').result, '324.99');
    assert.equal(converted('100', 'KWD', 'USD').rate, '3.249919');
    assert.equal(converted('100', 'USD', 'KWD').result, '30.77');
    assert.equal(converted('1', 'KRW', 'KWD').result, '0');
  });

  it('rounds halfway results to the even neighbour, both ways', () => {
    // 0.125 × 0.92 = 0.115 and 0.375 × 0.92 = 0.345: half-up would give 0.12 and 0.35.
    assert.equal(converted('0.125', 'USD', 'EUR').result, '0.12');
    assert.equal(converted('0.375', 'USD', 'EUR').result, '0.34');
    // 10 × 150.85 = 1508.5 and 30 × 150.85 = 4525.5.
    assert.equal(converted('10', 'USD', 'JPY').result, '1508');
    assert.equal(converted('30', 'USD', 'JPY').result, '4526');
    // 5 × 0.3077 = 1.5385 and 15 × 0.3077 = 4.6155.
    assert.equal(converted('5', 'USD', 'KWD').result, '1.538');
    assert.equal(converted('15', 'USD', 'KWD').result, '4.616');
  });

  it('sees an exact tie through a cross rate with no finite decimal form', () => {
    // 0.68775 × 0.92 / 0.786 = 0.805 exactly, so half-even gives 0.80. Multiplying by the
    // 50-digit quotient 0.92 / 0.786 first would land just above the tie, at 0.81.
    assert.equal(converted('0.68775', 'GBP', 'EUR').result, '0.8');
    const cross = new Decimal('0.92').div('0.786');
    assert.equal(new Decimal('0.68775').times(cross).toDecimalPlaces(2).toFixed(), '0.81');
  });

  it('rounds the rate half-even to 6 decimals', () => {
    const unit: Currency = { code: 'AAA', name: 'A', minor_units: 2, rate: '1' };
    const to = (rate: string): Currency => ({ code: 'BBB', name: 'B', minor_units: 2, rate });
    assert.equal(convert('1', unit, to('1.2345665')).rate.toFixed(), '1.234566');
    assert.equal(convert('1', unit, to('1.2345675')).rate.toFixed(), '1.234568');
    assert.equal(convert('1', unit, to('1.23456651')).rate.toFixed(), '1.234567');
  });

  it('keeps every digit of large and precise amounts', () => {
    assert.deepEqual(converted('1000000000000', 'KWD', 'VND'), {
      amount: '1000000000000',
      rate: '80484.237894',
      result: '80484237894052649',
    });
    assert.deepEqual(converted('123.4567890123', 'USD', 'EUR'), {
      amount: '123.4567890123',
      rate: '0.92',
      result: '113.58',
    });
    assert.deepEqual(converted('999999999999.9999999999', 'USD', 'EUR'), {
      amount: '999999999999.9999999999',
      rate: '0.92',
      result: '920000000000',
    });
  });

  it('converts 0 to 0', () => {
    assert.deepEqual(converted('0', 'USD', 'JPY'), { amount: '0', rate: '150.85', result: '0' });
    assert.equal(converted('0.000', 'EUR', 'KWD').result, '0');
  });

  it('leaves a same-currency amount unchanged: rate 1, not rounded to minor units', () => {
    assert.deepEqual(converted('12.345', 'EUR', 'EUR'), { amount: '12.345', rate: '1', result: '12.345' });
    assert.deepEqual(converted('1.5', 'JPY', 'JPY'), { amount: '1.5', rate: '1', result: '1.5' });
    assert.deepEqual(converted('0100.10', 'USD', 'USD'), { amount: '100.1', rate: '1', result: '100.1' });
  });
});
