// The operator panel: polls /metrics (Prometheus text format) and shows what a visitor needs
// to watch a celebrity post being absorbed: fan-out lag per lane, post-to-visible p99 per lane
// (first follower, 95% of active followers), timeline inserts per second, the feed query's own
// p99 (feed_request_seconds) and, labelled as such, the p99 of all GraphQL requests, empty and
// duplicate pages, and the synthetic probe's status (app.probe: leaks, lost posts, duplicates,
// last round). Any metric may be missing (another process exports it, or the probe is off):
// the panel says so instead of failing.

import { clear, h, icon } from './dom.js';

const POLL_MS = 2000;
const WINDOW_MS = 30_000; // rates and p99 over the last 30 s, like rate(...[30s])
const SPARK_POINTS = 60;

export const METRIC = {
  lag: 'feed_fanout_oldest_job_age_seconds',
  queued: 'feed_fanout_queued_jobs',
  inserts: 'feed_timeline_inserts_total',
  feed: 'feed_request_seconds', // Query.feed only, by mode and first/next page
  graphql: 'feed_graphql_request_seconds', // every GraphQL HTTP request (log-ins, posts, …)
  stages: 'feed_read_stage_seconds',
  outbox: 'feed_outbox_oldest_unpublished_seconds',
  firstVisible: 'feed_post_first_visible_seconds', // creation -> first follower timeline, by lane
  visible95: 'feed_post_visible_95_seconds', // creation -> 95% of active followers, by lane
  emptyPages: 'feed_empty_pages_total',
  pageDuplicates: 'feed_page_duplicates_total',
  probeLeaks: 'feed_probe_leaks_total', // must stay 0
  probeLost: 'feed_probe_lost_posts_total',
  probeDuplicates: 'feed_probe_duplicates_total',
  probeLastRound: 'feed_probe_last_round_timestamp_seconds',
};
const PROBE_STALE_S = 300; // as the FeedProbeStale alert (ops/prometheus/alerts.yml)

// ------------------------------------------------------------------------ parsing

