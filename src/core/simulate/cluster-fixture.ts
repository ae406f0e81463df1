// Cluster state as a YAML fixture: PersistentVolumes, StorageClasses, Nodes and cleanup Jobs —
// one object per document, a `kind: List` (what `kubectl get pv,sc,node,jobs -o yaml` prints) or
// a YAML list of objects — loaded into a MemoryCluster through the API, so the in-memory server's
// admission and validation apply. Server-set fields of a dump (uid, resourceVersion, timestamps)
// are dropped; a Job's `pvuuid` label is re-pointed at the PV named by its `pv` label.
import { isMap, isSeq } from 'yaml';
import type { Node as YamlNode } from 'yaml';
import type { Clock } from '../clock.js';
import { MemoryCluster } from '../kube/memory/memory-cluster.js';
import type { Job, Node, ObjectMeta, PersistentVolume, StorageClass } from '../kube/objects.js';
import type { ConfigIssue } from '../errors.js';
import { errorMessage, isRecord } from '../unknown-values.js';
import { Input, readInputText } from './input.js';

export const FIXTURE_KINDS = ['PersistentVolume', 'StorageClass', 'Node', 'Job'] as const;
export type FixtureKind = (typeof FIXTURE_KINDS)[number];

interface FixtureObject {
  readonly kind: FixtureKind;
  readonly object: Record<string, unknown>;
  readonly node: YamlNode;
  readonly path: string;
}

export interface ClusterFixture {
  readonly file: string;
  readonly cluster: MemoryCluster;
  readonly counts: Readonly<Record<FixtureKind, number>>;
  /** Names of the Nodes in the fixture. */
  readonly nodes: readonly string[];
  /** uid the in-memory server gave an object → the uid it has in the fixture (a dump keeps real ones). */
  readonly uids: ReadonlyMap<string, string>;
  readonly warnings: readonly ConfigIssue[];
}

const SERVER_FIELDS = [
  'uid',
  'resourceVersion',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'generation',
  'managedFields',
  'selfLink',
] as const;

function collect(input: Input): FixtureObject[] {
  const out: FixtureObject[] = [];
  const visit = (node: YamlNode | null, path: string): void => {
    if (node === null) return;
    if (isSeq(node)) {
      node.items.forEach((item, i) => {
        visit(input.resolve(item), `${path}[${i}]`);
      });
      return;
    }
    if (!isMap(node)) {
      input.error(path, 'expected a Kubernetes object (a mapping with kind and metadata)', node);
      return;
    }
    const kind = input.string(input.get(node, 'kind'), `${path}.kind`, { required: true });
    if (kind === undefined) return;
    if (kind === 'List' || kind.endsWith('List')) {
      const items = input.get(node, 'items');
      if (items !== null) visit(items, `${path}.items`);
      return;
    }
    if (!(FIXTURE_KINDS as readonly string[]).includes(kind)) {
      input.warn(
        `${path}.kind`,
        `${kind} ignored: simulate reads ${FIXTURE_KINDS.join(', ')}`,
        input.get(node, 'kind'),
      );
      return;
    }
    const object = input.toJS(node);
    if (!isRecord(object) || !isRecord(object['metadata']) || typeof object['metadata']['name'] !== 'string') {
      input.error(`${path}.metadata.name`, `a ${kind} needs metadata.name`, node);
      return;
    }
    out.push({ kind: kind as FixtureKind, object, node, path });
  };
  input.docs.forEach((doc, i) => {
    visit(doc.root, input.docs.length > 1 ? `[document ${i + 1}]` : '');
  });
  return out;
}

function clean(object: Record<string, unknown>): {
  body: Record<string, unknown>;
  status: unknown;
  uid: string | undefined;
  terminating: boolean;
} {
  const body = structuredClone(object);
  const metadata = body['metadata'] as Record<string, unknown>;
  const uid = typeof metadata['uid'] === 'string' ? metadata['uid'] : undefined;
  const terminating = metadata['deletionTimestamp'] !== undefined && metadata['deletionTimestamp'] !== null;
  const kept = Object.fromEntries(
    Object.entries(metadata).filter(([k]) => !(SERVER_FIELDS as readonly string[]).includes(k)),
  );
  const { status, ...rest } = body;
  return { body: { ...rest, metadata: kept }, status, uid, terminating };
}

