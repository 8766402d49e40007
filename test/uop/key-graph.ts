// A fixed graph whose content keys uop.test.ts compares across processes; run directly, it prints them as JSON.
import { dtypes } from '../../src/dtype.ts';
import { Ops } from '../../src/uop/ops.ts';
import { UOp } from '../../src/uop/uop.ts';

/** Builds the same graph in any process; `warmup` first builds unrelated nodes so that ids differ. */
export function keyGraph(warmup = 0): Record<string, UOp> {
  for (let i = 0; i < warmup; i++) UOp.const(dtypes.int32, 1000 + i);
  const n = UOp.variable('n', 1, 16);
  const buf = UOp.buffer(0, dtypes.float32, [4, n], ['GPU:0', 'GPU:1']);
  const half = UOp.const(dtypes.float16, 0.1);
  const big = UOp.const(dtypes.int64, 2n ** 60n + 1n);
  const r = UOp.range(n, 0);
  const body = buf
    .permute([1, 0])
    .reduce(Ops.ADD, [1])
    .add(UOp.const(dtypes.float32, -0))
    .mul(buf.permute([1, 0]).reduce(Ops.MAX, [1]))
    .cast(dtypes.float16)
    .add(half);
  return {
    n,
    buf,
    half,
    big,
    range: r,
    index: r.mul(4).add(big.cast(dtypes.index)).idiv(3),
    body,
    tagged: body.withTag('pass1'),
    sink: UOp.sink(
      UOp.make(Ops.STORE, [buf, buf.mul(2)]),
      UOp.make(Ops.BINARY, [], new Uint8Array([1, 2, 255])),
    ),
  };
}

export function keysOf(g: Record<string, UOp>): Record<string, string> {
  return Object.fromEntries(Object.entries(g).map(([k, u]) => [k, u.key]));
}

if (process.argv[2] === '--print-keys') process.stdout.write(JSON.stringify(keysOf(keyGraph(123))));