/** Parse Prometheus text exposition into [{name, labels, value}]. */
export function parsePrometheus(text) {
  const samples = [];
  for (const rawLine of text.split('\n')) {
    const line = rawLine.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let lm;
      while ((lm = re.exec(m[3]))) labels[lm[1]] = lm[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    samples.push({ name: m[1], labels, value: parseValue(m[4]) });
  }
  return samples;
}

function parseValue(text) {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  return Number(text);
}

/** Sum of a counter's samples (all label sets), or null when absent. */
export function counterTotal(samples, name) {
  const matching = samples.filter((s) => s.name === name || s.name === `${name}_total`);
  return matching.length ? matching.reduce((a, s) => a + s.value, 0) : null;
}

/** Cumulative histogram buckets [[le, count], ...] summed over all label sets, or null. */
export function histogramBuckets(samples, name) {
  const buckets = samples.filter((s) => s.name === `${name}_bucket`);
  if (!buckets.length) return null;
  const sums = new Map();
  for (const s of buckets) {
    const le = parseValue(s.labels.le);
    sums.set(le, (sums.get(le) || 0) + s.value);
  }
  return [...sums.entries()].sort((a, b) => a[0] - b[0]);
}

/** Cumulative buckets per value of one label: Map(label value -> [[le, count], ...]). */
export function histogramByLabel(samples, name, label) {
  const series = new Map();
  for (const s of samples) {
    if (s.name !== `${name}_bucket` || s.labels[label] === undefined) continue;
    const key = s.labels[label];
    if (!series.has(key)) series.set(key, new Map());
    const sums = series.get(key);
    const le = parseValue(s.labels.le);
    sums.set(le, (sums.get(le) || 0) + s.value);
  }
  const out = new Map();
  for (const [key, sums] of series) out.set(key, [...sums.entries()].sort((a, b) => a[0] - b[0]));
  return out;
}

/** histogram_quantile over cumulative [[le, count], ...] (linear inside a bucket). */
export function quantile(q, buckets) {
  if (!buckets?.length) return null;
  const total = buckets[buckets.length - 1][1];
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return prevLe; // the best a histogram can say
      if (count === prevCount) return le;
      return prevLe + ((le - prevLe) * (rank - prevCount)) / (count - prevCount);
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}

/** Bucket-wise difference newer - older (counters only grow; a reset keeps the newer). */
export function bucketDelta(newer, older) {
  if (!older) return newer;
  const before = new Map(older);
  const delta = newer.map(([le, c]) => [le, c - (before.get(le) || 0)]);
  return delta.some(([, c]) => c < 0) ? newer : delta;
}

/**
 * p99 over the window (buckets now minus the oldest buckets in the window), or since the
 * process started while the window saw no requests. {p99, recent} or null.
 */
export function windowedP99(buckets, base) {
  if (!buckets) return null;
  const windowed = base ? bucketDelta(buckets, base) : null;
  const recent = Boolean(windowed) && windowed[windowed.length - 1][1] > 0;
  const p99 = quantile(0.99, recent ? windowed : buckets);
  return p99 === null ? null : { p99, recent };
}

// ------------------------------------------------------------------------ panel

export class OperatorPanel {
  constructor(root) {
    this.root = root;
    this.history = []; // [{t, inserts, feed, pages, graphql, stages}]
    this.series = { inserts: [], p99: [], graphqlP99: [], lag: new Map() };
    this.timer = null;
    this.inflight = null;
    this.render();
  }

  start() {
    if (this.timer) return;
    this.poll();
    this.timer = setInterval(() => this.poll(), POLL_MS);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
    this.inflight?.abort();
  }

  async poll() {
    if (this.inflight) return;
    this.inflight = new AbortController();
    try {
      const response = await fetch('/metrics', { signal: this.inflight.signal, cache: 'no-store' });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      this.update(parsePrometheus(await response.text()), Date.now());
      this.setState('ok', 'polling /metrics every 2 s');
    } catch (err) {
      if (err.name !== 'AbortError') this.setState('error', `/metrics unreachable (${err.message})`);
    } finally {
      this.inflight = null;
    }
  }

  update(samples, now) {
    const inserts = counterTotal(samples, METRIC.inserts);
    const feed = histogramBuckets(samples, METRIC.feed);
    const pages = histogramByLabel(samples, METRIC.feed, 'page');
    const graphql = histogramBuckets(samples, METRIC.graphql);
    const stages = histogramByLabel(samples, METRIC.stages, 'stage');
    const first = histogramByLabel(samples, METRIC.firstVisible, 'lane');
    const visible = histogramByLabel(samples, METRIC.visible95, 'lane');
    this.history.push({ t: now, inserts, feed, pages, graphql, stages, first, visible });
    while (this.history.length > 2 && now - this.history[0].t > WINDOW_MS) this.history.shift();
    // The oldest sample in the window that has the metric (a process may start exporting late).
    const past = this.history.slice(0, -1);
    const insertsBase = past.find((x) => x.inserts !== null);

    // Timeline inserts per second over the window.
    let rate = null;
    if (inserts !== null && insertsBase) {
      const dt = (now - insertsBase.t) / 1000;
      rate = dt > 0 ? Math.max(0, inserts - insertsBase.inserts) / dt : null;
    }
    // p99s over the window; before any request in the window, since the process started.
    const feedP99 = windowedP99(feed, past.find((x) => x.feed !== null)?.feed);
    const graphqlP99 = windowedP99(graphql, past.find((x) => x.graphql !== null)?.graphql);
    // Per label value: the feed's first pages (they rank and freeze a session) apart from its
    // next pages, and the read path's stages (feed_read_stage_seconds), same window.
    const byLabel = (current, key) => {
      const base = past.find((x) => x[key].size)?.[key];
      const out = [];
      for (const [label, buckets] of current) {
        const found = windowedP99(buckets, base?.get(label));
        if (found) out.push({ label, p99: found.p99 });
      }
      return out;
    };
    const pageP99 = byLabel(pages, 'pages').sort((a, b) => a.label.localeCompare(b.label)); // first, next
    const stageP99 = byLabel(stages, 'stages');
    // Post-to-visible p99 per lane: the first follower's timeline, and 95% of active followers.
    const firstP99 = new Map(byLabel(first, 'first').map(({ label, p99 }) => [label, p99]));
    const visibleP99 = new Map(byLabel(visible, 'visible').map(({ label, p99 }) => [label, p99]));
    const visibility = [...new Set([...firstP99.keys(), ...visibleP99.keys()])]
      .sort()
      .map((lane) => ({ lane, first: firstP99.get(lane) ?? null, visible: visibleP99.get(lane) ?? null }));
    const pageQuality = {
      empty: counterTotal(samples, METRIC.emptyPages),
      duplicates: counterTotal(samples, METRIC.pageDuplicates),
    };
    const probe = probeStatus(samples, now);

    const lanes = samples
      .filter((s) => s.name === METRIC.lag)
      .map((s) => ({
        lane: s.labels.lane || '?',
        age: s.value,
        queued: samples.find((q) => q.name === METRIC.queued && q.labels.lane === s.labels.lane)?.value,
      }))
      .sort((a, b) => a.lane.localeCompare(b.lane));
    const outbox = samples.find((s) => s.name === METRIC.outbox)?.value ?? null;

    push(this.series.inserts, rate);
    push(this.series.p99, feedP99?.p99 ?? null);
    push(this.series.graphqlP99, graphqlP99?.p99 ?? null);
    for (const { lane, age } of lanes) {
      if (!this.series.lag.has(lane)) this.series.lag.set(lane, []);
      push(this.series.lag.get(lane), age);
    }
    this.show({
      rate, feedP99, graphqlP99, pageP99, stageP99, lanes, outbox, hasInserts: inserts !== null,
      visibility, pageQuality, probe,
    });
  }

  // ---------------------------------------------------------------------- view

  render() {
    clear(this.root);
    this.stateEl = h('span.op-state', { 'data-testid': 'operator-state' }, 'connecting…');
    this.lanesEl = h('div.op-lanes', { 'data-testid': 'operator-lanes' });
    this.insertsEl = h('div.op-figure', { 'data-testid': 'operator-inserts' });
    this.p99El = h('div.op-figure', { 'data-testid': 'operator-p99' });
    this.graphqlEl = h('div.op-figure', { 'data-testid': 'operator-graphql-p99' });
    this.outboxEl = h('div.op-figure', { 'data-testid': 'operator-outbox' });
    this.visibleEl = h('div.op-lanes', { 'data-testid': 'operator-visible' });
    this.pageQualityEl = h('div.op-figure', { 'data-testid': 'operator-page-quality' });
    this.probeEl = h('div.op-probe', { 'data-testid': 'operator-probe' });
    this.root.append(
      h(
        'div.op-head',
        h('h2', icon('gauge'), 'Operator'),
        this.stateEl,
      ),
      section('Probe', 'synthetic canaries: leaks must stay 0', this.probeEl),
      section('Fan-out lag per lane', 'age of the oldest pending job', this.lanesEl),
      section('Post → visible p99', 'per lane: first follower, 95% of active followers', this.visibleEl),
      section('Timeline inserts', 'per second, as this /metrics counts them', this.insertsEl),
      section('Feed p99', 'Query.feed, one page', this.p99El),
      section('GraphQL p99', 'all GraphQL requests: log-ins, posts, feed…', this.graphqlEl),
      section('Feed pages', 'served empty (not at the end) or repeating a post, since start', this.pageQualityEl),
      section('Outbox', 'oldest unpublished event', this.outboxEl),
    );
    this.show({ rate: null, feedP99: null, graphqlP99: null, lanes: [], outbox: null, hasInserts: false, initial: true });
  }

  setState(kind, text) {
    this.stateEl.textContent = text;
    this.stateEl.dataset.kind = kind;
  }

  show({
    rate, feedP99, graphqlP99, pageP99 = [], stageP99 = [], lanes, outbox, hasInserts, initial,
    visibility = [], pageQuality = { empty: null, duplicates: null }, probe = null,
  }) {
    this.showProbe(probe, initial);
    this.showVisibility(visibility, initial);
    this.showPageQuality(pageQuality, initial);
    clear(this.lanesEl);
    if (!lanes.length) {
      this.lanesEl.append(missing(initial ? '…' : `${METRIC.lag} not exported by this API process`));
    }
    for (const { lane, age, queued } of lanes) {
      const level = age < 1 ? 'good' : age < 5 ? 'warn' : 'bad';
      this.lanesEl.append(
        h(
          'div.op-lane',
          { dataset: { lane, level } },
          h('span.op-lane-name', lane),
          h('span.op-lane-bar', h('span', { style: { width: `${Math.min(100, (age / 10) * 100)}%` } })),
          h('span.op-lane-value', formatSeconds(age)),
          queued !== undefined ? h('span.op-lane-queued', `${queued} queued`) : null,
        ),
      );
    }
    figure(
      this.insertsEl,
      rate === null ? null : rate < 10 ? rate.toFixed(1) : Math.round(rate).toLocaleString(),
      '/s',
      this.series.inserts,
      hasInserts || initial ? (initial ? '…' : 'measuring…') : `${METRIC.inserts} not exported by this API process`,
    );
    figure(
      this.p99El,
      feedP99 ? formatMs(feedP99.p99) : null,
      'ms',
      this.series.p99,
      initial ? '…' : `no ${METRIC.feed} samples yet`,
      feedP99 ? `${METRIC.feed}, ${feedP99.recent ? 'last 30 s' : 'since start'}` : '',
    );
    if (feedP99 && pageP99.length) {
      this.p99El.append(
        h(
          'div.op-stages',
          { dataset: { testid: 'operator-feed-pages' } },
          pageP99.map(({ label, p99: v }) => h('span', h('b', `${label} page${label === 'first' ? '' : 's'}`), ` ${formatSeconds(v)}`)),
        ),
      );
    }
    if (stageP99.length) {
      this.p99El.append(
        h(
          'div.op-stages',
          { dataset: { testid: 'operator-stages' } },
          stageP99.map(({ label, p99: v }) => h('span', h('b', label), ` ${formatSeconds(v)}`)),
        ),
      );
    }
    figure(
      this.graphqlEl,
      graphqlP99 ? formatMs(graphqlP99.p99) : null,
      'ms',
      this.series.graphqlP99,
      initial ? '…' : `no ${METRIC.graphql} samples yet`,
      graphqlP99 ? `${METRIC.graphql}, ${graphqlP99.recent ? 'last 30 s' : 'since start'}` : '',
    );
    figure(
      this.outboxEl,
      outbox === null ? null : formatSeconds(outbox),
      '',
      null,
      initial ? '…' : `${METRIC.outbox} not exported by this API process`,
    );
  }

  showProbe(probe, initial) {
    clear(this.probeEl);
    if (!probe) {
      this.probeEl.dataset.level = 'none';
      this.probeEl.append(missing(initial ? '…' : 'no probe: feed_probe_* not exported (app.probe is off)'));
      return;
    }
    const { leaks, lost, duplicates, age } = probe;
    const stale = age === null || age > PROBE_STALE_S;
    this.probeEl.dataset.level = leaks > 0 ? 'bad' : lost > 0 || duplicates > 0 || stale ? 'warn' : 'good';
    const count = (label, value, testid) =>
      h('span.op-probe-count', { dataset: { testid, zero: String(!value) } }, `${label} `, h('b', String(value)));
    this.probeEl.append(
      h(
        'div.op-probe-counts',
        count('leaks', leaks, 'operator-probe-leaks'),
        count('lost', lost, 'operator-probe-lost'),
        count('duplicates', duplicates, 'operator-probe-duplicates'),
      ),
      h(
        'span.op-note',
        { dataset: { testid: 'operator-probe-round' } },
        age === null ? 'no round completed yet' : `last round ${formatSeconds(age)} ago`,
      ),
    );
  }

  showVisibility(visibility, initial) {
    clear(this.visibleEl);
    if (!visibility.length) {
      this.visibleEl.append(missing(initial ? '…' : `no ${METRIC.visible95} samples yet`));
      return;
    }
    for (const { lane, first, visible } of visibility) {
      this.visibleEl.append(
        h(
          'div.op-visible',
          { dataset: { lane } },
          h('span.op-lane-name', lane),
          h('span', h('b', 'first '), formatSeconds(first)),
          h('span', h('b', '95% '), formatSeconds(visible)),
        ),
      );
    }
  }

  showPageQuality({ empty, duplicates }, initial) {
    clear(this.pageQualityEl);
    if (empty === null && duplicates === null) {
      this.pageQualityEl.append(missing(initial ? '…' : `${METRIC.emptyPages} not exported by this API process`));
      return;
    }
    this.pageQualityEl.append(
      h(
        'div.op-stages',
        h('span', { dataset: { testid: 'operator-empty-pages' } }, h('b', 'empty pages'), ` ${empty ?? '—'}`),
        h('span', { dataset: { testid: 'operator-page-duplicates' } }, h('b', 'duplicates'), ` ${duplicates ?? '—'}`),
      ),
    );
  }
}

/** The probe's figures, or null when no process exports them (the probe is off). */
export function probeStatus(samples, now) {
  const leaks = counterTotal(samples, METRIC.probeLeaks);
  const last = samples.find((s) => s.name === METRIC.probeLastRound)?.value;
  if (leaks === null && last === undefined) return null;
  return {
    leaks: leaks ?? 0,
    lost: counterTotal(samples, METRIC.probeLost) ?? 0,
    duplicates: counterTotal(samples, METRIC.probeDuplicates) ?? 0,
    age: last ? Math.max(0, now / 1000 - last) : null,
  };
}

function section(title, subtitle, body) {
  return h('section.op-section', h('h3', title, h('small', subtitle)), body);
}

function figure(el, value, unit, series, missingText, note = '') {
  clear(el);
  if (value === null) {
    el.append(missing(missingText));
    return;
  }
  el.append(h('span.op-value', value, unit ? h('small', ` ${unit}`) : null));
  if (series) el.append(sparkline(series));
  if (note) el.append(h('span.op-note', note));
}

function missing(text) {
  return h('span.op-missing', text);
}

function push(list, value) {
  list.push(value);
  while (list.length > SPARK_POINTS) list.shift();
}

function formatMs(s) {
  const ms = s * 1000;
  return ms < 10 ? ms.toFixed(1) : Math.round(ms).toLocaleString();
}

function formatSeconds(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return '—';
  if (s === 0) return '0 s';
  if (s < 0.01) return `${(s * 1000).toFixed(1)} ms`;
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  return `${Math.round(s / 60)} min`;
}

function sparkline(values) {
  const points = values.map((v, i) => [i, v]).filter(([, v]) => v !== null && Number.isFinite(v));
  const width = 120;
  const height = 28;
  const span = document.createElement('span');
  span.className = 'op-spark';
  if (points.length < 2) return span;
  const max = Math.max(...points.map(([, v]) => v), 1e-9);
  const step = width / (SPARK_POINTS - 1);
  const offset = SPARK_POINTS - values.length;
  const d = points
    .map(([i, v], n) => `${n ? 'L' : 'M'}${((i + offset) * step).toFixed(1)},${(height - 2 - (v / max) * (height - 4)).toFixed(1)}`)
    .join(' ');
  span.innerHTML = `<svg viewBox="0 0 ${width} ${height}" preserveAspectRatio="none"><path d="${d}" fill="none" stroke="currentColor" stroke-width="1.5" vector-effect="non-scaling-stroke"/></svg>`;
  return span;
}
