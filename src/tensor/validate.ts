// Checks of public arguments shared by the constructors and ops (sizes, shapes, integers, scalars, devices,
// option bags): each error names the op, the value given and what would be valid.
import type { ConstValue, DType } from '../dtype.ts';
import { ALL_DTYPES } from '../runtime/backend.ts';
import { Device } from '../runtime/device.ts';

/** A user's value as the error shows it: numbers and arrays as written, strings quoted, else the type. */
export function shown(v: unknown): string {
  if (typeof v === 'string') return `'${v}'`;
  if (typeof v === 'bigint') return `${v}n`;
  if (Array.isArray(v)) return `[${v.map(shown).join(', ')}]`;
  if (v === null || typeof v !== 'object') return String(v);
  const name = (v as object).constructor?.name;
  return name && name !== 'Object' ? `a ${name}` : 'an object';
}

/** A size: a non-negative integer JS numbers hold exactly (NaN, Infinity, -1 and 2.5 are not sizes). */
export const isSize = (d: unknown): d is number => Number.isSafeInteger(d) && (d as number) >= 0;

/** Throws unless shape is an array of sizes. */
export function checkShape(op: string, shape: unknown): asserts shape is readonly number[] {
  if (!Array.isArray(shape))
    throw new Error(`${op}: the shape must be an array of sizes, e.g. [2, 3], got ${shown(shape)}`);
  const bad = shape.findIndex((d) => !isSize(d));
  if (bad >= 0)
    throw new Error(
      `${op}: shape (${shape.map(shown).join(', ')}) has size ${shown(shape[bad])} at axis ${bad}; sizes must be non-negative integers (below 2^53)`,
    );
}

/**
 * A possibly negative axis of a tensor of `shape` with ndim axes, as an index in [0, ndim), or an error
 * naming the op, the shape and the valid range.
 */
export function dimOf(op: string, shape: readonly number[], d: number, ndim = shape.length): number {
  if (Number.isInteger(d) && d >= -ndim && d < ndim) return d < 0 ? d + ndim : d;
  const valid = ndim ? `valid dims are ${-ndim}..${ndim - 1}` : 'it has no dims';
  throw new Error(`${op}: dim ${shown(d)} is out of range for shape (${shape.join(', ')}); ${valid}`);
}

export const isAxes = (axes: unknown): axes is number | readonly number[] =>
  typeof axes === 'number' || (Array.isArray(axes) && axes.every((a) => typeof a === 'number'));

/** Throws unless axes is an axis or a list of them (their ranges are the tensor's to check). */
export function checkAxes(op: string, axes: unknown): asserts axes is number | readonly number[] {
  if (!isAxes(axes))
    throw new Error(`${op}: axes must be a number or an array of numbers, got ${shown(axes)}`);
}

/** Throws unless n is an integer no less than min (a count: min 0, a piece size: min 1). */
export function checkInteger(op: string, what: string, n: unknown, min = -Infinity): asserts n is number {
  if (Number.isSafeInteger(n) && (n as number) >= min) return;
  const valid =
    min === -Infinity ? 'an integer' : min === 0 ? 'a non-negative integer' : `an integer >= ${min}`;
  throw new Error(`${op}: ${what} must be ${valid}, got ${shown(n)}`);
}

/** Throws unless v is a finite number (a probability, a bound, an epsilon: NaN would poison every result). */
export function checkFinite(op: string, what: string, v: unknown): asserts v is number {
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new Error(`${op}: ${what} must be a finite number, got ${shown(v)}`);
}

/** checkFinite for each named value. */
export function checkFinites(op: string, values: Readonly<Record<string, unknown>>): void {
  for (const [what, v] of Object.entries(values)) checkFinite(op, what, v);
}

/** Throws unless v is a value a tensor element can hold: a number, a boolean or a bigint. */
export function checkScalar(op: string, what: string, v: unknown): asserts v is ConstValue {
  if (typeof v !== 'number' && typeof v !== 'boolean' && typeof v !== 'bigint')
    throw new Error(`${op}: ${what} must be a number, boolean or bigint, got ${shown(v)}`);
}

/** A device name in canonical form ('js:0' is 'JS'), or an error naming the op and the valid devices. */
export function deviceOf(op: string, device: unknown): string {
  if (typeof device !== 'string')
    throw new Error(`${op}: the device must be a name such as 'CPU' or 'JS', got ${shown(device)}`);
  try {
    return Device.canonicalize(device);
  } catch (e) {
    throw new Error(`${op}: ${(e as Error).message}`);
  }
}

/** Throws unless opts is absent or an options object (not a number or an array given by mistake). */
export function checkOptions(op: string, opts: unknown): void {
  if (opts !== undefined && (typeof opts !== 'object' || opts === null || Array.isArray(opts)))
    throw new Error(`${op}: options must be an object such as { dtype: 'float32' }, got ${shown(opts)}`);
}

/**
 * Throws unless `device` supports tensors of `dtype` (Backend.dtypes), naming what it supports; `op` is left out
 * for an op's result (the public op's name goes in front, src/tensor/op-names.ts).
 */
export function checkDType(op: string | undefined, dtype: DType, device: string): void {
  const supported = Device.get(device).dtypes();
  if (supported === ALL_DTYPES || supported.has(dtype) || !ALL_DTYPES.has(dtype)) return;
  const names = [...supported].map((d) => d.name).join(', ');
  throw new Error(
    `${op === undefined ? '' : `${op}: `}${device} has no ${dtype.name} tensors; it supports ${names}`,
  );
}
