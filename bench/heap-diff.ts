// What bench/reload-churn.ts --diagnose reads: two V8 heap snapshots diffed by constructor (count
// and self size), and a `--trace-gc` log summarized as the heap after each mark-compact (what a
// full collection leaves: retained objects, not garbage).

interface SnapshotJson {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: readonly string[];
      readonly node_types: readonly unknown[];
      readonly edge_fields: readonly string[];
      readonly edge_types: readonly unknown[];
    };
  };
  readonly nodes: readonly number[];
  readonly edges: readonly number[];
  readonly strings: readonly string[];
}

interface Bucket {
  count: number;
  size: number;
}

/** Self size and count per "type constructor" (strings, code and arrays each as one bucket per kind). */
function buckets(text: string): Map<string, Bucket> {
  const json = JSON.parse(text) as SnapshotJson;
  const fields = json.snapshot.meta.node_fields;
  const types = json.snapshot.meta.node_types[0] as readonly string[];
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const out = new Map<string, Bucket>();
  for (let i = 0; i < json.nodes.length; i += width) {
    const type = types[json.nodes[i + (typeAt ?? 0)] ?? 0] ?? '?';
    const name = json.strings[json.nodes[i + (nameAt ?? 1)] ?? 0] ?? '?';
    const size = json.nodes[i + (sizeAt ?? 3)] ?? 0;
    const key =
      type === 'object' || type === 'closure' || type === 'native' || type === 'hidden' || type === 'array'
        ? `${type} ${name.slice(0, 60)}`
        : `(${type})`;
    const bucket = out.get(key) ?? { count: 0, size: 0 };
    bucket.count++;
    bucket.size += size;
    out.set(key, bucket);
  }
  return out;
}

/** The 25 buckets that grew most by size between the snapshots, and the totals. */
export function diffHeapSnapshots(before: string, after: string): string {
  const a = buckets(before);
  const b = buckets(after);
  const rows = [...new Set([...a.keys(), ...b.keys()])].map((key) => {
    const x = a.get(key) ?? { count: 0, size: 0 };
    const y = b.get(key) ?? { count: 0, size: 0 };
    return { key, count: y.count - x.count, size: y.size - x.size, countAfter: y.count, sizeAfter: y.size };
  });
  const total = (m: Map<string, Bucket>): number => [...m.values()].reduce((s, v) => s + v.size, 0);
  const kib = (n: number): string => (n / 1024).toFixed(1);
  const lines = [
    `total self size ${kib(total(a))} → ${kib(total(b))} KiB`,
    '| constructor | count Δ | size Δ KiB | count after | size after KiB |',
    '|---|---|---|---|---|',
  ];
  for (const r of rows.sort((p, q) => q.size - p.size).slice(0, 25))
    lines.push(`| ${r.key} | ${String(r.count)} | ${kib(r.size)} | ${String(r.countAfter)} | ${kib(r.sizeAfter)} |`);
  lines.push('most grown by count:');
  for (const r of rows.sort((p, q) => q.count - p.count).slice(0, 10))
    lines.push(`  ${r.key}: +${String(r.count)} (${kib(r.size)} KiB)`);
  return lines.join('\n');
}

/** Counts of each kind of collection, and the heap after mark-compacts: first, a few between, last. */
export function summarizeTraceGc(log: string): string {
  const kinds = new Map<string, number>();
  const afterFull: { ms: number; after: number; committed: number }[] = [];
  const line =
    /(\d+) ms: ((?:Minor )?Mark-Compact(?: \(reduce\))?|Scavenge)\S* +([\d.]+) \(([\d.]+)\) -> ([\d.]+) \(([\d.]+)\) MB/u;
  for (const l of log.split('\n')) {
    const m = line.exec(l);
    if (m === null) continue;
    const kind = m[2] ?? '?';
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    if (kind.startsWith('Mark-Compact'))
      afterFull.push({ ms: Number(m[1]), after: Number(m[5]), committed: Number(m[6]) });
  }
  const counts = [...kinds].map(([k, n]) => `${k} ${String(n)}`).join(', ');
  const picks =
    afterFull.length <= 12 ? afterFull : afterFull.filter((_, i) => i % Math.ceil(afterFull.length / 12) === 0);
  const last = afterFull.at(-1);
  if (last !== undefined && picks.at(-1) !== last) picks.push(last);
  return [
    `collections: ${counts || 'none'}`,
    `after mark-compact (s: used (committed) MB): ${picks.map((p) => `${(p.ms / 1000).toFixed(0)}: ${p.after.toFixed(1)} (${p.committed.toFixed(1)})`).join(', ')}`,
  ].join('\n');
}

