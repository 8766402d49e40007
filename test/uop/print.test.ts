// Tests for the graph listing, the linear listing and the code printer's exact round trip.
import { describe, expect, it } from 'vitest';
import { AddrSpace, type ConstValue, DType, dtypes } from '../../src/dtype.ts';
import { type ArgTypes, AxisType, Ops } from '../../src/uop/ops.ts';
import { fromCode, printGraph, printLinear, toCode } from '../../src/uop/print.ts';
import { UOp } from '../../src/uop/uop.ts';

const roundTrip = (g: UOp): UOp => fromCode(toCode(g));

/** A listing line split into its columns (columns are separated by at least two spaces). */
const columns = (line: string): string[] => line.trim().split(/\s{2,}/);

// Every op with a typed arg; the type makes the compiler report an op added to ArgTypes but missing here.
const argOps: Record<keyof ArgTypes, true> = {
  [Ops.BUFFER]: true,
  [Ops.BUFFERVIEW]: true,
  [Ops.PARAM]: true,
  [Ops.CONST]: true,
  [Ops.VCONST]: true,
  [Ops.BINARY]: true,
  [Ops.PERMUTE]: true,
  [Ops.FLIP]: true,
  [Ops.BITCAST]: true,
  [Ops.REPLICATED]: true,
  [Ops.REDUCE]: true,
  [Ops.GETTUPLE]: true,
  [Ops.LOAD]: true,
  [Ops.STORE]: true,
  [Ops.BARRIER]: true,
  [Ops.COPY]: true,
  [Ops.RANGE]: true,
  [Ops.CAST]: true,
  [Ops.SPECIAL]: true,
  [Ops.WMMA]: true,
  [Ops.CUSTOM]: true,
};

/** One graph holding every arg type, a symbolic size, ranges, a reduce, a function call and tags. */
function everyArgGraph(): UOp {
  const n = UOp.variable('n', 1, 64);
  const x = UOp.buffer(0, dtypes.float32, [n, 4]);
  const sharded = UOp.buffer(1, dtypes.float32, [8, 4], ['CUDA:0', 'CUDA:1']);
  const r = UOp.range(4, 0, AxisType.REDUCE);
  const loop = UOp.range(n, 1, AxisType.GROUP_REDUCE);
  const sum = UOp.make(Ops.REDUCE, [x, r], { op: Ops.MAX, axes: [1] });
  const p0 = UOp.param(0, dtypes.float32, [4]);
  const p1 = UOp.param(1, dtypes.float32, [4], 'CPU');
  const fn = UOp.make(Ops.FUNCTION, [UOp.make(Ops.TUPLE, [p0.add(p1), p0]), sharded, sharded]);
  const a = dtypes.float16.vec(8);
  const local = dtypes.float32.ptr(16, AddrSpace.LOCAL);
  const wmmaIn = UOp.const(a, 1);
  return UOp.sink(
    sum.add(UOp.const(dtypes.float32, -0)).withTag('sum'),
    UOp.make(Ops.BUFFERVIEW, [x], { size: 8, dtype: dtypes.float32, offset: 4 }),
    UOp.make(Ops.PARAM, [UOp.shapeVec([16])], { slot: 2, dtype: local, addrspace: AddrSpace.LOCAL }),
    UOp.make(Ops.VCONST, [], {
      values: [1.5, -0, Number.NaN, Number.NEGATIVE_INFINITY],
      dtype: dtypes.float64.vec(4),
    }),
    UOp.make(Ops.BINARY, [], new Uint8Array([0, 1, 127, 255])),
    UOp.make(Ops.VCONST, [], { values: [-(2n ** 63n), 5n], dtype: dtypes.int64.vec(2) }),
    x.permute([1, 0]).flip([true, false]),
    x.bitcast(dtypes.int32).cast(dtypes.float64),
    UOp.make(Ops.REPLICATED, [sharded], [0]),
    UOp.make(Ops.GETTUPLE, [fn], 1).withTag(7),
    UOp.make(Ops.LOAD, [x], { device: 'CUDA:0', addrspace: AddrSpace.REG }),
    UOp.make(Ops.LOAD, [x], null),
    UOp.make(Ops.BARRIER, [UOp.make(Ops.STORE, [p0, p1], { async: true })], {
      pending: 2,
    }),
    UOp.make(Ops.COPY, [x], ['CUDA:0', 'CUDA:1']),
    UOp.make(Ops.COPY, [x], 'CUDA:1'),
    loop.mul(4).add(n),
    UOp.make(Ops.SPECIAL, [UOp.index(32)], 'lidx0'),
    UOp.make(Ops.WMMA, [wmmaIn, wmmaIn, UOp.const(dtypes.float32.vec(8), 0)], {
      name: 'WMMA_16_16_16_half_float',
      dims: [16, 16, 16],
      dtypeIn: dtypes.float16,
      dtypeOut: dtypes.float32.vec(8),
      device: 'CUDA',
    }),
    UOp.make(Ops.CUSTOM, [x], { fmt: '{0} + 1', dtype: dtypes.float32 }),
    UOp.make(Ops.SPECIAL, [UOp.index(8)], 'int main() {\n  return "\\u2028\'";\n}\n'),
  );
}