export function parseClusterFixture(file: string, text: string): { input: Input; objects: FixtureObject[] } {
  const input = new Input('cluster fixture', file, text);
  const objects = input.failed ? [] : collect(input);
  const seen = new Set<string>();
  for (const o of objects) {
    const meta = o.object['metadata'] as ObjectMeta;
    const key = `${o.kind}/${meta.namespace ?? ''}/${meta.name}`;
    if (seen.has(key)) input.error(`${o.path}.metadata.name`, `duplicate ${o.kind} ${meta.name}`, o.node);
    seen.add(key);
  }
  input.check();
  return { input, objects };
}

/** Loads a fixture into a fresh MemoryCluster. Objects the in-memory apiserver rejects are input errors. */
export async function buildClusterFixture(
  file: string,
  text: string,
  options: { clock?: Clock } = {},
): Promise<ClusterFixture> {
  const { input, objects } = parseClusterFixture(file, text);
  const cluster = new MemoryCluster(options.clock ? { clock: options.clock } : {});
  const counts: Record<FixtureKind, number> = { PersistentVolume: 0, StorageClass: 0, Node: 0, Job: 0 };
  const pvUids = new Map<string, { fixtureUid: string | undefined; uid: string }>();
  const uids = new Map<string, string>();
  const keep = (created: { metadata: ObjectMeta }, fixtureUid: string | undefined): void => {
    if (fixtureUid !== undefined && created.metadata.uid !== undefined) uids.set(created.metadata.uid, fixtureUid);
  };
  const order: FixtureKind[] = ['Node', 'StorageClass', 'PersistentVolume', 'Job'];
  for (const kind of order) {
    for (const o of objects.filter((x) => x.kind === kind)) {
      const { body, status, uid: fixtureUid, terminating } = clean(o.object);
      const meta = body['metadata'] as ObjectMeta;
      try {
        switch (kind) {
          case 'Node':
            keep(await cluster.nodes.create(body as unknown as Node), fixtureUid);
            break;
          case 'StorageClass':
            await cluster.storageClasses.create(body as unknown as StorageClass);
            break;
          case 'PersistentVolume': {
            const created = await cluster.persistentVolumes.create(body as unknown as PersistentVolume);
            pvUids.set(meta.name, { fixtureUid, uid: created.metadata.uid ?? '' });
            keep(created, fixtureUid);
            if (isRecord(status)) {
              await cluster.persistentVolumes.updateStatus({
                ...created,
                status,
              });
            }
            if (terminating) await cluster.persistentVolumes.delete(meta.name);
            break;
          }
          case 'Job': {
            const namespace = meta.namespace ?? 'default';
            meta.namespace = namespace;
            cluster.addNamespace(namespace);
            const labels = meta.labels ?? {};
            const pv = labels['pv'] !== undefined ? pvUids.get(labels['pv']) : undefined;
            if (
              pv &&
              (labels['pvuuid'] === undefined || pv.fixtureUid === undefined || labels['pvuuid'] === pv.fixtureUid)
            )
              meta.labels = { ...labels, pvuuid: pv.uid };
            const created = await cluster.jobs.create(body as unknown as Job, { namespace });
            if (isRecord(status)) await cluster.jobs.updateStatus({ ...created, status }, { namespace });
            if (terminating) await cluster.jobs.delete(meta.name, { namespace });
            break;
          }
        }
        counts[kind] += 1;
      } catch (err) {
        input.error(o.path === '' ? 'metadata' : o.path, `${kind} ${meta.name}: ${errorMessage(err)}`, o.node);
      }
    }
  }
  input.check();
  const nodes = objects.filter((o) => o.kind === 'Node').map((o) => (o.object['metadata'] as ObjectMeta).name);
  return { file, cluster, counts, nodes, uids, warnings: input.warnings() };
}

export async function loadClusterFixture(path: string, options: { clock?: Clock } = {}): Promise<ClusterFixture> {
  return buildClusterFixture(path, await readInputText(path, 'cluster fixture'), options);
}
