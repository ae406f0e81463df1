// What the real apiserver does per kind, for the in-memory cluster: defaulting, admission (the
// StorageObjectInUseProtection and TaintNodesByCondition plugins), status handling and the
// validation the agent could run into, with the apiserver's field paths and wording. Each rule here
// was checked against a real kube-apiserver (see test/contract/cluster-contract.ts).
import { isRecord } from '../../unknown-values.js';
import { RESOURCES, type ResourceInfo, type ResourceName } from '../cluster.js';
import { dns1123SubdomainErrors, labelValueErrors, qualifiedNameErrors } from '../validation.js';
import { fieldError, type FieldError } from './field-errors.js';
import { arrayAt, child, jsonEqual, objectAt, stringAt, valueAt, type JsonObject } from './json.js';

/** Problems that make the apiserver refuse to even decode the body (400 BadRequest). */
export class DecodeError extends Error {}

export interface StrategyContext {
  /** RFC 3339 timestamp of the request. */
  readonly now: string;
}

/** How the apiserver handles one resource; its identity (kind, group, namespaced) is RESOURCES'. */
export interface KindStrategy extends ResourceInfo {
  /** Has a `/status` subresource: the main resource ignores status, updateStatus ignores the rest. */
  readonly statusSubresource: boolean;
  /** metadata.generation is managed by the server (starts at 1, bumps on spec changes). */
  readonly managesGeneration: boolean;
  /** Propagation policy of a delete that names none. */
  readonly defaultPropagation: 'Background' | 'Orphan';
  validateName(name: string): string[];
  /** Server-side defaults (applied to every write, as the decoder does). */
  applyDefaults(object: JsonObject): void;
  /** Create: reset what clients may not set, run admission. */
  prepareForCreate(object: JsonObject, context: StrategyContext): void;
  /** PUT/PATCH of the main resource of a kind with a status subresource: keep the status. */
  prepareForUpdate(object: JsonObject, old: JsonObject, context: StrategyContext): void;
  /** PUT of the status subresource: keep everything but metadata and status. */
  prepareForStatusUpdate(object: JsonObject, old: JsonObject, context: StrategyContext): void;
  validate(object: JsonObject): FieldError[];
  validateUpdate(object: JsonObject, old: JsonObject): FieldError[];
  validateStatus(object: JsonObject): FieldError[];
  /** True when the change bumps metadata.generation. */
  specChanged(object: JsonObject, old: JsonObject): boolean;
  /**
   * Graceful deletion (pods): the seconds a delete leaves the object terminating, given the grace
   * period the request asked for; 0 or absent deletes it at once.
   */
  deletionGracePeriod?(object: JsonObject, requested: number | undefined): number;
}

/** `jobs.batch`: the qualified resource used in NotFound/AlreadyExists/Conflict messages. */
export function qualifiedResource(strategy: KindStrategy): string {
  return strategy.group === '' ? strategy.resource : `${strategy.resource}.${strategy.group}`;
}

/** `Job.batch`: the qualified kind used in Invalid messages. */
export function qualifiedKind(strategy: KindStrategy): string {
  return strategy.group === '' ? strategy.kind : `${strategy.kind}.${strategy.group}`;
}

// ---------------------------------------------------------------------------------------------
// Shared pieces

const QUANTITY = /^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$/;

/** resource.ParseQuantity, enough to tell valid from invalid and zero/negative from positive. */
function quantitySign(value: unknown): number {
  if (typeof value !== 'string' && typeof value !== 'number') {
    throw new DecodeError('quantities must match the regular expression');
  }
  const text = String(value);
  const match = QUANTITY.exec(text);
  const number = match?.[1];
  if (match === null || number === undefined || !/^[+-]?(\d+\.?\d*|\.\d+)$/.test(number)) {
    throw new DecodeError(
      "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    );
  }
  const suffix = match[2] ?? '';
  if (!/^(|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][-+]?\d+)$/.test(suffix)) {
    throw new DecodeError("unable to parse quantity's suffix");
  }
  return Math.sign(Number(number));
}

function pathNoBacksteps(field: string, path: string): FieldError[] {
  return path.split('/').includes('..') ? [fieldError.invalid(field, path, "must not contain '..'")] : [];
}

/** path.ValidatePathSegmentName: what Events' names are held to. */
function pathSegmentNameErrors(name: string): string[] {
  if (name === '.' || name === '..') return [`may not be '${name}'`];
  const errors: string[] = [];
  if (name.includes('/')) errors.push("may not contain '/'");
  if (name.includes('%')) errors.push("may not contain '%'");
  return errors;
}

