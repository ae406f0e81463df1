// The disks-by-rule part of simulate's plan: each device a rule selects and its verdict, as text
// lines and as JSON (docs/simulate.md "Output", docs/schemas/simulate.v1.schema.json), and what a
// reload changes about them.
import type { DevicePlan, DeviceState, PlannedDevice } from '../core/simulate/device-plan.js';
import type { PlanDelta } from '../core/simulate/plan.js';
import { plural } from './text.js';
import type { Painter } from './text.js';

export interface PlanDeviceJson {
  readonly device: string;
  readonly storageClass: string;
  readonly verdict: PlannedDevice['verdict'];
  readonly state: DeviceState;
  readonly mode?: string;
  readonly rule?: number;
  readonly size?: string;
  readonly sizeBytes?: number;
  readonly model?: string;
  readonly entry?: string;
  readonly target?: string;
  readonly partitions?: number;
  readonly reason?: string;
  readonly detail?: string;
  readonly error?: string;
  readonly pv?: string;
  readonly message: string;
}

export interface PlanDevicesJson {
  readonly selected: readonly PlanDeviceJson[];
  readonly summary: {
    readonly link: number;
    readonly carve: number;
    readonly planned: number;
    readonly linked: number;
    readonly skipped: number;
    readonly failed: number;
  };
  readonly problem?: string;
}

/** What the pass does with a device, in one sentence. */
export function deviceMessage(d: PlannedDevice): string {
  if (d.error !== undefined)
    return `${d.verdict === 'carve' ? 'carving' : 'the link'} fails: ${d.error}; the device is left as it is`;
  const planOnly = `but rule ${String(d.rule ?? 0)} is in plan mode: reported only`;
  const link = `${d.entry ?? '?'} -> ${d.target ?? '?'}`;
  switch (d.state) {
    case 'link':
      return `links ${link}${d.pv !== undefined ? `; discovery publishes it as ${d.pv}` : ''}`;
    case 'planned':
      return `would link ${link}, ${planOnly}`;
    case 'carve':
      return `carves it into ${plural(d.partitions ?? 0, 'partition')}; the next pass links them`;
    case 'carve-planned':
      return `would carve it into ${plural(d.partitions ?? 0, 'partition')}, ${planOnly}`;
    case 'linked':
      return `already linked as ${d.entry ?? '?'}`;
    case 'carved':
      return `already carved by the agent (${plural(d.partitions ?? 0, 'partition')})`;
    default:
      return `${d.detail ?? d.state}; left untouched`;
  }
}

function summary(devices: readonly PlannedDevice[]): PlanDevicesJson['summary'] {
  const count = (states: readonly DeviceState[]): number =>
    devices.filter((d) => d.error === undefined && states.includes(d.state)).length;
  return {
    link: count(['link']),
    carve: count(['carve']),
    planned: count(['planned', 'carve-planned']),
    linked: count(['linked', 'carved']),
    skipped: devices.filter((d) => d.verdict === 'skip').length,
    failed: devices.filter((d) => d.error !== undefined).length,
  };
}

export function devicesJson(plan: DevicePlan): PlanDevicesJson {
  return {
    selected: plan.devices.map((d) => {
      const { device, className, ...rest } = d;
      return { device, storageClass: className, ...rest, message: deviceMessage(d) };
    }),
    summary: summary(plan.devices),
    ...(plan.problem !== undefined ? { problem: plan.problem } : {}),
  };
}

function mark(d: PlannedDevice, paint: Painter): string {
  if (d.error !== undefined) return paint.red('!');
  if (d.state === 'link' || d.state === 'carve') return paint.green('+');
  if (d.state === 'planned' || d.state === 'carve-planned') return paint.yellow('?');
  if (d.state === 'linked' || d.state === 'carved') return '=';
  return '-';
}

/** The rows of the plan's devices section (the caller lays them out as a table). */
export function deviceRows(plan: DevicePlan, paint: Painter): string[][] {
  return plan.devices.map((d) => [
    mark(d, paint),
    d.device,
    d.className,
    d.size ?? '?',
    d.verdict === 'skip' ? `skip: ${d.state}` : d.state,
    deviceMessage(d),
  ]);
}

/** `Devices: 2 to link, 1 planned, 1 skipped.` */
export function deviceSummaryLine(plan: DevicePlan): string {
  const s = summary(plan.devices);
  const parts = [
    `${String(s.link)} to link`,
    ...(s.carve > 0 ? [`${String(s.carve)} to carve`] : []),
    `${String(s.planned)} planned (rules in plan mode)`,
    `${String(s.linked)} already linked`,
    `${String(s.skipped)} skipped`,
    ...(s.failed > 0 ? [`${String(s.failed)} failing`] : []),
  ];
  return `Devices: ${parts.join(', ')}.`;
}

/** `link (local-nvme)`, or null for no verdict. */
export function deviceLabel(d: PlannedDevice | undefined): string | null {
  return d ? `${d.state} (${d.className})` : null;
}

export function deviceDeltaJson(
  delta: NonNullable<PlanDelta['devices']>,
): { readonly device: string; readonly before: string | null; readonly after: string | null }[] {
  return delta.map((d) => ({ device: d.device, before: deviceLabel(d.before), after: deviceLabel(d.after) }));
}

export function deviceDeltaLines(delta: PlanDelta['devices'], paint: Painter): string[] {
  return (delta ?? []).map(
    (d) =>
      `  ${paint.yellow('~')} device ${d.device}: ${deviceLabel(d.before) ?? 'not selected'} -> ${deviceLabel(d.after) ?? 'not selected'}`,
  );
}
