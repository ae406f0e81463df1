/**
 * Helpers that play the parts a bare kube-apiserver does not: there is no kubelet (tests create
 * Node objects), no PV controller (tests bind and release PVs), no Job controller (tests write Job
 * status), and the admin user bypasses RBAC (tests get a ServiceAccount with exactly a manifest's
 * roles). Everything goes through the real API with @kubernetes/client-node; nothing is faked.
 *
 * Lint: client-node's models are plain data classes with no instance methods, and its API takes
 * object literals for them (as all of its own examples do), so the class-instance rules do not apply.
 */
/* eslint-disable @typescript-eslint/no-unsafe-class-instance-assignment, @typescript-eslint/no-misused-spread */
import {
  ApiException,
  AuthenticationV1Api,
  AuthorizationV1Api,
  BatchV1Api,
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  Watch,
  type V1ClusterRole,
  type V1Job,
  type V1JobCondition,
  type V1Node,
  type V1PersistentVolume,
  type V1PolicyRule,
  type V1Role,
} from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { setTimeout as delay } from 'node:timers/promises';
import { isRecord } from '../../src/core/unknown-values.js';

/** HTTP status of a failed API call, or undefined when `error` is not an API error. */
export function apiStatusCode(error: unknown): number | undefined {
  if (error instanceof ApiException) return (error as ApiException<unknown>).code;
  return undefined;
}

/** Runs `fn`, retrying on 409 Conflict (a concurrent writer changed the object), like client-go's RetryOnConflict. */
export async function retryOnConflict<T>(fn: () => Promise<T>, attempts = 10): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (error) {
      if (apiStatusCode(error) !== 409 || i >= attempts) throw error;
      await delay(20 * i);
    }
  }
}

/** Creates a Node object (a bare apiserver has no kubelet to register one). */
export async function createNode(kc: KubeConfig, name: string, labels: Record<string, string> = {}): Promise<V1Node> {
  const core = kc.makeApiClient(CoreV1Api);
  return core.createNode({ body: { apiVersion: 'v1', kind: 'Node', metadata: { name, labels } } });
}

export interface ClaimReference {
  readonly namespace: string;
  readonly name: string;
  readonly uid?: string;
}

/**
 * Binds a PV as the PV controller would: sets spec.claimRef, then status.phase=Bound through the
 * status subresource.
 */
export async function bindPersistentVolume(
  kc: KubeConfig,
  pvName: string,
  claim: ClaimReference,
): Promise<V1PersistentVolume> {
  const core = kc.makeApiClient(CoreV1Api);
  await retryOnConflict(async () => {
    const pv = await core.readPersistentVolume({ name: pvName });
    if (pv.spec === undefined) throw new Error(`PersistentVolume ${pvName} has no spec`);
    pv.spec.claimRef = {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      namespace: claim.namespace,
      name: claim.name,
      ...(claim.uid === undefined ? {} : { uid: claim.uid }),
    };
    return core.replacePersistentVolume({ name: pvName, body: pv });
  });
  return setPersistentVolumePhase(core, pvName, 'Bound');
}

/** Marks a PV Released, as the PV controller does when its claim is deleted (claimRef is kept). */
export async function releasePersistentVolume(kc: KubeConfig, pvName: string): Promise<V1PersistentVolume> {
  return setPersistentVolumePhase(kc.makeApiClient(CoreV1Api), pvName, 'Released');
}

/** Marks a new PV Available, as the PV controller does (a bare apiserver leaves it Pending). */
export async function markPersistentVolumeAvailable(kc: KubeConfig, pvName: string): Promise<V1PersistentVolume> {
  return setPersistentVolumePhase(kc.makeApiClient(CoreV1Api), pvName, 'Available');
}

async function setPersistentVolumePhase(core: CoreV1Api, pvName: string, phase: string): Promise<V1PersistentVolume> {
  return retryOnConflict(async () => {
    const pv = await core.readPersistentVolumeStatus({ name: pvName });
    pv.status = { ...pv.status, phase };
    return core.replacePersistentVolumeStatus({ name: pvName, body: pv });
  });
}

export type JobOutcome = 'succeeded' | 'failed';

function condition(type: string, reason: string, message: string, now: Date): V1JobCondition {
  return { type, status: 'True', reason, message, lastProbeTime: now, lastTransitionTime: now };
}

