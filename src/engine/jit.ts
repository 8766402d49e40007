// JIT: the first call runs normally, the second records the kernels it launches and the buffers they use,
// and every later call replays those kernels on the new inputs' buffers, with no tracing or scheduling.
import type { DType } from '../dtype.ts';
import { type GraphReplay, planStarts } from '../runtime/backend.ts';
import type { DeviceBuffer } from '../runtime/buffer.ts';
import { Device } from '../runtime/device.ts';
import { Tensor } from '../tensor/index.ts';
import { noteOverwritten } from '../tensor/origins.ts';
import { Ops } from '../uop/ops.ts';
import type { UOp } from '../uop/uop.ts';
import { deviceBuffer, holdBuffer, letGoOfBuffer } from './buffers.ts';
import { type Launch, recordLaunches } from './realize.ts';

interface Captured {
  launches: Launch[];
  /** The launches as one device graph, where they all run on a device that has graphs. */
  graph: GraphReplay | undefined;
  /** The inputs' buffers in the recorded launches, by argument. */
  inputs: DeviceBuffer[];
  specs: { shape: string; dtype: DType; device: string }[];
  /** The outputs' BUFFERs; replays write into the same buffers. */
  outputs: UOp[];
  /** The BUFFERs the launches use, but the arguments': the capture holds them, so dispose() leaves them. */
  held: UOp[];
  /** The BUFFERs the launches write. */
  written: UOp[];
  single: boolean;
}

export interface Jitted<A extends Tensor[], R> {
  (...args: A): R;
  /** Forgets the capture: the next call runs normally and the one after captures again. */
  reset(): void;
}

const spec = (t: Tensor) => ({ shape: `(${t.shape.join(', ')})`, dtype: t.dtype, device: t.device });

function outputsOf(r: Tensor | readonly Tensor[], name: string): Tensor[] {
  const outs = r instanceof Tensor ? [r] : [...r];
  if (!outs.every((t) => t instanceof Tensor))
    throw new Error(`jit ${name}: the function must return a Tensor or an array of Tensors`);
  return outs;
}

/**
 * Wraps f (a function of tensors returning a tensor or an array of them) so that repeated calls replay
 * its kernels. Every call must pass tensors of the captured shapes, dtypes and devices. The capture holds
 * the buffers its kernels use (disposing a tensor over one leaves it to the JIT). Pitfalls: the
 * outputs of one call are overwritten by the next (copy them with `clone()` to keep them); tensors made
 * inside f from JS data, and JS values f reads, are frozen at the capture; f's JS side effects happen only
 * on the first two calls.
 */
export function jit<A extends Tensor[], R extends Tensor | readonly Tensor[]>(
  f: (...args: A) => R,
): Jitted<A, R> {
  const name = f.name || 'function';
  let calls = 0;
  let captured: Captured | undefined;

  const check = (args: readonly Tensor[]) => {
    args.forEach((a, i) => {
      if (!(a instanceof Tensor))
        throw new Error(`jit ${name}: argument ${i} is not a Tensor; pass tensors only`);
    });
    if (captured === undefined) return;
    if (args.length !== captured.specs.length)
      throw new Error(
        `jit ${name}: called with ${args.length} arguments, captured with ${captured.specs.length}`,
      );
    args.forEach((a, i) => {
      const want = captured!.specs[i]!;
      const got = spec(a);
      if (got.shape !== want.shape || got.dtype !== want.dtype || got.device !== want.device)
        throw new Error(
          `jit ${name}: argument ${i} is ${got.shape} ${got.dtype.name} on ${got.device}, but the call was captured with ${want.shape} ${want.dtype.name} on ${want.device}; jit another function for other shapes`,
        );
    });
  };

  const run = (...args: A): R => {
    check(args);
    for (const a of args) a.realize();
    if (captured !== undefined) return replay(captured, args);
    calls++;
    if (calls === 1) {
      const r = f(...args);
      const outs = outputsOf(r, name);
      outs[0]?.realize(...outs.slice(1));
      return r;
    }
    // deferred initial values (parameters) are written once, before the capture, never on replay
    Tensor.realizeDeferred();
    let r: R | undefined;
    const { launches, buffers, written } = recordLaunches(() => {
      r = f(...args);
      const outs = outputsOf(r, name);
      outs[0]?.realize(...outs.slice(1));
    });
    const outs = outputsOf(r!, name);
    for (const a of args) buffers.delete(a.uop);
    const held = [...buffers];
    for (const b of held) holdBuffer(b);
    const devices = new Set(launches.map((l) => l.program.device));
    captured = {
      launches,
      graph: devices.size === 1 ? Device.get([...devices][0]!).graph(launches) : undefined,
      inputs: args.map((a) => deviceBuffer(a.uop)),
      specs: args.map(spec),
      outputs: outs.map((t) => t.uop),
      held,
      written: [...written],
      single: r instanceof Tensor,
    };
    return r!;
  };

  function replay(c: Captured, args: readonly Tensor[]): R {
    const swap = new Map(c.inputs.map((b, i) => [b, deviceBuffer(args[i]!.uop)] as const));
    planStarts();
    if (c.graph !== undefined) c.graph(swap);
    else for (const { program, bufs } of c.launches) program.run(bufs.map((b) => swap.get(b) ?? b));
    // autograd must not take a replay's values for those of the graphs the capture computed
    for (const b of c.written) noteOverwritten(b);
    const outs = c.outputs.map((u) => Tensor.fromUOp(u, u.argOf(Ops.BUFFER).device as string));
    return (c.single ? outs[0] : outs) as unknown as R;
  }

  return Object.assign(run, {
    reset: () => {
      for (const b of captured?.held ?? []) letGoOfBuffer(b, false);
      calls = 0;
      captured = undefined;
    },
  });
}
