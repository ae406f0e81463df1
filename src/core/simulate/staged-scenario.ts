// The staged rollout part of the scenario format: the `stagedRollout:` block (the chart's
// stagedRollout values, the controller's flags), the `fleet:` of other nodes, and the arguments of
// the steps that only a staged scenario has. docs/simulate.md ("Staged rollouts") is the reference.
import type { Node, YAMLMap } from 'yaml';
import { isMap, isScalar, isSeq } from 'yaml';
import { UsageError } from '../errors.js';
import { labelValueErrors, nodeNameProblem, qualifiedNameErrors } from '../kube/validation.js';
import { HALT_ACTIONS, policyFromFlags } from '../staged-rollout/policy.js';
import type { PolicyFlags, StagedRolloutPolicy } from '../staged-rollout/policy.js';
import type { Input } from './input.js';

/** A node of the fleet: a stand-in agent runs there, or the real one on the scenario's node. */
export interface FleetNodeSpec {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

export interface StagedRolloutSpec {
  readonly policy: StagedRolloutPolicy;
  /** The nodes the scenario names (the scenario's own node may be among them, to give its labels). */
  readonly fleet: readonly FleetNodeSpec[];
}

/** What a node's stand-in agent does with a candidate it is told to apply (`node fails candidate`). */
export const NODE_FAILURES = ['rejected', 'refused', 'rolled-back', 'failed', 'errors', 'silent', 'stuck'] as const;
export type NodeFailure = (typeof NODE_FAILURES)[number];

/** The reason a stand-in reports for a reload outcome it was told to have, when the scenario gives none. */
export const DEFAULT_FAILURE_REASONS: Readonly<Record<'rejected' | 'refused' | 'rolled-back' | 'failed', string>> = {
  rejected: 'the config does not validate on this node (simulated)',
  refused: 'the reload guard refused it on this node (simulated)',
  'rolled-back': 'the new generation did not start on this node; the previous config serves again (simulated)',
  failed: 'the config could not be read on this node (simulated)',
};

/** At most this many nodes in a fleet: a rehearsal, not a benchmark (each one runs a stand-in agent). */
export const MAX_FLEET = 200;

const STAGED_KEYS = ['enabled', 'canary', 'waves', 'bakeTime', 'progressDeadline', 'onHalt'];
const CANARY_KEYS = ['selector', 'count'];

/** `--waves "x": why` → `"x": why`: the scenario names the field, not the controller's flag. */
function withoutFlag(message: string): string {
  return message.replace(/^--[a-z-]+:?\s*/u, '');
}

/**
 * The `stagedRollout:` block, the chart's values (`enabled`, `canary: {selector | count}`, `waves`,
 * `bakeTime`, `progressDeadline`, `onHalt`) checked as the controller checks its flags.
 */
export function readStagedRollout(input: Input, node: Node | null): StagedRolloutPolicy | undefined {
  const map = input.map(node, 'stagedRollout');
  if (!map) return undefined;
  input.pairs(map, 'stagedRollout', STAGED_KEYS);
  const enabledNode = input.get(map, 'enabled');
  if (input.boolean(enabledNode, 'stagedRollout.enabled', true) === false)
    input.error(
      'stagedRollout.enabled',
      'false: remove the stagedRollout block to replay without a staged rollout',
      enabledNode,
    );
  const flags: { -readonly [K in keyof PolicyFlags]: PolicyFlags[K] } = {};
  const field = (key: 'waves' | 'bakeTime' | 'progressDeadline'): void => {
    const n = input.get(map, key);
    if (n === null) return;
    const text = input.string(n, `stagedRollout.${key}`, { required: true });
    if (text === undefined) return;
    try {
      policyFromFlags({ [key]: text });
      flags[key] = text;
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
      input.error(`stagedRollout.${key}`, withoutFlag(err.message), n);
    }
  };
  field('waves');
  field('bakeTime');
  field('progressDeadline');
  const onHalt = input.oneOf(input.get(map, 'onHalt'), 'stagedRollout.onHalt', HALT_ACTIONS, 'revert');
  if (onHalt !== undefined) flags.onHalt = onHalt;
  const canaryNode = input.get(map, 'canary');
  const canary = canaryNode === null ? undefined : input.map(canaryNode, 'stagedRollout.canary');
  if (canary) {
    input.pairs(canary, 'stagedRollout.canary', CANARY_KEYS);
    const selectorNode = input.get(canary, 'selector');
    const selector = input.string(selectorNode, 'stagedRollout.canary.selector');
    const countNode = input.get(canary, 'count');
    const count = countNode === null ? undefined : input.integer(countNode, 'stagedRollout.canary.count', { min: 1 });
    // As the chart: a selector, when set, wins over the count.
    if (selector !== undefined && selector !== '') {
      try {
        policyFromFlags({ canarySelector: selector });
        flags.canarySelector = selector;
      } catch (err) {
        if (!(err instanceof UsageError)) throw err;
        input.error('stagedRollout.canary.selector', withoutFlag(err.message), selectorNode);
      }
    } else if (count !== undefined) {
      if (count > 1000) input.error('stagedRollout.canary.count', 'at most 1000', countNode);
      else flags.canaryCount = count;
    }
  }
  if (input.failed) return undefined;
  return policyFromFlags(flags);
}

function readLabels(input: Input, node: Node | null, path: string): Record<string, string> {
  const labels: Record<string, string> = {};
  if (node === null) return labels;
  const map = input.map(node, path);
  for (const p of map ? input.pairs(map, path) : []) {
    const keyErrors = qualifiedNameErrors(p.key, 'a label key');
    if (keyErrors.length > 0) {
      input.error(`${path}.${p.key}`, `not a valid label key: ${keyErrors.join('; ')}`, p.keyNode);
      continue;
    }
    const value = input.string(p.value, `${path}.${p.key}`) ?? '';
    const valueErrors = labelValueErrors(value);
    if (valueErrors.length > 0)
      input.error(`${path}.${p.key}`, `not a valid label value: ${valueErrors.join('; ')}`, p.value);
    else labels[p.key] = value;
  }
  return labels;
}

function readNodeName(input: Input, node: Node | null, path: string): string | undefined {
  const name = input.string(node, path, { required: true });
  if (name === undefined) return undefined;
  const problem = nodeNameProblem(name);
  if (problem !== undefined) {
    input.error(path, problem, node);
    return undefined;
  }
  return name;
}

/**
 * The `fleet:` — a list of node names or `{ name, labels }`, or `{ count, labels }` for `count`
 * nodes named `node-01` … (zero-padded to the count's width).
 */
export function readFleet(input: Input, node: Node | null): FleetNodeSpec[] {
  const fleet: FleetNodeSpec[] = [];
  if (node === null) return fleet;
  if (isMap(node)) {
    input.pairs(node, 'fleet', ['count', 'labels']);
    const countNode = input.get(node, 'count');
    if (countNode === null) {
      input.error('fleet.count', 'is required: how many nodes (or give the fleet as a list of node names)', node);
      return fleet;
    }
    const count = input.integer(countNode, 'fleet.count', { min: 1 });
    const labels = readLabels(input, input.get(node, 'labels'), 'fleet.labels');
    if (count === undefined) return fleet;
    if (count > MAX_FLEET) {
      input.error('fleet.count', `at most ${String(MAX_FLEET)} nodes`, countNode);
      return fleet;
    }
    const width = String(count).length < 2 ? 2 : String(count).length;
    for (let i = 1; i <= count; i++) fleet.push({ name: `node-${String(i).padStart(width, '0')}`, labels });
    return fleet;
  }
  if (!isSeq(node)) {
    input.error('fleet', 'expected a list of nodes (names or { name, labels }), or { count, labels }', node);
    return fleet;
  }
  const items = input.list(node, 'fleet') ?? [];
  if (items.length > MAX_FLEET) input.error('fleet', `at most ${String(MAX_FLEET)} nodes`, node);
  const seen = new Set<string>();
  items.forEach((item, i) => {
    const at = `fleet[${String(i)}]`;
    let name: string | undefined;
    let labels: Record<string, string> = {};
    if (isScalar(item)) name = readNodeName(input, item, at);
    else {
      const m: YAMLMap | undefined = input.map(item, at);
      if (!m) return;
      input.pairs(m, at, ['name', 'labels']);
      name = readNodeName(input, input.get(m, 'name'), `${at}.name`);
      labels = readLabels(input, input.get(m, 'labels'), `${at}.labels`);
    }
    if (name === undefined) return;
    if (seen.has(name)) {
      input.error(at, `node ${name} is listed twice`, item);
      return;
    }
    seen.add(name);
    fleet.push({ name, labels });
  });
  return fleet;
}