/**
 * Finishes a (non-indexed) Job as the Job controller would, writing a status that the 1.35
 * apiserver's Job status validation accepts:
 * - succeeded: startTime, completionTime >= startTime, succeeded = completions, active 0, and the
 *   conditions SuccessCriteriaMet=True then Complete=True;
 * - failed: startTime, failed > backoffLimit, active 0, no completionTime, and the conditions
 *   FailureTarget=True then Failed=True (reason BackoffLimitExceeded).
 */
export async function markJob(kc: KubeConfig, namespace: string, name: string, outcome: JobOutcome): Promise<V1Job> {
  const batch = kc.makeApiClient(BatchV1Api);
  return retryOnConflict(async () => {
    const job = await batch.readNamespacedJobStatus({ namespace, name });
    const now = new Date();
    const old = job.status ?? {};
    const startTime = old.startTime ?? now;
    const kept = (old.conditions ?? []).filter(
      (c) => !['SuccessCriteriaMet', 'Complete', 'FailureTarget', 'Failed'].includes(c.type),
    );
    if (outcome === 'succeeded') {
      job.status = {
        ...old,
        startTime,
        completionTime: now.getTime() < startTime.getTime() ? startTime : now,
        active: 0,
        ready: 0,
        terminating: 0,
        succeeded: Math.max(old.succeeded ?? 0, job.spec?.completions ?? 1),
        uncountedTerminatedPods: {},
        conditions: [
          ...kept,
          condition('SuccessCriteriaMet', 'CompletionsReached', 'Reached expected number of succeeded pods', now),
          condition('Complete', 'CompletionsReached', 'Reached expected number of succeeded pods', now),
        ],
      };
    } else {
      const rest = { ...old };
      delete rest.completionTime;
      job.status = {
        ...rest,
        startTime,
        active: 0,
        ready: 0,
        terminating: 0,
        failed: Math.max(old.failed ?? 0, (job.spec?.backoffLimit ?? 6) + 1),
        uncountedTerminatedPods: {},
        conditions: [
          ...kept,
          condition('FailureTarget', 'BackoffLimitExceeded', 'Job has reached the specified backoff limit', now),
          condition('Failed', 'BackoffLimitExceeded', 'Job has reached the specified backoff limit', now),
        ],
      };
    }
    return batch.replaceNamespacedJobStatus({ namespace, name, body: job });
  });
}

/** A Role or ClusterRole as found in a deployment manifest. */
export type RbacRole = (V1Role & { kind: 'Role' }) | (V1ClusterRole & { kind: 'ClusterRole' });

