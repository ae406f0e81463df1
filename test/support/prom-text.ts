// A strict parser of the Prometheus text exposition format 0.0.4, for tests: it throws on anything
// a Prometheus server would reject (a bad name, a bad escape, a sample before its TYPE, a TYPE
// given twice, a sample of a family it does not belong to, a duplicate series, a bad value).

const TYPES = ['counter', 'gauge', 'histogram', 'summary', 'untyped'] as const;
export type MetricType = (typeof TYPES)[number];

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  readonly name: string;
  type: MetricType;
  help?: string;
  readonly samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/u;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/u;

function unescape(text: string, quotes: boolean, line: number): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = text[++i];
    if (next === '\\') out += '\\';
    else if (next === 'n') out += '\n';
    else if (next === '"' && quotes) out += '"';
    else throw new Error(`line ${String(line)}: bad escape \\${String(next)}`);
  }
  return out;
}

function parseValue(text: string, line: number): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/u.test(text))
    throw new Error(`line ${String(line)}: bad value ${text}`);
  return Number(text);
}

/** The family a sample name belongs to (histogram and summary suffixes). */
function familyOf(name: string, families: Map<string, Family>): Family | undefined {
  const direct = families.get(name);
  if (direct !== undefined) return direct;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const family = families.get(name.slice(0, -suffix.length));
    if (family !== undefined && (family.type === 'histogram' || (family.type === 'summary' && suffix !== '_bucket'))) {
      return family;
    }
  }
  return undefined;
}

export function parsePrometheusText(text: string): Map<string, Family> {
  if (text !== '' && !text.endsWith('\n')) throw new Error('the exposition must end with a newline');
  const families = new Map<string, Family>();
  const series = new Set<string>();
  const lines = text.split('\n');
  lines.pop();
  lines.forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    const comment = /^#\s*(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/u.exec(raw);
    if (comment !== null) {
      const [, keyword, name = '', rest = ''] = comment;
      if (!NAME.test(name)) throw new Error(`line ${String(line)}: bad metric name ${name}`);
      let family = families.get(name);
      if (keyword === 'TYPE') {
        const type = TYPES.find((t) => t === rest);
        if (type === undefined) throw new Error(`line ${String(line)}: bad type ${rest}`);
        if (family !== undefined && (family.samples.length > 0 || family.type !== 'untyped')) {
          throw new Error(`line ${String(line)}: TYPE of ${name} given twice or after its samples`);
        }
        family ??= { name, type: 'untyped', samples: [] };
        family.type = type;
      } else {
        family ??= { name, type: 'untyped', samples: [] };
        if (family.help !== undefined) throw new Error(`line ${String(line)}: HELP of ${name} given twice`);
        family.help = unescape(rest, false, line);
      }
      families.set(name, family);
      return;
    }
    if (raw.startsWith('#')) return;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+(-?\d+))?$/u.exec(raw);
    if (sample === null) throw new Error(`line ${String(line)}: not a sample: ${raw}`);
    const [, name = '', labelText = '', valueText = ''] = sample;
    const labels: Record<string, string> = {};
    let rest = labelText;
    while (rest !== '') {
      const pair = /^([^=\s]+)="((?:[^"\\]|\\.)*)"\s*(?:,\s*|$)/u.exec(rest);
      if (pair === null) throw new Error(`line ${String(line)}: bad labels {${labelText}}`);
      const [whole, key = '', value = ''] = pair;
      if (!LABEL.test(key)) throw new Error(`line ${String(line)}: bad label name ${key}`);
      if (key in labels) throw new Error(`line ${String(line)}: label ${key} twice`);
      labels[key] = unescape(value, true, line);
      rest = rest.slice(whole.length);
    }
    const family = familyOf(name, families);
    if (family === undefined) throw new Error(`line ${String(line)}: sample ${name} has no TYPE before it`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (series.has(key)) throw new Error(`line ${String(line)}: duplicate series ${key}`);
    series.add(key);
    family.samples.push({ name, labels, value: parseValue(valueText, line) });
  });
  return families;
}