describe('toCode and fromCode', () => {
  it('rebuild a graph holding every arg type as the very same node', () => {
    const g = everyArgGraph();
    const ops = new Set(g.toposort().map((u) => u.op));
    for (const op of Object.keys(argOps).map(Number)) expect(ops, Ops[op]).toContain(op);
    for (const op of [Ops.FUNCTION, Ops.TUPLE, Ops.GETTUPLE, Ops.RANGE, Ops.REDUCE])
      expect(ops).toContain(op);
    expect(roundTrip(g)).toBe(g);
  });

  it('write one const per node in dependency order and end with the root', () => {
    const g = everyArgGraph();
    const lines = toCode(g).split('\n');
    const n = g.toposort().length;
    expect(lines).toHaveLength(n + 1);
    lines.slice(0, n).forEach((line, i) => {
      expect(line).toMatch(new RegExp(`^const n${i} = UOp\\.(make|const|variable)\\(.*\\);$`));
    });
    expect(lines[n]).toBe(`n${n - 1};`);
  });

  it('write args as TypeScript expressions', () => {
    const code = toCode(everyArgGraph());
    for (const expected of [
      'UOp.variable("n", 1, 64)',
      'AxisType.GROUP_REDUCE',
      '{ op: Ops.MAX, axes: [1] }',
      'device: ["CUDA:0", "CUDA:1"], addrspace: AddrSpace.GLOBAL',
      'dtypes.float32.ptr(16, AddrSpace.LOCAL)',
      'UOp.const(dtypes.float16.vec(8), 1)',
      'values: [1.5, -0, NaN, -Infinity], dtype: dtypes.float64.vec(4)',
      'UOp.make(Ops.VCONST, [], { values: [-9223372036854775808n, 5n], dtype: dtypes.int64.vec(2) })',
      'new Uint8Array([0, 1, 127, 255])',
      'UOp.const(dtypes.float32, -0)',
      'null, "sum")',
      ', 1, 7)',
    ])
      expect(code).toContain(expected);
  });

  it.each<[string, DType, ConstValue]>([
    ['-0', dtypes.float32, -0],
    ['NaN', dtypes.float64, Number.NaN],
    ['Infinity', dtypes.float32, Number.POSITIVE_INFINITY],
    ['-Infinity', dtypes.float16, Number.NEGATIVE_INFINITY],
    ['the smallest subnormal', dtypes.float64, 5e-324],
    ['a decimal', dtypes.float64, 0.1],
    ['a rounded half', dtypes.float16, 0.1],
    ['a bigint', dtypes.int64, 2n ** 62n],
    ['uint64 max', dtypes.uint64, 2n ** 64n - 1n],
    ['int8 min', dtypes.int8, -128],
    ['true', dtypes.bool, true],
    ['false', dtypes.bool, false],
    ['a vector', dtypes.int32.vec(4), 3],
  ])('rebuild the CONST %s exactly', (_, dtype, value) => {
    const c = UOp.const(dtype, value);
    expect(roundTrip(c)).toBe(c);
  });

  it('keep -0 apart from 0: a changed value rebuilds another node', () => {
    const g = UOp.const(dtypes.float32, -0);
    const changed = fromCode(toCode(g).replace('-0', '0'));
    expect(changed).not.toBe(g);
    expect(changed).toBe(UOp.const(dtypes.float32, 0));
  });

  it('fall back to UOp.make where a friendly constructor would build another node', () => {
    const unrounded = UOp.make(Ops.CONST, [], { value: 1.5, dtype: dtypes.int32 });
    const code = toCode(unrounded);
    expect(code).toContain('UOp.make(Ops.CONST, [], { value: 1.5, dtype: dtypes.int32 })');
    expect(roundTrip(unrounded)).toBe(unrounded);
    const taggedVar = UOp.variable('i', 0, 9).withTag('t');
    expect(toCode(taggedVar)).not.toContain('UOp.variable');
    expect(roundTrip(taggedVar)).toBe(taggedVar);
  });

  it('tell tagged nodes from untagged ones', () => {
    const x = UOp.variable('i', 0, 9, dtypes.int32);
    const tagged = [x.add(1).withTag('a'), x.add(1).withTag(0), x.add(1).withTag('0')];
    for (const t of tagged) expect(roundTrip(t)).toBe(t);
    expect(new Set([x.add(1), ...tagged.map(roundTrip)]).size).toBe(4);
  });

  it('treat an undefined field as an absent one', () => {
    const shape = UOp.shapeVec([4]);
    const withUndefined = UOp.make(Ops.PARAM, [shape], { slot: 0, dtype: dtypes.float32, device: undefined });
    expect(withUndefined).toBe(UOp.param(0, dtypes.float32, [4]));
    expect(toCode(withUndefined)).not.toContain('undefined');
    expect(roundTrip(withUndefined)).toBe(withUndefined);
  });

  it('refuse a dtype that no code names', () => {
    const odd = DType.makeScalar('fp8e4m3', 'float', 1);
    expect(() => toCode(UOp.make(Ops.CAST, [UOp.const(dtypes.float32, 1)], odd))).toThrow(/fp8e4m3/);
  });

  it('fromCode rejects code whose result is not a UOp', () => {
    expect(() => fromCode('const a = 1;\na;')).toThrow(/not a UOp/);
  });
});

