// The spec verifier: valid graphs of each stage pass, each rule refuses invalid nodes, and the SPEC knob.
import { describe, expect, it } from 'vitest';
import { AddrSpace, dtypes } from '../../src/dtype.ts';
import { Context } from '../../src/helpers.ts';
import { AxisType, GroupOp, isTensorGraphOp, Ops } from '../../src/uop/ops.ts';
import {
  kernelSpec,
  linearSpec,
  STAGES,
  type Stage,
  specs,
  tensorSpec,
  verify,
  verifyNode,
  verifyStage,
} from '../../src/uop/spec.ts';
import { UOp } from '../../src/uop/uop.ts';

const { float32: f32, float16: f16, int32: i32, uint64: u64, bool, index } = dtypes;
const idx = (v: number) => UOp.const(index, v);
const load = (...src: UOp[]) => UOp.make(Ops.LOAD, src);
const store = (...src: UOp[]) => UOp.make(Ops.STORE, src);
const make = UOp.make;

/** The message verify throws (fails the test when verify accepts the graph). */
function errorOf(root: UOp, stage: Stage): string {
  try {
    verify(root, stage);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error(`verify accepted the graph in the ${stage} stage`);
}

/** A side effect: void, shape (), so it fits wherever a shape is looked at but is no value. */
const effect = store(UOp.buffer(90, f32, []), UOp.const(f32, 1));

// --- valid graphs --------------------------------------------------------------------------------------

/** A tensor graph using every tensor-level op; `s` offsets buffer slots so the nodes are new. */
function tensorGraph(s = 0): UOp {
  const a = UOp.buffer(s, f32, [4, 8]);
  const b = UOp.buffer(s + 1, f32, [8, 3]);
  const mm = a
    .reshape([4, 8, 1])
    .mul(b.reshape([1, 8, 3]))
    .reduce(Ops.ADD, [1])
    .reshape([4, 3]);
  const moved = mm
    .permute([1, 0])
    .flip([true, false])
    .pad([1, 0], [4, 4])
    .shrink([0, 1], [3, 3])
    .reshape([1, 9])
    .expand([2, 9]);
  const row = moved.index(UOp.const(i32, 1)).bitcast(i32).cast(f16);
  const marked = make(Ops.DETACH, [make(Ops.CONTIGUOUSBACKWARD, [make(Ops.CONTIGUOUS, [row])])]);
  const moved2 = load(make(Ops.COPY, [marked], 'CUDA'));
  const back = make(Ops.LOAD, [moved2], { device: 'CPU' });
  // assign into a slice: STORE then AFTER
  const out = UOp.buffer(s + 2, f16, [12]);
  const st = store(out.shrink([3], [9]), back);
  const assigned = make(Ops.AFTER, [out, st]);
  // a function over PARAMs, called with two values
  const p0 = UOp.param(0, f32, [4, 3]);
  const p1 = UOp.param(1, f32, [4, 3]);
  const fn = make(Ops.FUNCTION, [make(Ops.TUPLE, [p0.add(p1).maximum(0)]), mm, mm.mul(2)]);
  const res = make(Ops.GETTUPLE, [fn], 0);
  // symbolic sizes
  const n = UOp.variable('n', 1, 10);
  const sym = UOp.buffer(s + 3, f32, [n])
    .reshape([1, n])
    .expand([4, n])
    .pad([0, 1], [4, n.add(2)]);
  // a multi-device broadcast
  const spread = make(
    Ops.COPY,
    [
      UOp.buffer(s + 4, f32, [8])
        .reshape([1, 8])
        .expand([2, 8]),
    ],
    ['GPU:0', 'GPU:1'],
  );
  const replicated = make(Ops.REPLICATED, [spread], [0]);
  const view = make(Ops.BUFFERVIEW, [a], { size: 8, dtype: f32, offset: 32 });
  const raw = make(Ops.BINARY, [], new Uint8Array([1, 2, 3]));
  const vconst = make(Ops.VCONST, [], { values: [1, 2, 3], dtype: i32 });
  return UOp.sink(
    assigned,
    make(Ops.GROUP, [st]),
    make(Ops.STACK, [res, res]),
    sym,
    replicated,
    view,
    raw,
    vconst,
  );
}

/** Every elementwise op over the given operands (float a, b; int i, j; uint64 u). */
function elementwise(a: UOp, b: UOp, i: UOp, j: UOp, u: UOp): UOp[] {
  const un = (op: Ops, x: UOp) => make(op, [x]);
  const bin = (op: Ops, x: UOp, y: UOp) => make(op, [x, y]);
  return [
    ...[Ops.RECIP, Ops.TRUNC, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.NEG].map((op) => un(op, a)),
    un(Ops.NOT, a.lt(b)),
    a.cast(i32),
    a.bitcast(i32),
    ...[Ops.ADD, Ops.MUL, Ops.MAX, Ops.SUB, Ops.DIV, Ops.POW].map((op) => bin(op, a, b)),
    ...[Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR].map((op) => bin(op, i, j)),
    bin(Ops.AND, a.lt(b), a.ne(b)),
    ...[...GroupOp.Comparison].map((op) => bin(op, a, b)),
    a.lt(b).where(a, b),
    make(Ops.MULACC, [a, b, a]),
    bin(Ops.THREEFRY, u, u),
  ];
}

/** c[i] = sum_k a[i, k] * b[k]: a kernel as rangeify leaves it. */
function matvecKernel(): UOp {
  const a = UOp.param(0, f32, [4, 8]);
  const b = UOp.param(1, f32, [8]);
  const c = UOp.param(2, f32, [4]);
  const i = UOp.range(4, 0, AxisType.GLOBAL);
  const k = UOp.range(8, 1, AxisType.REDUCE);
  const acc = make(Ops.REDUCE, [load(a.index(i, k)).mul(load(b.index(k))), k], { op: Ops.ADD, axes: [] });
  return UOp.sink(make(Ops.END, [store(c.index(i), acc), i]));
}

/** A kernel with local memory, thread indices, gates, vectors, WMMA and CUSTOM code; `s` offsets slots. */
function gpuKernel(s = 0): UOp {
  const lid = make(Ops.SPECIAL, [idx(16)], 'lidx0');
  const gid = make(Ops.SPECIAL, [idx(4)], 'gidx0');
  const n = UOp.variable('n', 1, 64);
  const inp = UOp.param(s, f32, [n]);
  const out = UOp.param(s + 1, f32, [4, 16]);
  const local = make(Ops.BUFFER, [UOp.shapeVec([16])], {
    slot: s,
    dtype: f32,
    device: 'CUDA',
    addrspace: AddrSpace.LOCAL,
  });
  const g = gid.mul(16).add(lid);
  const x = load(inp.index(g), UOp.const(f32, 0), g.lt(n));
  const shared = make(Ops.AFTER, [local, make(Ops.BARRIER, [store(local.index(lid), x)])]);
  const y = load(shared.index(lid.add(1).mod(16)));
  const vec = make(Ops.STACK, [x, y]).add(make(Ops.VCONST, [], { values: [1, 2], dtype: f32 }));
  const halves = make(Ops.STACK, [x.cast(f16), y.cast(f16)]);
  const mma = make(Ops.WMMA, [halves, halves, vec], {
    name: 'WMMA_8_8_8_half_float',
    dims: [8, 8, 8],
    dtypeIn: f16,
    dtypeOut: f32,
    device: 'CUDA',
  });
  const summed = make(Ops.CUSTOM, [mma], { fmt: '({0}.x + {0}.y)', dtype: f32 });
  const st = store(out.index(gid, lid), summed, lid.lt(8));
  const atomic = make(Ops.ATOMICADD, [out.index(gid, idx(0)), x]);
  return UOp.sink(make(Ops.GROUP, [st, atomic]));
}

/** for i in 0..4: if i < 2: c[i] = a[i] + 1, as a linear program. */
function linearParts() {
  const four = idx(4);
  const shape = UOp.shapeVec([4]);
  const a = UOp.param(0, f32, [4]);
  const c = UOp.param(1, f32, [4]);
  const i = UOp.range(4, 0);
  const ai = a.index(i);
  const ld = load(ai);
  const one = UOp.const(f32, 1);
  const sum = ld.add(one);
  const ci = c.index(i);
  const two = idx(2);
  const cond = i.lt(two);
  const iff = make(Ops.IF, [cond]);
  const st = store(ci, sum);
  const endif = make(Ops.ENDIF, [iff]);
  const end = make(Ops.END, [st, i]);
  const list = [four, shape, a, c, i, ai, ld, one, sum, ci, two, cond, iff, st, endif, end];
  return { list, i, ai, ld, iff, st, endif, end };
}
const linear = (list: readonly UOp[]) => make(Ops.LINEAR, list);

describe('valid graphs pass', () => {
  it('a tensor graph with every tensor-level op', () => {
    expect(() => verify(tensorGraph(), 'tensor')).not.toThrow();
  });
  it('every elementwise op in a tensor graph', () => {
    const p = (slot: number, dtype = f32) => UOp.param(slot, dtype, [4]);
    const ops = elementwise(p(0), p(1), p(2, i32), p(3, i32), p(4, u64));
    expect(() => verify(UOp.sink(...ops), 'tensor')).not.toThrow();
  });
  it('kernels', () => {
    expect(() => verify(matvecKernel(), 'kernel')).not.toThrow();
    expect(() => verify(gpuKernel(), 'kernel')).not.toThrow();
  });
  it('every elementwise op in a kernel, on loaded scalars', () => {
    const buf = (slot: number, dtype = f32) => load(UOp.param(slot, dtype, []).index());
    const out = UOp.param(9, f32, [40]);
    const ops = elementwise(buf(0), buf(1), buf(2, i32), buf(3, i32), buf(4, u64));
    const stores = ops.map((v, k) => store(out.index(idx(k)), v.dtype === f32 ? v : v.cast(f32)));
    expect(() => verify(UOp.sink(make(Ops.GROUP, stores)), 'kernel')).not.toThrow();
  });
  it('a linear program', () => {
    expect(() => verify(linear(linearParts().list), 'linear')).not.toThrow();
  });
  it('a 100,000-node chain without recursion', () => {
    let x = UOp.param(0, f32, []);
    for (let k = 0; k < 100_000; k++) x = x.add(1);
    expect(() => verify(UOp.sink(x), 'tensor')).not.toThrow();
  });
});

describe('the stage tables', () => {
  const ops = (table: typeof tensorSpec) => new Set(table.flatMap(([, pat]) => [...pat.ops!]));
  it('give every rule of a stage its own name', () => {
    for (const table of Object.values(specs)) {
      const names = table.map(([name]) => name);
      expect(new Set(names).size).toBe(names.length);
    }
  });
  it('keep codegen ops out of tensor graphs and tensor ops out of kernels', () => {
    const tensor = ops(tensorSpec);
    for (const op of [Ops.RANGE, Ops.END, Ops.SPECIAL, Ops.IF, Ops.ENDIF, Ops.LINEAR, ...GroupOp.Codegen])
      expect(tensor.has(op), Ops[op]).toBe(false);
    const kernel = ops(kernelSpec);
    const tensorOnly = [
      ...GroupOp.Movement,
      ...GroupOp.Marker,
      ...GroupOp.Call,
      Ops.COPY,
      Ops.LINEAR,
      Ops.IF,
    ];
    for (const op of tensorOnly.filter((o) => ![Ops.INDEX, Ops.STACK, Ops.BITCAST].includes(o)))
      expect(kernel.has(op), Ops[op]).toBe(false);
    const lin = ops(linearSpec);
    for (const op of [Ops.REDUCE, Ops.SINK]) expect(lin.has(op), Ops[op]).toBe(false);
  });
});

// --- invalid nodes: [rule, the invalid node, what the message says] ------------------------------------

type Case = [rule: string, build: () => UOp, message: RegExp];

function expectRejected(stage: Stage, wrap: (u: UOp) => UOp) {
  return (rule: string, build: () => UOp, message: RegExp) => {
    const bad = build();
    const msg = errorOf(wrap(bad), stage);
    expect(msg).toContain(`${stage} spec: invalid ${Ops[bad.op]} #${bad.id} (`);
    expect(msg).toContain(`'${rule}'`);
    expect(msg).toMatch(message);
  };
}

const cpu = (slot: number, dtype = f32, shape = [4]) => UOp.buffer(slot, dtype, shape);
const cuda = (slot: number) => UOp.buffer(slot, f32, [4], 'CUDA');
const fnCall = (body: UOp, ...args: UOp[]) => make(Ops.FUNCTION, [make(Ops.TUPLE, [body]), ...args]);

const tensorCases: Case[] = [
  [
    'buffer',
    () =>
      make(Ops.BUFFER, [UOp.shapeVec([4])], {
        slot: 0,
        dtype: f32,
        device: 'CPU',
        addrspace: AddrSpace.LOCAL,
      }),
    /rule 'buffer': address space LOCAL is not allowed here; expected GLOBAL/,
  ],
  // construction refuses negative and non-integer sizes, but not a size that is always negative
  [
    'buffer',
    () => UOp.buffer(0, f32, [UOp.variable('neg', -3, -1)]),
    /neg in source 0 \(a shape operand\) is always negative/,
  ],
  // nor sizes held as CONSTs of another integer dtype
  [
    'buffer',
    () =>
      make(Ops.BUFFER, [make(Ops.STACK, [UOp.const(i32, 4)])], {
        slot: 0,
        dtype: f32,
        device: 'CPU',
        addrspace: AddrSpace.GLOBAL,
      }),
    /source 0 \(a shape operand\) must hold index values, got STACK #\d+ of dtype int32/,
  ],
  [
    'buffer',
    () => UOp.buffer(0, f32, [4], ''),
    /the device must be a device name or a non-empty tuple of names, got ""/,
  ],
  [
    'bufferview',
    () => make(Ops.BUFFERVIEW, [cpu(0, f32, [32])], { size: 8, dtype: f32, offset: 120 }),
    /a view of 8 float32 at offset 120 does not fit in BUFFER #\d+ \(128 bytes\)/,
  ],
  [
    'bufferview',
    () => make(Ops.BUFFERVIEW, [cpu(0).add(1)], { size: 1, dtype: f32, offset: 0 }),
    /a BUFFERVIEW views a BUFFER, PARAM or BUFFERVIEW, got ADD/,
  ],
  [
    'param',
    () => make(Ops.PARAM, [UOp.shapeVec([4])], { slot: 'x', dtype: f32 }),
    /slot "x" is not a position .*symbolic variable/,
  ],
  [
    'variable',
    () => make(Ops.PARAM, [UOp.shapeVec([]), idx(5), idx(1)], { slot: 'n', dtype: index }),
    /variable n: min 5 exceeds max 1/,
  ],
  [
    'variable',
    () =>
      make(Ops.PARAM, [UOp.shapeVec([]), UOp.const(f32, 0), UOp.const(f32, 1)], { slot: 'n', dtype: f32 }),
    /variable n must have a scalar integer dtype/,
  ],
  [
    'variable',
    () => make(Ops.PARAM, [UOp.shapeVec([]), UOp.const(i32, 0), idx(3)], { slot: 'n', dtype: index }),
    /variable n: min must be a CONST of dtype index, got CONST #\d+ of dtype int32/,
  ],
  [
    'const',
    () => make(Ops.CONST, [], { value: 1, dtype: bool }),
    /value 1 \(number\) is not stored as a bool stores it \(true\); build constants with UOp.const/,
  ],
  [
    'const',
    () => make(Ops.CONST, [], { value: 1.5, dtype: i32 }),
    /value 1.5 \(number\) is not stored as a int32/,
  ],
  [
    'const',
    () => make(Ops.CONST, [], { value: Number.NaN, dtype: i32 }),
    /value NaN cannot be a int32: cannot store NaN/,
  ],
  [
    'const',
    () => make(Ops.CONST, [], { value: 1, dtype: f32.vec(4) }),
    /must be a scalar dtype, got float32x4/,
  ],
  [
    'vconst',
    () => make(Ops.VCONST, [], { values: [], dtype: i32 }),
    /one or more values \(the empty vector is STACK\(\)\)/,
  ],
  [
    'vconst',
    () => make(Ops.VCONST, [], { values: [1, 2.5], dtype: i32 }),
    /value 2.5 \(number\) is not stored/,
  ],
  ['binary', () => make(Ops.BINARY, [], [1, 2] as never), /holds its bytes as a Uint8Array/],
  ['permute', () => make(Ops.PERMUTE, [effect], []), /the input STORE #\d+ is not a value \(dtype void\)/],
  ['flip', () => make(Ops.FLIP, [effect], []), /the input STORE #\d+ is not a value/],
  ['reshape', () => make(Ops.RESHAPE, [effect, UOp.shapeVec([])]), /the input STORE #\d+ is not a value/],
  [
    'reshape',
    () => make(Ops.RESHAPE, [cpu(0), make(Ops.VCONST, [], { values: [2, 2], dtype: i32 })]),
    /source 1 \(a shape operand\) must hold index values, got VCONST #\d+ of dtype int32/,
  ],
  ['expand', () => make(Ops.EXPAND, [effect, UOp.shapeVec([])]), /the input STORE #\d+ is not a value/],
  [
    'pad',
    () => make(Ops.PAD, [effect, UOp.shapeVec([]), UOp.shapeVec([])]),
    /the input STORE #\d+ is not a value/,
  ],
  [
    'pad',
    () => cpu(0).pad([UOp.variable('m', 10, 20)], [8]),
    /axis 0: 4 elements at offset m never fit in 8/,
  ],
  [
    'shrink',
    () => make(Ops.SHRINK, [effect, UOp.shapeVec([]), UOp.shapeVec([])]),
    /the input STORE #\d+ is not a value/,
  ],
  [
    'shrink',
    () => cpu(0).shrink([1], [UOp.variable('m', 5, 9)]),
    /axis 0: m elements at offset 1 never fit in 4/,
  ],
  [
    'index',
    () => cpu(0).index(UOp.const(i32, 7)),
    /index 0 \(CONST #\d+, in \[7, 7\]\) is always outside axis 0 of size 4/,
  ],
  ['index', () => make(Ops.INDEX, [effect]), /the input STORE #\d+ is not a value/],
  ['stack', () => make(Ops.STACK, [effect, effect]), /element 0 STORE #\d+ is not a value/],
  [
    'replicated',
    () => make(Ops.REPLICATED, [cpu(0)], [0]),
    /REPLICATED marks a value spread over several devices; BUFFER #\d+ is on CPU/,
  ],
  [
    'reduce',
    () => make(Ops.REDUCE, [cpu(0)], { op: Ops.SUB as never, axes: [0] }),
    /a REDUCE reduces with ADD, MAX, MUL, got SUB/,
  ],
  [
    'reduce',
    () => make(Ops.REDUCE, [effect], { op: Ops.ADD, axes: [] }),
    /the input STORE #\d+ is not a value/,
  ],
  [
    'function',
    () => fnCall(UOp.param(0, f32, [4]).add(UOp.param(1, f32, [4])), cpu(0)),
    /the body uses PARAM 1, but FUNCTION passes 1 argument$/,
  ],
  [
    'function',
    () => fnCall(UOp.param(0, f32, [4]), cpu(0, i32)),
    /PARAM 0 has dtype float32, but argument 0 \(BUFFER #\d+\) has int32/,
  ],
  [
    'function',
    () => fnCall(UOp.param(0, f32, [4]), cpu(0, f32, [5])),
    /PARAM 0 has shape \(4,\), but argument 0 \(BUFFER #\d+\) has \(5,\)/,
  ],
  [
    'function',
    () => fnCall(UOp.param(0, f32, [4]).add(cpu(1)), cpu(0)),
    /the body uses BUFFER #\d+; a function body holds only PARAMs/,
  ],
  [
    'function',
    () => make(Ops.FUNCTION, [UOp.param(0, f32, [4]), cpu(0)]),
    /FUNCTION with 2 sources fits no rule .*'function' expects FUNCTION\|CALL \[body=TUPLE\]/,
  ],
  ['tuple', () => make(Ops.TUPLE, [cpu(0), effect]), /element 1 STORE #\d+ is not a value/],
  [
    'gettuple',
    () => make(Ops.GETTUPLE, [make(Ops.TUPLE, [cpu(0)]), cpu(1)], 0),
    /GETTUPLE with 2 sources fits no rule of the tensor stage: 'gettuple' expects GETTUPLE \[tuple=any\]/,
  ],
  ['load', () => make(Ops.LOAD, [cpu(0)], { device: '' }), /the target device must be a device name/],
  [
    'load',
    () => make(Ops.LOAD, [cpu(0)], { addrspace: AddrSpace.LOCAL }),
    /address space LOCAL is not allowed here; expected GLOBAL/,
  ],
  [
    'copy',
    () => make(Ops.COPY, [cpu(0)], []),
    /the target device must be a device name or a non-empty tuple of names, got \[\]/,
  ],
  ['copy', () => make(Ops.COPY, [effect], 'CUDA'), /the input STORE #\d+ is not a value/],
  ['store', () => store(cpu(0).add(1), cpu(1)), /the target ADD #\d+ is not a buffer or a view of one/],
  ['store', () => store(cpu(0), cuda(1)), /the value is on CUDA but the buffer on CPU; COPY the value first/],
  [
    'store',
    () => store(cpu(0), cpu(1), UOp.param(5, bool, [2])),
    /the gate has shape \(2,\); it must be \(\) or the buffer's shape \(4,\)/,
  ],
  [
    'store',
    () => store(cpu(0), cpu(1), UOp.const(bool, true), cpu(2)),
    /a STORE takes \(buffer, value, gate\?\), got 4 sources/,
  ],
  [
    'after',
    () => make(Ops.AFTER, [cpu(0).add(1), store(cpu(0), cpu(1))]),
    /AFTER passes on a buffer .*got ADD/,
  ],
  ['marker', () => make(Ops.CONTIGUOUS, [effect]), /the input STORE #\d+ is not a value/],
  [
    'group',
    () => make(Ops.GROUP, [effect, cpu(0)]),
    /GROUP holds side effects \(STORE, GROUP, END, CALL, BARRIER, ATOMICADD\), got BUFFER/,
  ],
  [
    'sink',
    () => UOp.sink(make(Ops.TUPLE, [cpu(0)])),
    /a SINK collects values to realize and side effects, got TUPLE/,
  ],
  // elementwise dtype rules
  // construction refuses RECIP, EXP2, LOG2, SIN and SQRT of an integer, but not TRUNC
  ['float-unary', () => cpu(0, i32).trunc(), /TRUNC needs float operands, got int32/],
  ['neg', () => make(Ops.NEG, [cpu(0, bool)]), /NEG of a bool: use NOT/],
  ['not', () => make(Ops.NOT, [cpu(0, i32)]), /NOT needs bool operands, got int32/],
  [
    'cast',
    () => make(Ops.CAST, [cpu(0)], dtypes.void),
    /the target dtype of CAST must be a value dtype, got void/,
  ],
  [
    'cast',
    () => make(Ops.CAST, [cpu(0)], f32.vec(4)),
    /CAST keeps the vector width: float32 cannot become float32x4/,
  ],
  // binary and ternary ops: construction checks their dtypes, the rule their operands
  ['alu', () => make(Ops.ADD, [effect, effect]), /operand 0 STORE #\d+ is not a value/],
  [
    'alu',
    () => cpu(0).add(cuda(1)),
    /operands are on different devices \(CPU, CUDA\); COPY them to one device first/,
  ],
  ['alu', () => make(Ops.IDIV, [effect, effect]), /operand 0 STORE #\d+ is not a value/],
  [
    'alu',
    () => make(Ops.WHERE, [UOp.const(bool, true), effect, effect]),
    /operand 1 STORE #\d+ is not a value/,
  ],
  ['alu', () => make(Ops.MULACC, [cpu(0), cuda(1), cpu(2)]), /operands are on different devices/],
  [
    'threefry',
    () => make(Ops.THREEFRY, [cpu(0, i32), cpu(1, i32)]),
    /THREEFRY needs uint64 operands, got int32, int32/,
  ],
];

describe('tensor rules refuse invalid nodes', () => {
  it.each(tensorCases)(
    '%s',
    expectRejected('tensor', (u) => UOp.sink(u)),
  );

  it('names the sources of the invalid node', () => {
    const msg = errorOf(cpu(0).add(cuda(1)), 'tensor');
    expect(msg).toMatch(
      /invalid ADD #\d+ \(float32, shape \(4,\), on CPU\)\n {2}sources: BUFFER #\d+ float32 \(4,\), BUFFER #\d+ float32 \(4,\)\n/,
    );
  });
  it('refuses codegen ops, saying which stage they belong to', () => {
    expect(errorOf(UOp.sink(UOp.range(4, 0).add(1)), 'tensor')).toMatch(
      /invalid RANGE #\d+ .*\n.*\n {2}the tensor stage has no rule for RANGE \(it belongs to the kernel and linear stages\)/,
    );
    expect(errorOf(make(Ops.IF, [UOp.const(bool, true)]), 'tensor')).toMatch(
      /no rule for IF \(it belongs to the linear stage\)/,
    );
  });
  it('reports the deepest invalid node first', () => {
    const bad = cpu(0, i32).trunc();
    const msg = errorOf(UOp.sink(make(Ops.CONTIGUOUS, [bad.cast(f32)])), 'tensor');
    expect(msg).toContain(`invalid TRUNC #${bad.id}`);
  });
  it('refuses an unknown stage', () => {
    expect(() => verify(cpu(0), 'render' as Stage)).toThrow(
      /unknown stage 'render'; stages are tensor, kernel, linear/,
    );
  });
});

const a2 = () => UOp.param(0, f32, [4, 8]);
const a1 = () => UOp.param(1, f32, [4]);
const r0 = () => UOp.range(4, 0, AxisType.GLOBAL);
const rk = () => UOp.range(8, 1, AxisType.REDUCE);
const x0 = () => load(a1().index(r0()));

const kernelCases: Case[] = [
  [
    'buffer',
    () =>
      make(Ops.BUFFER, [UOp.shapeVec([4])], {
        slot: 0,
        dtype: f32,
        device: 'CUDA',
        addrspace: 'SHARED' as AddrSpace,
      }),
    /address space SHARED is not allowed here; expected GLOBAL or LOCAL or REG/,
  ],
  ['param', () => UOp.param(-1, f32, [4]), /slot -1 is not a position/],
  [
    'stack',
    () => make(Ops.STACK, [make(Ops.STACK, [x0(), x0()]), make(Ops.STACK, [x0(), x0()])]),
    /element 0 \(STACK #\d+\) has shape \(2,\); a kernel STACK joins scalars/,
  ],
  [
    'stack',
    () => make(Ops.STACK, [a1().index(r0())]),
    /element 0 INDEX #\d+ is an address into a buffer, not a value; LOAD it first/,
  ],
  ['index', () => a2().index(r0()), /1 indices for a buffer of shape \(4, 8\); give one index per axis/],
  [
    'index',
    () => a1().index(UOp.const(i32, 0)),
    /index 0 must be an index-typed scalar, got CONST #\d+ of dtype int32 and shape \(\)/,
  ],
  ['index', () => make(Ops.INDEX, [x0()]), /a kernel INDEX addresses a buffer .*got LOAD/],
  [
    'load',
    () => load(UOp.param(2, f32, [])),
    /a kernel LOAD reads through an INDEX, got PARAM #\d+; INDEX the buffer first/,
  ],
  [
    'load',
    () => load(a1().index(r0()), UOp.const(i32, 0), UOp.const(bool, true)),
    /the alternative has dtype int32, the load float32/,
  ],
  [
    'load',
    () => load(a1().index(r0()), UOp.const(f32, 0), r0()),
    /the gate must be a bool scalar, got RANGE #\d+ of dtype index/,
  ],
  [
    'load',
    () => load(a1().index(r0()), UOp.const(f32, 0)),
    /a LOAD takes \(index\) or \(index, alt, gate\), got 2 sources/,
  ],
  ['load', () => make(Ops.LOAD, [a1().index(r0())], { device: 'CPU' }), /a kernel LOAD cannot change device/],
  [
    'store',
    () => store(UOp.param(2, f32, []), UOp.const(f32, 1)),
    /a kernel STORE writes through an INDEX, got PARAM/,
  ],
  [
    'store',
    () => store(a1().index(r0()), a1().index(r0())),
    /the value INDEX #\d+ is an address into a buffer/,
  ],
  [
    'atomicadd',
    () => make(Ops.ATOMICADD, [UOp.param(2, f32, []), UOp.const(f32, 1)]),
    /a kernel ATOMICADD writes through an INDEX, got PARAM #\d+; INDEX the buffer first/,
  ],
  // construction checks a STORE's value dtype, not an ATOMICADD's
  [
    'atomicadd',
    () => make(Ops.ATOMICADD, [a1().index(r0()), UOp.const(i32, 1)]),
    /the value has dtype int32 but the buffer holds float32/,
  ],
  [
    'range',
    () => make(Ops.RANGE, [UOp.const(i32, 4)], { id: 0, type: AxisType.LOOP }),
    /the bound must be an index-typed scalar, got CONST #\d+ of dtype int32/,
  ],
  [
    'range',
    () => make(Ops.RANGE, [idx(4)], { id: 0, type: 'SIDEWAYS' as AxisType }),
    /the axis type must be one of GLOBAL, .*, got SIDEWAYS/,
  ],
  [
    'range',
    () => make(Ops.RANGE, [idx(4)], { id: -1, type: AxisType.LOOP }),
    /the range id must be a non-negative integer, got -1/,
  ],
  ['end', () => make(Ops.END, [x0(), r0()]), /the body of a loop is a side effect .*, got LOAD/],
  [
    'end',
    () => make(Ops.END, [store(a1().index(r0()), x0()), idx(0)]),
    /END lists RANGEs after its first source, got CONST/,
  ],
  ['end', () => make(Ops.END, [store(a1().index(r0()), x0()), r0(), r0()]), /END lists a RANGE twice/],
  [
    'after',
    () => make(Ops.AFTER, [store(a1().index(r0()), x0()), x0()]),
    /source 0 STORE #\d+ is not a value/,
  ],
  ['group', () => make(Ops.GROUP, [x0()]), /GROUP holds side effects .*, got LOAD/],
  [
    'special',
    () => make(Ops.SPECIAL, [UOp.const(i32, 4)], 'gidx0'),
    /the bound must be an index-typed scalar/,
  ],
  ['special', () => make(Ops.SPECIAL, [idx(4)], ''), /a SPECIAL is named \(gidx0, lidx1, \.\.\.\), got ""/],
  ['barrier', () => make(Ops.BARRIER, [x0()]), /BARRIER holds side effects .*, got LOAD/],
  [
    'wmma',
    () =>
      make(Ops.WMMA, [x0(), x0(), x0()], {
        name: 'tc',
        dims: [8, 8, 8],
        dtypeIn: f16,
        dtypeOut: f32,
        device: 'CUDA',
      }),
    /the inputs must be float16, got float32 and float32/,
  ],
  [
    'wmma',
    () =>
      make(Ops.WMMA, [x0(), x0(), x0()], {
        name: 'tc',
        dims: [8, 8] as never,
        dtypeIn: f32,
        dtypeOut: f32,
        device: 'CUDA',
      }),
    /WMMA dims are three positive integers \(N, M, K\), got \[8,8\]/,
  ],
  [
    'custom',
    () => make(Ops.CUSTOM, [x0()], { fmt: '', dtype: f32 }),
    /a CUSTOM holds its code as a non-empty fmt string/,
  ],
  [
    'custom',
    () => make(Ops.CUSTOM, [a1()], { fmt: 'f({0})', dtype: f32 }),
    /operand 0 PARAM #\d+ is a buffer, not a value; INDEX and LOAD it/,
  ],
  [
    'reduce',
    () => make(Ops.REDUCE, [x0(), r0()], { op: Ops.ADD, axes: [] }),
    /RANGE #\d+ is a GLOBAL range; a REDUCE runs over REDUCE, GROUP_REDUCE, UNROLL ranges/,
  ],
  [
    'reduce',
    () => make(Ops.REDUCE, [x0(), rk()], { op: Ops.SUB as never, axes: [] }),
    /a REDUCE reduces with ADD, MAX, MUL, got SUB/,
  ],
  [
    'reduce',
    () => make(Ops.REDUCE, [x0(), rk(), rk()], { op: Ops.ADD, axes: [] }),
    /REDUCE lists a RANGE twice/,
  ],
  [
    'reduce',
    () => make(Ops.REDUCE, [make(Ops.STACK, [x0(), x0()]), rk()], { op: Ops.ADD, axes: [0] }),
    /a kernel REDUCE reduces over its RANGE sources; its axes must be empty/,
  ],
  ['sink', () => UOp.sink(x0()), /SINK holds side effects .*, got LOAD/],
  [
    'alu',
    () => a1().index(r0()).add(1),
    /operand 0 INDEX #\d+ is an address into a buffer, not a value; LOAD it first/,
  ],
  ['alu', () => a1().add(1), /operand 0 PARAM #\d+ is a buffer, not a value; INDEX and LOAD it/],
  ['float-unary', () => load(UOp.param(3, i32, []).index()).trunc(), /TRUNC needs float operands, got int32/],
];

describe('kernel rules refuse invalid nodes', () => {
  it.each(kernelCases)(
    '%s',
    expectRejected('kernel', (u) => UOp.sink(u)),
  );

  it('refuses tensor-level ops, saying which stage they belong to', () => {
    const moved = a1().reshape([2, 2]);
    expect(errorOf(UOp.sink(moved), 'kernel')).toMatch(
      /the kernel stage has no rule for RESHAPE \(it belongs to the tensor stage\)/,
    );
    expect(errorOf(UOp.sink(make(Ops.COPY, [x0()], 'CUDA')), 'kernel')).toMatch(/no rule for COPY/);
    expect(errorOf(UOp.sink(make(Ops.CONTIGUOUS, [x0()])), 'kernel')).toMatch(/no rule for CONTIGUOUS/);
    expect(errorOf(UOp.sink(make(Ops.IF, [UOp.const(bool, true)])), 'kernel')).toMatch(
      /no rule for IF \(it belongs to the linear stage\)/,
    );
  });
  it('needs a SINK at the root', () => {
    const end = matvecKernel().src[0]!;
    expect(errorOf(end, 'kernel')).toMatch(
      /invalid END #\d+ .*\n.*\n {2}the root of a kernel graph must be a SINK/,
    );
  });
});

describe('linear rules refuse invalid programs', () => {
  const p = linearParts();
  const without = (u: UOp) => p.list.filter((x) => x !== u);
  const swapped = (u: UOp, v: UOp) => p.list.map((x) => (x === u ? v : x === v ? u : x));
  const rejects = (list: readonly UOp[], message: RegExp) => {
    const msg = errorOf(linear(list), 'linear');
    expect(msg).toMatch(/invalid LINEAR #\d+/);
    expect(msg).toContain("rule 'linear'");
    expect(msg).toMatch(message);
  };

  it('needs every source earlier in the list', () => {
    rejects(
      swapped(p.ai, p.ld),
      /instruction 5 \(LOAD #\d+\) uses INDEX #\d+, which comes later \(at 6\); sources must come first/,
    );
    rejects(without(p.ai), /instruction 5 \(LOAD #\d+\) uses INDEX #\d+, which is not in the list/);
    rejects([...p.list, p.ld], /LOAD #\d+ appears twice in the list \(at 6 and 16\)/);
  });
  it('needs blocks closed, innermost first', () => {
    rejects(without(p.end), /RANGE #\d+ is never closed \(a RANGE needs a later END, an IF a later ENDIF\)/);
    rejects([...without(p.endif).filter((x) => x !== p.iff), p.iff], /IF #\d+ is never closed/);
    rejects(
      swapped(p.endif, p.end),
      /instruction 14 \(END #\d+\) closes RANGE #\d+, but the innermost open block is IF #\d+/,
    );
  });
  it('refuses a nested LINEAR', () => {
    rejects([...p.list, linear([p.list[0]!])], /instruction 16 is a nested LINEAR/);
  });
  it('refuses kernel-only ops and a missing LINEAR root', () => {
    const acc = make(Ops.REDUCE, [p.ld, UOp.range(8, 1, AxisType.REDUCE)], { op: Ops.ADD, axes: [] });
    expect(errorOf(linear([...p.list, acc]), 'linear')).toMatch(
      /the linear stage has no rule for REDUCE \(it belongs to the tensor and kernel stages\)/,
    );
    expect(errorOf(linear([...p.list, UOp.sink(p.end)]), 'linear')).toMatch(
      /the linear stage has no rule for SINK/,
    );
    expect(errorOf(UOp.sink(p.end), 'linear')).toMatch(/the root of a linear graph must be a LINEAR/);
  });
  it('checks IF and ENDIF', () => {
    const badIf = make(Ops.IF, [p.i]);
    expect(errorOf(linear([...p.list.slice(0, 5), badIf]), 'linear')).toMatch(
      new RegExp(`invalid IF #${badIf.id} [^]*rule 'if': the gate must be a bool scalar, got RANGE`),
    );
    const badEndif = make(Ops.ENDIF, [p.i]);
    expect(errorOf(linear([...p.list.slice(0, 5), badEndif]), 'linear')).toMatch(
      /ENDIF with 1 source fits no rule of the linear stage: 'endif' expects ENDIF \[IF\]/,
    );
  });
});

describe('the SPEC knob', () => {
  // slots no other test uses, so that these nodes are built here for the first time
  const intParam = (slot: number) => UOp.param(slot, i32, [3]);

  it('SPEC=0 skips stage verification and SPEC=1 runs it', () => {
    const bad = UOp.sink(intParam(70).trunc());
    expect(() => Context.with({ SPEC: 0 }, () => verifyStage(bad, 'tensor'))).not.toThrow();
    expect(() => Context.with({ SPEC: 1 }, () => verifyStage(bad, 'tensor'))).toThrow(/rule 'float-unary'/);
  });
  it('SPEC=2 verifies each node as it is built, every time', () => {
    const x = intParam(71);
    const build = () => Context.with({ SPEC: 2 }, () => x.trunc());
    expect(build).toThrow(/spec \(SPEC=2, at construction\): invalid TRUNC #\d+ \(int32, shape \(3,\)\)/);
    expect(build).toThrow(
      /no stage accepts it:\n {2}tensor: rule 'float-unary': TRUNC needs float operands, got int32\n {2}kernel, linear: rule 'float-unary': operand 0 PARAM #\d+ is a buffer/,
    );
    expect(() => Context.with({ SPEC: 1 }, () => x.trunc())).not.toThrow();
  });
  it('SPEC=2 groups the stages that give one reason', () => {
    const build = () =>
      Context.with({ SPEC: 2 }, () => make(Ops.RANGE, [UOp.const(i32, 72)], { id: 0, type: AxisType.LOOP }));
    expect(build).toThrow(
      /tensor: the tensor stage has no rule for RANGE .*\n {2}kernel, linear: rule 'range': the bound must be an index-typed scalar/,
    );
  });
  it('SPEC=2 accepts the valid graphs of every stage', () => {
    Context.with({ SPEC: 2 }, () => {
      expect(() => tensorGraph(100)).not.toThrow();
      expect(() => gpuKernel(100)).not.toThrow();
    });
  });
  it('verifyNode accepts a node some stage accepts', () => {
    expect(() => verifyNode(UOp.range(5, 3))).not.toThrow();
    expect(() => verifyNode(linear(linearParts().list))).not.toThrow();
  });

  it('has a rule for every op in some stage', () => {
    const ruled = new Set(STAGES.flatMap((s) => specs[s].flatMap((r) => [...r[1].ops!])));
    const ops = Object.values(Ops).filter((v): v is Ops => typeof v === 'number');
    expect(ops.filter((op) => !ruled.has(op)).map((op) => Ops[op])).toEqual([]);
  });
  it('the tensor stage rules exactly the ops a tensor graph holds (the gradient table covers those)', () => {
    const ruled = new Set(specs.tensor.flatMap((r) => [...r[1].ops!]));
    const ops = Object.values(Ops).filter((v): v is Ops => typeof v === 'number');
    expect(ops.filter((op) => ruled.has(op) !== isTensorGraphOp(op)).map((op) => Ops[op])).toEqual([]);
  });
});
