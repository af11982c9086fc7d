import { Counter, type CounterConfiguration, Histogram, type HistogramConfiguration } from 'prom-client';

/** One series of a histogram: the observations of one set of label values. */
export class HistogramSeries<T extends string> {
  readonly labels: Readonly<Partial<Record<T, string>>>;
  /** Observations per bucket, not cumulative; the last slot holds those above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  readonly #bounds: readonly number[];

  constructor(labels: Readonly<Partial<Record<T, string>>>, bounds: readonly number[]) {
    this.labels = labels;
    this.#bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.#bounds;
    let bucket = 0;
    while (bucket < bounds.length && value > (bounds[bucket] as number)) bucket++;
    (this.counts[bucket] as number)++;
    this.sum += value;
    this.count++;
  }
}

/** A sample as prom-client's registry writes it: its own labels, and its series' beside them. */
interface Sample<T extends string> {
  metricName: string;
  labels: { le?: number | '+Inf' };
  sharedLabels: Readonly<Partial<Record<T, string>>>;
  value: number;
  /** As prom-client has it without exemplars: null for a bucket, undefined for the sum and count. */
  exemplar: null | undefined;
}

/**
 * A prom-client Histogram whose observations cost a bucket search and three additions: each series
 * is made once by its caller (`series`) and kept, and the samples are made from its counts only
 * when the registry is read. Observed through prom-client, every observation would check, sort and
 * hash its labels. The registry writes it exactly as a prom-client Histogram fed the same
 * observations (a test holds the two to the same text): series in the order they were made,
 * buckets cumulative, `le` first.
 */
export class SeriesHistogram<T extends string> extends Histogram<T> {
  readonly #name: string;
  readonly #help: string;
  readonly #labelNames: readonly T[];
  readonly #bounds: readonly number[];
  readonly #series: HistogramSeries<T>[] = [];

  constructor(configuration: HistogramConfiguration<T> & { labelNames: readonly T[]; buckets: readonly number[] }) {
    super(configuration);
    this.#name = configuration.name;
    this.#help = configuration.help;
    this.#labelNames = configuration.labelNames;
    this.#bounds = configuration.buckets;
  }

  /**
   * A new series of these label values, in the order of the label names: made once per set, and
   * kept. An empty value is no label, as Prometheus reads it.
   */
  series(values: readonly string[]): HistogramSeries<T> {
    const labels = Object.fromEntries(
      this.#labelNames.map((name, i) => [name, values[i] ?? '']).filter(([, value]) => value !== ''),
    ) as Partial<Record<T, string>>;
    const series = new HistogramSeries(labels, this.#bounds);
    this.#series.push(series);
    return series;
  }

  /** Every series observed at least once, in the order they were made. */
  observed(): HistogramSeries<T>[] {
    return this.#series.filter(({ count }) => count > 0);
  }

  /**
   * A prom-client Counter of each series' observations, folded in from the histogram whenever the
   * registry is read: a request costs one observation, not two, and the two never disagree.
   */
  counter(configuration: Pick<CounterConfiguration<T>, 'name' | 'help' | 'registers'>): Counter<T> {
    const histogram = this;
    return new Counter({
      ...configuration,
      labelNames: this.#labelNames,
      collect() {
        this.reset();
        for (const { labels, count } of histogram.observed()) this.inc(labels, count);
      },
    });
  }

  /**
   * The samples as prom-client's registry reads them, for its text and (through `get`) its JSON:
   * each sample with its series' labels kept apart.
   */
  async getForPromString() {
    const bucket = `${this.#name}_bucket`;
    const values: Sample<T>[] = [];
    for (const { labels, counts, sum, count } of this.observed()) {
      let cumulative = 0;
      this.#bounds.forEach((le, i) => {
        cumulative += counts[i] as number;
        values.push({ metricName: bucket, labels: { le }, sharedLabels: labels, value: cumulative, exemplar: null });
      });
      values.push(
        { metricName: bucket, labels: { le: '+Inf' }, sharedLabels: labels, value: count, exemplar: null },
        { metricName: `${this.#name}_sum`, labels: {}, sharedLabels: labels, value: sum, exemplar: undefined },
        { metricName: `${this.#name}_count`, labels: {}, sharedLabels: labels, value: count, exemplar: undefined },
      );
    }
    return { name: this.#name, help: this.#help, type: 'histogram' as const, aggregator: 'sum' as const, values };
  }
}