describe('printGraph', () => {
  const n = UOp.variable('n', 1, 64);
  const x = UOp.buffer(0, dtypes.float32, [n, 4], ['CUDA:0', 'CUDA:1']);
  const r = UOp.range(4, 0, AxisType.REDUCE);
  const g = UOp.sink(UOp.make(Ops.REDUCE, [x, r], { op: Ops.ADD, axes: [1] }).withTag('acc'));
  const lines = printGraph(g).split('\n');
  const order = g.toposort();
  const lineOf = (u: UOp) => columns(lines[order.indexOf(u)]!);

  it('lists one line per node, sources before users', () => {
    expect(lines).toHaveLength(order.length);
    expect(lines.map((l) => columns(l)[0])).toEqual(order.map((_, i) => String(i)));
    expect(columns(lines.at(-1)!)).toEqual([
      String(order.length - 1),
      'SINK',
      'void',
      'none',
      `[${order.length - 2}]`,
    ]);
  });

  it('shows op, dtype, shape, sources as local indices and the arg', () => {
    const i = (u: UOp) => order.indexOf(u);
    expect(lineOf(x)).toEqual([
      String(i(x)),
      'BUFFER',
      'float32',
      '(n, 4)',
      `[${i(x.src[0]!)}]`,
      '{slot: 0, dtype: float32, device: ["CUDA:0", "CUDA:1"], addrspace: GLOBAL}',
    ]);
    expect(lineOf(r).slice(1)).toEqual([
      'RANGE',
      'index',
      '()',
      `[${i(r.src[0]!)}]`,
      '{id: 0, type: REDUCE}',
    ]);
    expect(lineOf(g.src[0]!).slice(1)).toEqual([
      'REDUCE',
      'float32',
      '(n, 1)',
      `[${i(x)}, ${i(r)}]`,
      '{op: ADD, axes: [1]}',
      'tag="acc"',
    ]);
    expect(lineOf(n).slice(1, 3)).toEqual(['PARAM', 'index']);
  });

  it('aligns the columns', () => {
    const opStart = lines.map((l) => l.length - l.trimStart().length + columns(l)[0]!.length);
    const opColumn = lines.map((l, k) => l.indexOf(columns(l)[1]!, opStart[k]));
    expect(new Set(opColumn).size).toBe(1);
    const shapeColumn = lines.map((l) => l.indexOf(columns(l)[3]!, opColumn[0]));
    expect(new Set(shapeColumn).size).toBe(1);
  });

  it('shows CONST values with their sign, NaN, Infinity and bigints', () => {
    const consts: [UOp, string][] = [
      [UOp.const(dtypes.float32, -0), '-0'],
      [UOp.const(dtypes.float64, Number.NaN), 'NaN'],
      [UOp.const(dtypes.float32, Number.NEGATIVE_INFINITY), '-Infinity'],
      [UOp.const(dtypes.int64, 2n ** 62n), '4611686018427387904n'],
      [UOp.const(dtypes.bool, true), 'true'],
    ];
    for (const [c, shown] of consts)
      expect(columns(printGraph(c))).toEqual(['0', 'CONST', c.dtype.name, '()', '[]', shown]);
  });

  it('names a symbolic size that is an expression by its line', () => {
    const size = n.mul(2);
    const b = UOp.buffer(0, dtypes.float32, [size]);
    const listing = printGraph(b).split('\n');
    const k = b.toposort().indexOf(size);
    expect(columns(listing.at(-1)!)[3]).toBe(`(@${k},)`);
    expect(columns(listing[k]!)[1]).toBe('MUL');
  });

  it('shortens long strings and byte arrays', () => {
    const src = UOp.make(Ops.SPECIAL, [UOp.index(8)], 'x'.repeat(500));
    expect(printGraph(src)).toMatch(/"x{79}…\(500 chars\)$/);
    const bin = UOp.make(Ops.BINARY, [], new Uint8Array(40).fill(171));
    expect(printGraph(bin)).toMatch(/<40 bytes( ab){16} …>$/);
  });

  it('prints a 200,000-node chain without a stack overflow', () => {
    let u = UOp.variable('i', 0, 9, dtypes.int32);
    for (let k = 0; k < 200_000; k++) u = u.add(k % 3);
    const listing = printGraph(u);
    const last = listing.slice(listing.lastIndexOf('\n') + 1);
    expect(listing.split('\n').length).toBe(u.toposort().length);
    expect(columns(last).slice(1, 4)).toEqual(['ADD', 'int32', '()']);
    expect(toCode(u).endsWith(`n${u.toposort().length - 1};`)).toBe(true);
  }, 60_000);
});

describe('printLinear', () => {
  const out = UOp.param(0, dtypes.float32, [16]);
  const inp = UOp.param(1, dtypes.float32, [16]);
  const i = UOp.range(16, 0);
  const value = UOp.make(Ops.LOAD, [inp.index(i)]).add(UOp.const(dtypes.float32, 1));
  const store = UOp.make(Ops.STORE, [out.index(i), value]);
  const program = [out, inp, i, inp.index(i), value.src[0]!, value.src[1]!, value, out.index(i), store];
  const lines = printLinear(UOp.make(Ops.LINEAR, program)).split('\n');

  it('prints `index OP : dtype [srcs] arg` for each instruction', () => {
    expect(lines).toHaveLength(program.length);
    expect(lines[0]).toMatch(/^0 PARAM +: float32 +\[<STACK>\] +\{slot: 0, dtype: float32\}$/);
    expect(lines[2]).toMatch(/^2 RANGE +: index +\[<CONST>\] +\{id: 0, type: LOOP\}$/);
    expect(lines[3]).toMatch(/^3 INDEX +: float32 +\[1, 2\]$/);
    expect(lines[6]).toMatch(/^6 ADD +: float32 +\[4, 5\]$/);
    expect(lines[5]).toMatch(/^5 CONST +: float32 +\[\] +1$/);
  });

  it('leaves the dtype of void instructions blank', () => {
    expect(lines[8]).toMatch(/^8 STORE +: +\[7, 6\]$/);
  });

  it('accepts only a LINEAR', () => {
    expect(() => printLinear(store)).toThrow(/expected a LINEAR, got a STORE/);
  });
});
