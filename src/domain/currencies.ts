import { type CollectionDefinition, decimalField, integerField, textField } from './collection.js';

/**
 * The fixed table of currencies the service converts between. Codes, names and minor units
 * follow ISO 4217; the rates are approximate mid-market rates of the day below, rounded, and
 * fixed: the service is a reference API, not a source of live prices.
 */

export interface Currency {
  /** ISO 4217 alphabetic code, upper case. */
  readonly code: string;
  readonly name: string;
  /** Digits after the decimal point of the currency's smallest unit (JPY 0, USD 2, KWD 3). */
  readonly minor_units: number;
  /** Units of this currency per 1 US dollar, as a decimal string: never a binary double. */
  readonly rate: string;
}

/** The day the rates are as of. */
export const RATES_AS_OF = '2024-03-19';

/** One currency code: three ASCII letters, any case. */
export const CURRENCY_CODE_PATTERN = '[A-Za-z]{3}';

export const CURRENCIES: readonly Currency[] = [
  { code: 'AED', name: 'UAE Dirham', minor_units: 2, rate: '3.6725' },
  { code: 'AUD', name: 'Australian Dollar', minor_units: 2, rate: '1.5325' },
  { code: 'BHD', name: 'Bahraini Dinar', minor_units: 3, rate: '0.376' },
  { code: 'BRL', name: 'Brazilian Real', minor_units: 2, rate: '5.0235' },
  { code: 'CAD', name: 'Canadian Dollar', minor_units: 2, rate: '1.3555' },
  { code: 'CHF', name: 'Swiss Franc', minor_units: 2, rate: '0.8865' },
  { code: 'CLP', name: 'Chilean Peso', minor_units: 0, rate: '966.4' },
  { code: 'CNY', name: 'Chinese Yuan', minor_units: 2, rate: '7.1995' },
  { code: 'CZK', name: 'Czech Koruna', minor_units: 2, rate: '23.285' },
  { code: 'DKK', name: 'Danish Krone', minor_units: 2, rate: '6.8635' },
  { code: 'EUR', name: 'Euro', minor_units: 2, rate: '0.92' },
  { code: 'GBP', name: 'Pound Sterling', minor_units: 2, rate: '0.786' },
  { code: 'HKD', name: 'Hong Kong Dollar', minor_units: 2, rate: '7.8245' },
  { code: 'HUF', name: 'Hungarian Forint', minor_units: 2, rate: '366.45' },
  { code: 'IDR', name: 'Indonesian Rupiah', minor_units: 2, rate: '15705' },
  { code: 'INR', name: 'Indian Rupee', minor_units: 2, rate: '83.04' },
  { code: 'ISK', name: 'Icelandic Krona', minor_units: 0, rate: '137.65' },
  { code: 'JOD', name: 'Jordanian Dinar', minor_units: 3, rate: '0.709' },
  { code: 'JPY', name: 'Japanese Yen', minor_units: 0, rate: '150.85' },
  { code: 'KRW', name: 'South Korean Won', minor_units: 0, rate: '1339.5' },
  { code: 'KWD', name: 'Kuwaiti Dinar', minor_units: 3, rate: '0.3077' },
  { code: 'MXN', name: 'Mexican Peso', minor_units: 2, rate: '16.745' },
  { code: 'NOK', name: 'Norwegian Krone', minor_units: 2, rate: '10.653' },
  { code: 'NZD', name: 'New Zealand Dollar', minor_units: 2, rate: '1.6505' },
  { code: 'OMR', name: 'Omani Rial', minor_units: 3, rate: '0.3845' },
  { code: 'PLN', name: 'Polish Zloty', minor_units: 2, rate: '3.9835' },
  { code: 'SAR', name: 'Saudi Riyal', minor_units: 2, rate: '3.7502' },
  { code: 'SEK', name: 'Swedish Krona', minor_units: 2, rate: '10.448' },
  { code: 'SGD', name: 'Singapore Dollar', minor_units: 2, rate: '1.3425' },
  { code: 'THB', name: 'Thai Baht', minor_units: 2, rate: '36.09' },
  { code: 'TRY', name: 'Turkish Lira', minor_units: 2, rate: '32.205' },
  { code: 'USD', name: 'US Dollar', minor_units: 2, rate: '1' },
  { code: 'VND', name: 'Vietnamese Dong', minor_units: 0, rate: '24765' },
  { code: 'ZAR', name: 'South African Rand', minor_units: 2, rate: '18.925' },
];

const BY_CODE = new Map(CURRENCIES.map((currency) => [currency.code, currency]));

/** The currency with this code, in any case; undefined when it is not in the table. */
export function findCurrency(code: string): Currency | undefined {
  return BY_CODE.get(code.toUpperCase());
}

/** The table as a collection: filter by code and minor units, search codes and names, sort by any field. */
export const CURRENCY_COLLECTION: CollectionDefinition<Currency> = {
  name: 'currencies',
  items: CURRENCIES,
  fields: {
    code: textField({
      searchable: true,
      filter: { pattern: CURRENCY_CODE_PATTERN, values: 'currency codes', parse: (raw) => raw.toUpperCase() },
    }),
    name: textField({ searchable: true }),
    minor_units: integerField({ filterable: true }),
    rate: decimalField(),
  },
  key: 'code',
};