/** Parses multi-document YAML and returns its Role and ClusterRole objects (other kinds are ignored). */
export function rbacRolesFromManifests(yamlText: string): RbacRole[] {
  const roles: RbacRole[] = [];
  for (const doc of parseAllDocuments(yamlText)) {
    if (doc.errors.length > 0) throw new Error(`invalid YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value: unknown = doc.toJS();
    if (!isRecord(value) || value['apiVersion'] !== 'rbac.authorization.k8s.io/v1') continue;
    if (value['kind'] !== 'Role' && value['kind'] !== 'ClusterRole') continue;
    const metadata = value['metadata'];
    if (!isRecord(metadata) || typeof metadata['name'] !== 'string') {
      throw new Error(`${value['kind']} without metadata.name in manifest`);
    }
    // Shape checked above; the rules are passed to the apiserver, which validates them.
    roles.push(value as unknown as RbacRole);
  }
  return roles;
}

export interface ServiceAccountAccess {
  /** KubeConfig authenticating as the ServiceAccount (same server and CA as the admin config). */
  readonly kubeConfig: KubeConfig;
  readonly token: string;
  /** `system:serviceaccount:<namespace>:<name>` */
  readonly username: string;
  /** Deletes the bindings, roles and ServiceAccount created by tokenForServiceAccount. */
  cleanup(): Promise<void>;
}

async function ignoreNotFound(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (error) {
    if (apiStatusCode(error) !== 404) throw error;
  }
}

async function createOrReplace<T extends { metadata?: { resourceVersion?: string } }>(
  create: () => Promise<T>,
  read: () => Promise<T>,
  replace: (resourceVersion: string) => Promise<T>,
): Promise<void> {
  try {
    await create();
  } catch (error) {
    if (apiStatusCode(error) !== 409) throw error;
    await retryOnConflict(async () => replace((await read()).metadata?.resourceVersion ?? ''));
  }
}

/** A KubeConfig for the same cluster as `base`, authenticating with `token`. */
export function kubeConfigWithToken(base: KubeConfig, token: string, userName: string): KubeConfig {
  const cluster = base.getCurrentCluster();
  if (cluster === null) throw new Error('base KubeConfig has no current cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ ...cluster, name: 'lvp-test' }],
    users: [{ name: userName, token }],
    contexts: [{ name: 'lvp-test', cluster: 'lvp-test', user: userName, namespace: 'default' }],
    currentContext: 'lvp-test',
  });
  return kc;
}

function firstResourceCheck(
  rule: V1PolicyRule,
): { verb: string; group: string; resource: string; subresource?: string; name?: string } | undefined {
  const verb = rule.verbs[0];
  const resourceRef = rule.resources?.[0];
  if (verb === undefined || resourceRef === undefined) return undefined;
  const [resource = resourceRef, subresource] = resourceRef.split('/');
  const name = rule.resourceNames?.[0];
  return {
    verb,
    group: rule.apiGroups?.[0] ?? '',
    resource,
    ...(subresource === undefined ? {} : { subresource }),
    ...(name === undefined ? {} : { name }),
  };
}

/**
 * Creates ServiceAccount `namespace/name`, creates (or replaces) the given Roles/ClusterRoles, binds
 * each of them to the ServiceAccount, waits until the RBAC authorizer sees the bindings, and mints a
 * token with the TokenRequest API. The returned KubeConfig has exactly those permissions, so a
 * missing one fails with 403 Forbidden.
 */
export async function tokenForServiceAccount(
  admin: KubeConfig,
  namespace: string,
  name: string,
  ...roles: readonly RbacRole[]
): Promise<ServiceAccountAccess> {
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const username = `system:serviceaccount:${namespace}:${name}`;
  const subject = { kind: 'ServiceAccount', name, namespace };
  const cleanups: (() => Promise<void>)[] = [];
  const cleanup = async (): Promise<void> => {
    for (const fn of cleanups.reverse()) await fn();
    cleanups.length = 0;
  };

  try {
    try {
      await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name, namespace } } });
    } catch (error) {
      if (apiStatusCode(error) !== 409) throw error;
    }
    cleanups.push(() => ignoreNotFound(() => core.deleteNamespacedServiceAccount({ namespace, name })));

    for (const role of roles) {
      const roleName = role.metadata?.name;
      if (roleName === undefined) throw new Error(`${role.kind} without metadata.name`);
      const bindingName = `${name}--${roleName}`.slice(0, 253);
      const roleRef = { apiGroup: 'rbac.authorization.k8s.io', kind: role.kind, name: roleName };
      if (role.kind === 'ClusterRole') {
        const body: V1ClusterRole = { ...role, metadata: { ...role.metadata, name: roleName } };
        delete body.metadata?.resourceVersion;
        await createOrReplace(
          () => rbac.createClusterRole({ body }),
          () => rbac.readClusterRole({ name: roleName }),
          (resourceVersion) =>
            rbac.replaceClusterRole({
              name: roleName,
              body: { ...body, metadata: { ...body.metadata, resourceVersion } },
            }),
        );
        cleanups.push(() => ignoreNotFound(() => rbac.deleteClusterRole({ name: roleName })));
        const binding = { metadata: { name: bindingName }, roleRef, subjects: [subject] };
        await createOrReplace(
          () => rbac.createClusterRoleBinding({ body: binding }),
          () => rbac.readClusterRoleBinding({ name: bindingName }),
          (resourceVersion) =>
            rbac.replaceClusterRoleBinding({
              name: bindingName,
              body: { ...binding, metadata: { ...binding.metadata, resourceVersion } },
            }),
        );
        cleanups.push(() => ignoreNotFound(() => rbac.deleteClusterRoleBinding({ name: bindingName })));
      } else {
        const roleNamespace = role.metadata?.namespace ?? namespace;
        const body: V1Role = { ...role, metadata: { ...role.metadata, name: roleName, namespace: roleNamespace } };
        delete body.metadata?.resourceVersion;
        await createOrReplace(
          () => rbac.createNamespacedRole({ namespace: roleNamespace, body }),
          () => rbac.readNamespacedRole({ namespace: roleNamespace, name: roleName }),
          (resourceVersion) =>
            rbac.replaceNamespacedRole({
              namespace: roleNamespace,
              name: roleName,
              body: { ...body, metadata: { ...body.metadata, resourceVersion } },
            }),
        );
        cleanups.push(() =>
          ignoreNotFound(() => rbac.deleteNamespacedRole({ namespace: roleNamespace, name: roleName })),
        );
        const binding = { metadata: { name: bindingName, namespace: roleNamespace }, roleRef, subjects: [subject] };
        await createOrReplace(
          () => rbac.createNamespacedRoleBinding({ namespace: roleNamespace, body: binding }),
          () => rbac.readNamespacedRoleBinding({ namespace: roleNamespace, name: bindingName }),
          (resourceVersion) =>
            rbac.replaceNamespacedRoleBinding({
              namespace: roleNamespace,
              name: bindingName,
              body: { ...binding, metadata: { ...binding.metadata, resourceVersion } },
            }),
        );
        cleanups.push(() =>
          ignoreNotFound(() => rbac.deleteNamespacedRoleBinding({ namespace: roleNamespace, name: bindingName })),
        );
      }
    }

    await waitForRbac(admin, username, roles, namespace);

    const tokenRequest = await core.createNamespacedServiceAccountToken({
      namespace,
      name,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    const token = tokenRequest.status?.token;
    if (token === undefined || token === '') throw new Error(`TokenRequest for ${username} returned no token`);
    await waitUntilAuthenticated(admin, token, username);
    return { kubeConfig: kubeConfigWithToken(admin, token, username), token, username, cleanup };
  } catch (error) {
    await cleanup().catch(() => undefined);
    throw error;
  }
}

/** The RBAC authorizer works from informers: wait until it has seen the new bindings. */
async function waitForRbac(
  admin: KubeConfig,
  user: string,
  roles: readonly RbacRole[],
  namespace: string,
): Promise<void> {
  const authz = admin.makeApiClient(AuthorizationV1Api);
  const deadline = Date.now() + 15_000;
  for (const role of roles) {
    const roleNamespace = role.kind === 'Role' ? (role.metadata?.namespace ?? namespace) : namespace;
    for (const rule of role.rules ?? []) {
      const check = firstResourceCheck(rule);
      if (check === undefined) continue;
      for (;;) {
        const review = await authz.createSubjectAccessReview({
          body: {
            spec: {
              user,
              groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
              resourceAttributes: { ...check, namespace: roleNamespace },
            },
          },
        });
        if (review.status?.allowed === true) break;
        if (Date.now() > deadline) {
          throw new Error(`RBAC for ${user} not effective after 15s: ${JSON.stringify(check)} still denied`);
        }
        await delay(100);
      }
    }
  }
}

/** Make sure the freshly minted token authenticates (TokenReview) before handing it out. */
async function waitUntilAuthenticated(admin: KubeConfig, token: string, username: string): Promise<void> {
  const authn = admin.makeApiClient(AuthenticationV1Api);
  const deadline = Date.now() + 15_000;
  for (;;) {
    const review = await authn.createTokenReview({ body: { spec: { token } } });
    if (review.status?.authenticated === true && review.status.user?.username === username) return;
    if (Date.now() > deadline)
      throw new Error(`token for ${username} does not authenticate: ${JSON.stringify(review.status)}`);
    await delay(100);
  }
}

/**
 * Deletes a PV and removes its finalizers, playing the pv-protection controller (the
 * StorageObjectInUseProtection admission plugin adds `kubernetes.io/pv-protection` on create, and a
 * bare apiserver has no controller to remove it). Resolves once the PV is gone; a missing PV is fine.
 */
export async function deletePersistentVolume(kc: KubeConfig, pvName: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await ignoreNotFound(() => core.deletePersistentVolume({ name: pvName }));
  await ignoreNotFound(() =>
    retryOnConflict(async () => {
      const pv = await core.readPersistentVolume({ name: pvName });
      if ((pv.metadata?.finalizers ?? []).length === 0) return pv;
      pv.metadata = { ...pv.metadata, finalizers: [] };
      return core.replacePersistentVolume({ name: pvName, body: pv });
    }),
  );
  await waitUntilGone(() => core.readPersistentVolume({ name: pvName }), `PersistentVolume ${pvName}`);
}

/**
 * Deletes a Job with propagationPolicy=Background. The batch/v1 default (orphan) adds the `orphan`
 * finalizer, which only the garbage collector removes, and a bare apiserver has none.
 */
export async function deleteJob(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  const batch = kc.makeApiClient(BatchV1Api);
  await ignoreNotFound(() => batch.deleteNamespacedJob({ namespace, name, propagationPolicy: 'Background' }));
  await waitUntilGone(() => batch.readNamespacedJob({ namespace, name }), `Job ${namespace}/${name}`);
}

async function waitUntilGone(read: () => Promise<unknown>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await read();
    } catch (error) {
      if (apiStatusCode(error) === 404) return;
      throw error;
    }
    if (Date.now() > deadline) throw new Error(`${what} still exists after ${timeoutMs} ms`);
    await delay(50);
  }
}

export interface WatchEvent {
  readonly type: string;
  readonly object: unknown;
}

export interface RecordedWatch {
  readonly events: readonly WatchEvent[];
  /** Set when the watch ended (null: closed by the server without an error). */
  readonly ended: { readonly error: unknown } | undefined;
  /** Resolves with the first event (already seen or future) matching `predicate`. */
  waitFor(predicate: (event: WatchEvent) => boolean, timeoutMs?: number): Promise<WatchEvent>;
  /** Resolves when the watch has ended. */
  waitForEnd(timeoutMs?: number): Promise<{ readonly error: unknown }>;
  stop(): void;
}

/** Starts a watch through client-node's Watch and records every event. */
export async function recordWatch(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | number | boolean | undefined>,
): Promise<RecordedWatch> {
  const events: WatchEvent[] = [];
  let ended: { error: unknown } | undefined;
  const listeners = new Set<() => void>();
  const notify = (): void => {
    for (const listener of [...listeners]) listener();
  };
  const controller = await new Watch(kc).watch(
    path,
    query,
    (type: string, object: unknown) => {
      events.push({ type, object });
      notify();
    },
    (error: unknown) => {
      ended = { error: error ?? null };
      notify();
    },
  );
  const waitUntil = <T>(probe: () => T | undefined, timeoutMs: number, what: string): Promise<T> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const value = probe();
        if (value === undefined) return;
        listeners.delete(check);
        clearTimeout(timer);
        resolve(value);
      };
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(
          new Error(
            `timed out after ${timeoutMs} ms waiting for ${what}; events: ${JSON.stringify(events.map((e) => e.type))}`,
          ),
        );
      }, timeoutMs);
      listeners.add(check);
      check();
    });
  return {
    events,
    get ended() {
      return ended;
    },
    waitFor: (predicate, timeoutMs = 10_000) =>
      waitUntil(() => events.find(predicate), timeoutMs, 'a matching watch event'),
    waitForEnd: (timeoutMs = 10_000) => waitUntil(() => ended, timeoutMs, 'the watch to end'),
    stop: () => {
      controller.abort();
    },
  };
}

/** Log lines (JSON, one per line) that report a denied request: "forbidden", or a 403 status. */
export function forbiddenLogLines(stderr: string): string[] {
  const denied = (value: unknown, key: string): boolean => {
    if (typeof value === 'number') return value === 403 && /^(status|code|statusCode)$/u.test(key);
    if (typeof value === 'string') {
      return /forbidden/iu.test(value) || (/^(msg|error|message|reason)$/u.test(key) && /\b403\b/u.test(value));
    }
    if (Array.isArray(value)) return value.some((v) => denied(v, key));
    if (isRecord(value)) return Object.entries(value).some(([k, v]) => denied(v, k));
    return false;
  };
  return stderr
    .split('\n')
    .filter((line) => line.trim() !== '')
    .filter((line) => {
      let record: unknown;
      try {
        record = JSON.parse(line);
      } catch {
        return /forbidden|\b403\b/iu.test(line);
      }
      return denied(record, '');
    });
}