function keepStatus(object: JsonObject, old: JsonObject): void {
  if (old['status'] === undefined) delete object['status'];
  else object['status'] = structuredClone(old['status']);
}

/** Everything except apiVersion, kind, metadata and status: what a status update may not change. */
function keepAllButMetadataAndStatus(object: JsonObject, old: JsonObject): void {
  for (const key of Object.keys(object)) {
    if (!['apiVersion', 'kind', 'metadata', 'status'].includes(key)) Reflect.deleteProperty(object, key);
  }
  for (const [key, value] of Object.entries(old)) {
    if (!['apiVersion', 'kind', 'metadata', 'status'].includes(key)) object[key] = structuredClone(value);
  }
}

function supported(field: string, value: unknown, values: readonly string[]): FieldError[] {
  return typeof value === 'string' && values.includes(value) ? [] : [fieldError.notSupported(field, value, values)];
}

function validateNodeSelectorRequirement(field: string, requirement: unknown): FieldError[] {
  const errors: FieldError[] = [];
  const operator = stringAt(requirement, 'operator');
  const values = arrayAt(requirement, 'values') ?? [];
  switch (operator) {
    case 'In':
    case 'NotIn':
      if (values.length === 0) {
        errors.push(fieldError.required(`${field}.values`, "must be specified when `operator` is 'In' or 'NotIn'"));
      }
      break;
    case 'Exists':
    case 'DoesNotExist':
      if (values.length > 0) {
        errors.push(
          fieldError.forbidden(`${field}.values`, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
        );
      }
      break;
    case 'Gt':
    case 'Lt':
      if (values.length !== 1) {
        errors.push(
          fieldError.required(`${field}.values`, "must be specified single value when `operator` is 'Lt' or 'Gt'"),
        );
      }
      break;
    default:
      errors.push(fieldError.invalid(`${field}.operator`, operator ?? '', 'not a valid selector operator'));
  }
  const key = stringAt(requirement, 'key') ?? '';
  const keyErrors = qualifiedNameErrors(key);
  if (keyErrors.length > 0) errors.push(fieldError.invalid(`${field}.key`, key, keyErrors.join('; ')));
  return errors;
}

function validateNodeAffinity(affinity: unknown): FieldError[] {
  const required = valueAt(affinity, 'required');
  if (!isRecord(required)) {
    return [fieldError.required('spec.nodeAffinity.required', 'must specify required node constraints')];
  }
  const terms = arrayAt(required, 'nodeSelectorTerms') ?? [];
  if (terms.length === 0) {
    return [
      fieldError.required('spec.nodeAffinity.required.nodeSelectorTerms', 'must have at least one node selector term'),
    ];
  }
  const errors: FieldError[] = [];
  terms.forEach((term, i) => {
    const field = `spec.nodeAffinity.required.nodeSelectorTerms[${i}]`;
    (arrayAt(term, 'matchExpressions') ?? []).forEach((requirement, j) => {
      errors.push(...validateNodeSelectorRequirement(`${field}.matchExpressions[${j}]`, requirement));
    });
  });
  return errors;
}

function setDefault(object: JsonObject, key: string, value: unknown): void {
  if (object[key] === undefined || object[key] === null || object[key] === '') object[key] = value;
}

/** What a kind does beyond a plain one: no status, defaults, admission or rules; DNS-subdomain names. */
type StrategyRules = Partial<Omit<KindStrategy, keyof ResourceInfo>>;

function strategy(resource: ResourceName, rules: StrategyRules): KindStrategy {
  return {
    ...RESOURCES[resource],
    statusSubresource: false,
    managesGeneration: false,
    defaultPropagation: 'Background',
    validateName: dns1123SubdomainErrors,
    applyDefaults: () => undefined,
    prepareForCreate: () => undefined,
    // Used only where there is a status subresource (the cluster calls neither otherwise).
    prepareForUpdate: keepStatus,
    prepareForStatusUpdate: keepAllButMetadataAndStatus,
    validate: () => [],
    validateUpdate: () => [],
    validateStatus: () => [],
    specChanged: () => false,
    ...rules,
  };
}

// ---------------------------------------------------------------------------------------------
// PersistentVolume

/** The volume sources of a PV, in the order ValidatePersistentVolumeSpec checks them. */
const PV_SOURCES = [
  'gcePersistentDisk',
  'awsElasticBlockStore',
  'hostPath',
  'glusterfs',
  'flocker',
  'nfs',
  'rbd',
  'quobyte',
  'cephfs',
  'iscsi',
  'cinder',
  'fc',
  'flexVolume',
  'azureFile',
  'vsphereVolume',
  'photonPersistentDisk',
  'portworxVolume',
  'azureDisk',
  'scaleIO',
  'local',
  'storageos',
  'csi',
] as const;

const ACCESS_MODES = ['ReadOnlyMany', 'ReadWriteMany', 'ReadWriteOnce', 'ReadWriteOncePod'];

const persistentVolumeStrategy = strategy('persistentVolumes', {
  statusSubresource: true,
  applyDefaults(object) {
    const spec = child(object, 'spec');
    setDefault(spec, 'persistentVolumeReclaimPolicy', 'Retain');
    setDefault(spec, 'volumeMode', 'Filesystem');
    setDefault(child(object, 'status'), 'phase', 'Pending');
    const hostPath = objectAt(spec, 'hostPath');
    if (hostPath !== undefined) setDefault(hostPath, 'type', '');
    const capacity = objectAt(spec, 'capacity');
    for (const value of Object.values(capacity ?? {})) quantitySign(value);
  },
  prepareForCreate(object, { now }) {
    // The strategy drops any client-set status; a new PV is Pending until the PV controller runs.
    object['status'] = { phase: 'Pending', lastPhaseTransitionTime: now };
    // Admission: StorageObjectInUseProtection.
    const metadata = child(object, 'metadata');
    const finalizers = arrayAt(metadata, 'finalizers') ?? [];
    if (!finalizers.includes('kubernetes.io/pv-protection')) {
      metadata['finalizers'] = [...finalizers, 'kubernetes.io/pv-protection'];
    }
  },
  prepareForStatusUpdate(object, old, { now }) {
    keepAllButMetadataAndStatus(object, old);
    const phase = stringAt(object, 'status', 'phase');
    if (phase !== stringAt(old, 'status', 'phase')) child(object, 'status')['lastPhaseTransitionTime'] = now;
  },
  validate(object) {
    const errors: FieldError[] = [];
    const spec = objectAt(object, 'spec') ?? {};
    const accessModes = arrayAt(spec, 'accessModes') ?? [];
    if (accessModes.length === 0) errors.push(fieldError.required('spec.accessModes'));
    for (const mode of accessModes) errors.push(...supported('spec.accessModes', mode, ACCESS_MODES));
    if (accessModes.includes('ReadWriteOncePod') && accessModes.length > 1) {
      errors.push(fieldError.forbidden('spec.accessModes', 'may not use ReadWriteOncePod with other access modes'));
    }
    const capacity = objectAt(spec, 'capacity');
    if (capacity === undefined || Object.keys(capacity).length === 0) {
      errors.push(fieldError.required('spec.capacity'));
    } else if (Object.keys(capacity).some((k) => k !== 'storage')) {
      errors.push(fieldError.notSupported('spec.capacity', capacity, ['storage']));
    } else if (quantitySign(capacity['storage']) <= 0) {
      errors.push(
        fieldError.invalid('spec.capacity[storage]', String(capacity['storage']), 'must be greater than zero'),
      );
    }
    const className = stringAt(spec, 'storageClassName');
    if (className !== undefined && className !== '') {
      const problems = dns1123SubdomainErrors(className);
      if (problems.length > 0) errors.push(fieldError.invalid('spec.storageClassName', className, problems.join('; ')));
    }
    errors.push(
      ...supported('spec.persistentVolumeReclaimPolicy', spec['persistentVolumeReclaimPolicy'], [
        'Delete',
        'Recycle',
        'Retain',
      ]),
    );
    errors.push(...supported('spec.volumeMode', spec['volumeMode'], ['Block', 'Filesystem']));
    let sources = 0;
    for (const source of PV_SOURCES) {
      if (spec[source] === undefined || spec[source] === null) continue;
      sources++;
      if (sources > 1) {
        errors.push(fieldError.forbidden(`spec.${source}`, 'may not specify more than 1 volume type'));
        continue;
      }
      if (source === 'hostPath' || source === 'local') {
        const path = stringAt(spec, source, 'path') ?? '';
        if (path === '') errors.push(fieldError.required(`spec.${source}.path`));
        else errors.push(...pathNoBacksteps(`spec.${source}.path`, path));
      }
    }
    if (sources === 0) errors.push(fieldError.required('spec', 'must specify a volume type'));
    if (spec['nodeAffinity'] !== undefined && spec['nodeAffinity'] !== null) {
      errors.push(...validateNodeAffinity(spec['nodeAffinity']));
    } else if (spec['local'] !== undefined && spec['local'] !== null) {
      errors.push(fieldError.required('spec.nodeAffinity', 'Local volume requires node affinity'));
    }
    return errors;
  },
  validateUpdate(object, old) {
    const errors: FieldError[] = [];
    const spec = objectAt(object, 'spec') ?? {};
    const oldSpec = objectAt(old, 'spec') ?? {};
    if (PV_SOURCES.some((source) => !jsonEqual(spec[source], oldSpec[source]))) {
      errors.push(
        fieldError.forbidden('spec.persistentvolumesource', 'spec.persistentvolumesource is immutable after creation'),
      );
    }
    if (spec['volumeMode'] !== oldSpec['volumeMode']) {
      errors.push(fieldError.invalid('volumeMode', spec['volumeMode'], 'field is immutable'));
    }
    if (oldSpec['nodeAffinity'] !== undefined && !jsonEqual(spec['nodeAffinity'], oldSpec['nodeAffinity'])) {
      errors.push(
        fieldError.invalid(
          'nodeAffinity',
          spec['nodeAffinity'],
          'field is immutable, except for updating from beta label to GA',
        ),
      );
    }
    return errors;
  },
  // No validateStatus: the apiserver accepts any phase (an empty one is defaulted to Pending).
});

// ---------------------------------------------------------------------------------------------
// StorageClass

const storageClassStrategy = strategy('storageClasses', {
  applyDefaults(object) {
    setDefault(object, 'reclaimPolicy', 'Delete');
    setDefault(object, 'volumeBindingMode', 'Immediate');
  },
  validate(object) {
    const errors: FieldError[] = [];
    const provisioner = stringAt(object, 'provisioner') ?? '';
    if (provisioner === '') errors.push(fieldError.required('provisioner'));
    errors.push(...supported('reclaimPolicy', object['reclaimPolicy'], ['Delete', 'Retain']));
    errors.push(...supported('volumeBindingMode', object['volumeBindingMode'], ['Immediate', 'WaitForFirstConsumer']));
    return errors;
  },
  validateUpdate(object, old) {
    const errors: FieldError[] = [];
    if (!jsonEqual(object['parameters'], old['parameters'])) {
      errors.push(fieldError.forbidden('parameters', 'updates to parameters are forbidden.'));
    }
    if (object['provisioner'] !== old['provisioner']) {
      errors.push(fieldError.forbidden('provisioner', 'updates to provisioner are forbidden.'));
    }
    if (object['reclaimPolicy'] !== old['reclaimPolicy']) {
      errors.push(fieldError.forbidden('reclaimPolicy', 'updates to reclaimPolicy are forbidden.'));
    }
    if (object['volumeBindingMode'] !== old['volumeBindingMode']) {
      errors.push(fieldError.invalid('volumeBindingMode', object['volumeBindingMode'], 'field is immutable'));
    }
    return errors;
  },
});

// ---------------------------------------------------------------------------------------------
// Node

const NOT_READY_TAINT = { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' };

const nodeStrategy = strategy('nodes', {
  statusSubresource: true,
  applyDefaults(object) {
    const status = objectAt(object, 'status');
    if (status !== undefined && status['allocatable'] === undefined && isRecord(status['capacity'])) {
      status['allocatable'] = structuredClone(status['capacity']);
    }
  },
  prepareForCreate(object) {
    // Admission: TaintNodesByCondition taints every new node not-ready until a kubelet reports.
    const spec = child(object, 'spec');
    const taints = arrayAt(spec, 'taints') ?? [];
    if (!taints.some((t) => stringAt(t, 'key') === NOT_READY_TAINT.key && stringAt(t, 'effect') === 'NoSchedule')) {
      spec['taints'] = [...taints, { ...NOT_READY_TAINT }];
    }
  },
});

// ---------------------------------------------------------------------------------------------
// ConfigMap (core/v1)

const configMapStrategy = strategy('configMaps', {
  validate(object) {
    const data = objectAt(object, 'data') ?? {};
    return Object.entries(data)
      .filter(([, value]) => typeof value !== 'string')
      .map(([key, value]) => fieldError.invalid(`data[${key}]`, value, 'must be a string'));
  },
});

// ---------------------------------------------------------------------------------------------
// Event (core/v1)

const eventStrategy = strategy('events', {
  validateName: pathSegmentNameErrors,
  validate(object) {
    const namespace = stringAt(object, 'metadata', 'namespace') ?? '';
    const involved = stringAt(object, 'involvedObject', 'namespace') ?? '';
    // An event about a cluster-scoped object (a PV, a Node) must live in `default`.
    if (involved === '' ? namespace !== '' && namespace !== 'default' : involved !== namespace) {
      return [fieldError.invalid('involvedObject.namespace', involved, 'does not match event.namespace')];
    }
    return [];
  },
});

// ---------------------------------------------------------------------------------------------
// Job (batch/v1)

const JOB_IMMUTABLE_SPEC = ['template', 'selector', 'completionMode', 'manualSelector', 'podFailurePolicy'];

const jobStrategy = strategy('jobs', {
  statusSubresource: true,
  managesGeneration: true,
  // batch/v1 Jobs still default to orphaning their pods: a plain delete adds the `orphan` finalizer.
  defaultPropagation: 'Orphan',
  applyDefaults(object) {
    const spec = child(object, 'spec');
    setDefault(spec, 'parallelism', 1);
    setDefault(spec, 'completions', 1);
    setDefault(spec, 'backoffLimit', 6);
    setDefault(spec, 'completionMode', 'NonIndexed');
    setDefault(spec, 'suspend', false);
    setDefault(spec, 'manualSelector', false);
    setDefault(spec, 'podReplacementPolicy', 'TerminatingOrFailed');
  },
  prepareForCreate(object) {
    object['status'] = {};
    const metadata = child(object, 'metadata');
    const uid = stringAt(metadata, 'uid') ?? '';
    const name = stringAt(metadata, 'name') ?? '';
    const spec = child(object, 'spec');
    if (spec['manualSelector'] !== true) {
      spec['selector'] = { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } };
      const templateMetadata = child(child(spec, 'template'), 'metadata');
      templateMetadata['labels'] = {
        ...(objectAt(templateMetadata, 'labels') ?? {}),
        'batch.kubernetes.io/controller-uid': uid,
        'batch.kubernetes.io/job-name': name,
        'controller-uid': uid,
        'job-name': name,
      };
    }
  },
  validate(object) {
    const errors: FieldError[] = [];
    const labels = objectAt(object, 'spec', 'template', 'metadata', 'labels') ?? {};
    for (const value of Object.values(labels)) {
      if (typeof value === 'string' && value.length > 63) {
        errors.push(fieldError.invalid('spec.template.labels', value, 'must be no more than 63 bytes'));
      } else if (typeof value === 'string' && labelValueErrors(value).length > 0) {
        errors.push(fieldError.invalid('spec.template.labels', value, labelValueErrors(value).join('; ')));
      }
    }
    const podSpec = objectAt(object, 'spec', 'template', 'spec') ?? {};
    const containers = arrayAt(podSpec, 'containers') ?? [];
    if (containers.length === 0) errors.push(fieldError.required('spec.template.spec.containers'));
    containers.forEach((container, i) => {
      const field = `spec.template.spec.containers[${i}]`;
      if ((stringAt(container, 'name') ?? '') === '') errors.push(fieldError.required(`${field}.name`));
      if ((stringAt(container, 'image') ?? '') === '') errors.push(fieldError.required(`${field}.image`));
    });
    const restartPolicy = podSpec['restartPolicy'];
    if (restartPolicy === undefined || restartPolicy === '') {
      errors.push(fieldError.required('spec.template.spec.restartPolicy', 'valid values: "OnFailure", "Never"'));
    } else {
      errors.push(...supported('spec.template.spec.restartPolicy', restartPolicy, ['OnFailure', 'Never']));
    }
    return errors;
  },
  validateUpdate(object, old) {
    const errors: FieldError[] = [];
    for (const key of JOB_IMMUTABLE_SPEC) {
      const now = valueAt(object, 'spec', key);
      if (!jsonEqual(now, valueAt(old, 'spec', key))) {
        errors.push(fieldError.invalid(`spec.${key}`, now, 'field is immutable'));
      }
    }
    return errors;
  },
  specChanged: (object, old) => !jsonEqual(object['spec'], old['spec']),
});

// ---------------------------------------------------------------------------------------------
// Lease (coordination.k8s.io/v1)

/** metav1.MicroTime as the apiserver decodes it: RFC 3339 with exactly six fraction digits. */
const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;

function checkMicroTime(spec: JsonObject, key: string): void {
  const value = spec[key];
  if (value === undefined || value === null) return;
  if (typeof value !== 'string' || !MICRO_TIME.test(value) || Number.isNaN(Date.parse(value))) {
    throw new DecodeError(
      `parsing time ${JSON.stringify(value)} as "2006-01-02T15:04:05.000000Z07:00": cannot parse as MicroTime`,
    );
  }
}

const leaseStrategy = strategy('leases', {
  applyDefaults(object) {
    const spec = objectAt(object, 'spec');
    if (spec === undefined) return;
    checkMicroTime(spec, 'renewTime');
    checkMicroTime(spec, 'acquireTime');
  },
  validate(object) {
    const errors: FieldError[] = [];
    const duration = valueAt(object, 'spec', 'leaseDurationSeconds');
    if (typeof duration === 'number' && duration <= 0)
      errors.push(fieldError.invalid('spec.leaseDurationSeconds', duration, 'must be greater than 0'));
    const transitions = valueAt(object, 'spec', 'leaseTransitions');
    if (typeof transitions === 'number' && transitions < 0)
      errors.push(fieldError.invalid('spec.leaseTransitions', transitions, 'must be greater than or equal to 0'));
    return errors;
  },
});

// ---------------------------------------------------------------------------------------------
// PersistentVolumeClaim (core/v1)

const persistentVolumeClaimStrategy = strategy('persistentVolumeClaims', {
  statusSubresource: true,
  applyDefaults(object) {
    setDefault(child(object, 'spec'), 'volumeMode', 'Filesystem');
  },
  prepareForCreate(object) {
    object['status'] = { phase: 'Pending' };
    // Admission: StorageObjectInUseProtection.
    const metadata = child(object, 'metadata');
    const finalizers = arrayAt(metadata, 'finalizers') ?? [];
    if (!finalizers.includes('kubernetes.io/pvc-protection')) {
      metadata['finalizers'] = [...finalizers, 'kubernetes.io/pvc-protection'];
    }
  },
  validate(object) {
    const errors: FieldError[] = [];
    const accessModes = arrayAt(object, 'spec', 'accessModes') ?? [];
    if (accessModes.length === 0) errors.push(fieldError.required('spec.accessModes'));
    for (const mode of accessModes) errors.push(...supported('spec.accessModes', mode, ACCESS_MODES));
    const storage = valueAt(object, 'spec', 'resources', 'requests', 'storage');
    if (storage === undefined) errors.push(fieldError.required('spec.resources[storage]'));
    else quantitySign(storage);
    return errors;
  },
});

// ---------------------------------------------------------------------------------------------
// Pod (core/v1): only what the node cleanup reads; graceful deletion as the registry does it

const podStrategy = strategy('pods', {
  statusSubresource: true,
  applyDefaults(object) {
    const spec = child(object, 'spec');
    setDefault(spec, 'restartPolicy', 'Always');
    setDefault(spec, 'terminationGracePeriodSeconds', 30);
  },
  prepareForCreate(object) {
    object['status'] = { phase: 'Pending' };
  },
  validate(object) {
    const errors: FieldError[] = [];
    const containers = arrayAt(object, 'spec', 'containers') ?? [];
    if (containers.length === 0) errors.push(fieldError.required('spec.containers'));
    containers.forEach((container, i) => {
      const field = `spec.containers[${i}]`;
      if ((stringAt(container, 'name') ?? '') === '') errors.push(fieldError.required(`${field}.name`));
      if ((stringAt(container, 'image') ?? '') === '') errors.push(fieldError.required(`${field}.image`));
    });
    return errors;
  },
  deletionGracePeriod(object, requested) {
    // The registry deletes a pod at once that no kubelet runs (unscheduled) or that has finished.
    const phase = stringAt(object, 'status', 'phase');
    if ((stringAt(object, 'spec', 'nodeName') ?? '') === '' || phase === 'Succeeded' || phase === 'Failed') return 0;
    const configured = valueAt(object, 'spec', 'terminationGracePeriodSeconds');
    return requested ?? (typeof configured === 'number' ? configured : 30);
  },
});

/** Each resource's strategy. */
export const STRATEGIES: { readonly [K in ResourceName]: KindStrategy } = {
  persistentVolumes: persistentVolumeStrategy,
  storageClasses: storageClassStrategy,
  nodes: nodeStrategy,
  events: eventStrategy,
  jobs: jobStrategy,
  configMaps: configMapStrategy,
  leases: leaseStrategy,
  persistentVolumeClaims: persistentVolumeClaimStrategy,
  pods: podStrategy,
};