/** A snapshot's nodes as arrays: ids, labels, self sizes, and the retainer on a shortest path from the root. */
function graph(text: string): {
  ids: Float64Array;
  labels: string[];
  sizes: Float64Array;
  retainer: Int32Array;
  via: string[];
} {
  const json = JSON.parse(text) as SnapshotJson;
  const meta = json.snapshot.meta;
  const width = meta.node_fields.length;
  const types = meta.node_types[0] as readonly string[];
  const edgeTypes = meta.edge_types[0] as readonly string[];
  const ew = meta.edge_fields.length;
  const n = json.nodes.length / width;
  const ids = new Float64Array(n);
  const sizes = new Float64Array(n);
  const firstEdge = new Int32Array(n + 1);
  const labels: string[] = [];
  const f = (name: string): number => meta.node_fields.indexOf(name);
  const [typeAt, nameAt, idAt, sizeAt, countAt] = ['type', 'name', 'id', 'self_size', 'edge_count'].map(f);
  for (let i = 0, edge = 0; i < n; i++) {
    const base = i * width;
    const type = types[json.nodes[base + (typeAt ?? 0)] ?? 0] ?? '?';
    const name = json.strings[json.nodes[base + (nameAt ?? 1)] ?? 0] ?? '?';
    labels.push(type === 'string' || type === 'concatenated string' ? `(${type})` : `${type} ${name.slice(0, 50)}`);
    ids[i] = json.nodes[base + (idAt ?? 2)] ?? 0;
    sizes[i] = json.nodes[base + (sizeAt ?? 3)] ?? 0;
    firstEdge[i] = edge;
    edge += (json.nodes[base + (countAt ?? 4)] ?? 0) * ew;
    firstEdge[i + 1] = edge;
  }
  // Breadth first from the root over strong edges: each node's retainer on a shortest path.
  const retainer = new Int32Array(n).fill(-1);
  const via: string[] = new Array<string>(n);
  const queue = new Int32Array(n);
  let head = 0;
  let tail = 0;
  queue[tail++] = 0;
  retainer[0] = 0;
  while (head < tail) {
    const i = queue[head++] ?? 0;
    for (let e = firstEdge[i] ?? 0; e < (firstEdge[i + 1] ?? 0); e += ew) {
      const etype = edgeTypes[json.edges[e] ?? 0] ?? '?';
      if (etype === 'weak' || etype === 'shortcut') continue;
      const to = (json.edges[e + 2] ?? 0) / width;
      if (retainer[to] !== -1) continue;
      retainer[to] = i;
      const nameOrIndex = json.edges[e + 1] ?? 0;
      via[to] =
        etype === 'element' || etype === 'hidden' ? `[${String(nameOrIndex)}]` : (json.strings[nameOrIndex] ?? '?');
      queue[tail++] = to;
    }
  }
  retainer[0] = -1;
  return { ids, labels, sizes, retainer, via };
}

/**
 * The objects of the later snapshot that the earlier one did not have (snapshot ids are stable
 * within a process), grouped by the first object of the earlier snapshot that holds them: what
 * keeps the growth alive.
 */
export function newObjectHolders(before: string, after: string, top = 15): string {
  const old = new Set(graph(before).ids);
  const g = graph(after);
  const byHolder = new Map<string, { size: number; count: number; kinds: Map<string, number> }>();
  for (let i = 0; i < g.ids.length; i++) {
    if (old.has(g.ids[i] ?? 0)) continue;
    let at = i;
    let path = '';
    for (let depth = 0; depth < 30; depth++) {
      const up = g.retainer[at] ?? -1;
      if (up < 0) break;
      // Indices and numeric keys alike: one key for every element of one container.
      path = `.${(g.via[at] ?? '?').replace(/^\[?\d+\]?$/u, '[]')}${path}`;
      at = up;
      if (old.has(g.ids[at] ?? 0)) break;
    }
    let above = '';
    for (let up = at, depth = 0; depth < 4 && (g.retainer[up] ?? -1) >= 0; depth++) {
      above = `${g.labels[g.retainer[up] ?? 0] ?? '?'}.${g.via[up] ?? '?'} ← ${above}`;
      up = g.retainer[up] ?? 0;
    }
    const key = `${above}${g.labels[at] ?? '?'} @${String(g.ids[at])} ${path.split('.').slice(0, 3).join('.')}`;
    const entry = byHolder.get(key) ?? { size: 0, count: 0, kinds: new Map<string, number>() };
    entry.size += g.sizes[i] ?? 0;
    entry.count++;
    const kind = g.labels[i] ?? '?';
    entry.kinds.set(kind, (entry.kinds.get(kind) ?? 0) + 1);
    byHolder.set(key, entry);
  }
  return [...byHolder]
    .sort((a, b) => b[1].size - a[1].size)
    .slice(0, top)
    .map(([key, e]) => {
      const kinds = [...e.kinds].sort((a, b) => b[1] - a[1]).slice(0, 4);
      return `  ${(e.size / 1024).toFixed(1)} KiB in ${String(e.count)} new objects under ${key} (${kinds.map(([k, c]) => `${k} ${String(c)}`).join(', ')})`;
    })
    .join('\n');
}
