// UOp: hash-consing and its weak table, content keys, the spec's derived properties, construction errors and arithmetic.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AddrSpace, type DType, dtypes } from '../../src/dtype.ts';
import { sha256, sha256Js } from '../../src/helpers.ts';
import { RECENT } from '../../src/uop/intern.ts';
import { type ArgOf, AxisType, GroupOp, Ops } from '../../src/uop/ops.ts';
import { argKey, UOp } from '../../src/uop/uop.ts';
import { keyGraph, keysOf } from './key-graph.ts';

const { bool, int32, uint8, uint32, float16, float32, float64, index } = dtypes;
const TWO = ['GPU:0', 'GPU:1'] as const;

const c = (dtype: DType, v: number | bigint | boolean) => UOp.const(dtype, v);
const ci = (v: number) => UOp.const(index, v);
const buf = (shape: (number | UOp)[], dtype: DType = float32, device: string | readonly string[] = 'CPU') =>
  UOp.buffer(0, dtype, shape, device);
const v32 = (name: string, lo: number, hi: number) => UOp.variable(name, lo, hi, int32);
/** [vmin, vmax], with -0 read as 0. */
const range = (u: UOp) => [u.vmin + 0, u.vmax + 0];

describe('hash-consing', () => {
  it('building an equal node returns the same object', () => {
    expect(c(int32, 1)).toBe(c(int32, 1));
    const b = buf([2, 3]);
    expect(b).toBe(buf([2, 3]));
    expect(b.add(1)).toBe(b.add(1));
    expect(b.permute([1, 0])).toBe(b.permute([1, 0])); // a fresh but equal arg array
    expect(b.reduce(Ops.ADD, [1])).toBe(b.reduce(Ops.ADD, [1]));
    expect(UOp.variable('n', 1, 8)).toBe(UOp.variable('n', 1, 8));
    expect(UOp.make(Ops.BINARY, [], new Uint8Array([1, 2]))).toBe(
      UOp.make(Ops.BINARY, [], new Uint8Array([1, 2])),
    );
    expect(b.withTag('t')).toBe(b.withTag('t'));
    expect(b.withTag('t').withTag(null)).toBe(b);
    expect(b.replace({ arg: b.arg })).toBe(b);
  });

  it('shapeVec (its recent shapes cached) is the STACK of the sizes for every shape, symbolic ones included', () => {
    const n = UOp.variable('n', 1, 8);
    // a few hundred shapes share the cache's 256 slots: a hit must never be another shape's vector
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.nat(70), fc.constant(-0), fc.constant(2 ** 40), fc.constant(n)), {
          maxLength: 4,
        }),
        (shape) => {
          expect(UOp.shapeVec(shape)).toBe(UOp.make(Ops.STACK, shape.map(UOp.index)));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('BUFFER and PARAM args key by every field, in any order, an undefined field as an absent one', () => {
    const shape = UOp.shapeVec([4]);
    const p = UOp.make(Ops.PARAM, [shape], { slot: 0, dtype: float32, device: 'CPU' });
    expect(
      UOp.make(Ops.PARAM, [shape], { device: 'CPU', dtype: float32, slot: 0, addrspace: undefined }),
    ).toBe(p);
    expect(UOp.param(0, float32, [4], 'CPU')).toBe(p);
    const others = [
      UOp.make(Ops.PARAM, [shape], { slot: 1, dtype: float32, device: 'CPU' }),
      UOp.make(Ops.PARAM, [shape], { slot: '0', dtype: float32, device: 'CPU' }),
      UOp.make(Ops.PARAM, [shape], { slot: 0, dtype: int32, device: 'CPU' }),
      UOp.make(Ops.PARAM, [shape], { slot: 0, dtype: float32, device: 'JS' }),
      UOp.make(Ops.PARAM, [shape], { slot: 0, dtype: float32 }),
      UOp.make(Ops.PARAM, [shape], { slot: 0, dtype: float32, device: 'CPU', addrspace: AddrSpace.LOCAL }),
    ];
    expect(new Set([p, ...others]).size).toBe(others.length + 1);
    expect(new Set([p, ...others].map((u) => u.key)).size).toBe(others.length + 1);
    const b = UOp.buffer(3, float32, [4], 'CPU');
    const arg = { addrspace: AddrSpace.GLOBAL, device: 'CPU', dtype: float32, slot: 3 };
    expect(UOp.make(Ops.BUFFER, [shape], arg)).toBe(b);
    expect(UOp.buffer(3, float32, [4], ['CPU', 'JS'])).not.toBe(b);
  });

  it('a node rebuilt with other sources or tag keeps its arg: equal to the node made from scratch', () => {
    const b = buf([2, 3]);
    const d = UOp.buffer(1, float32, [2, 3]);
    const r = b.reduce(Ops.ADD, [1]);
    expect(r.withSrc([d])).toBe(d.reduce(Ops.ADD, [1]));
    expect(r.replace({ src: [d] })).toBe(d.reduce(Ops.ADD, [1]));
    expect(r.withTag(7)).toBe(UOp.make(Ops.REDUCE, [b], { op: Ops.ADD, axes: [1] }, 7));
    expect(r.replace({ arg: { op: Ops.MAX, axes: [1] } })).toBe(b.reduce(Ops.MAX, [1]));
    expect(c(int32, 1).replace({ tag: 2 }).key).not.toBe(c(int32, 1).key);
  });

  it('a different op, arg, dtype, tag or source order gives a different node', () => {
    const b = buf([2, 2]);
    const d = UOp.buffer(1, float32, [2, 2]);
    const distinct = [
      c(int32, 1),
      c(int32, 2),
      c(uint32, 1),
      c(float32, 0),
      c(float32, -0),
      c(bool, true),
      b,
      d,
      buf([2, 2], float32, 'GPU'),
      buf([2, 2], float32, ['CPU']),
      b.add(d),
      d.add(b),
      b.mul(d),
      b.permute([1, 0]),
      b.permute([0, 1]),
      b.reduce(Ops.ADD, [0]),
      b.reduce(Ops.MAX, [0]),
      b.reduce(Ops.ADD, [1]),
      b.withTag(1),
      b.withTag('1'),
      b.withTag('a'),
      UOp.variable('n', 1, 8),
      UOp.variable('n', 1, 9),
      UOp.variable('m', 1, 8),
    ];
    expect(new Set(distinct).size).toBe(distinct.length);
    expect(new Set(distinct.map((u) => u.key)).size).toBe(distinct.length);
  });

  it('sources are frozen and ids grow', () => {
    const b = buf([3]);
    const u = b.add(1);
    expect(Object.isFrozen(u.src)).toBe(true);
    expect(u.id).toBeGreaterThan(b.id);
    const src = [b, b];
    const m = UOp.make(Ops.MAX, src);
    src.pop();
    expect(m.src.length).toBe(2);
  });

  it('holds nodes weakly: a million short-lived nodes keep the table and the heap bounded', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const tick = () => new Promise((r) => setTimeout(r, 0));
    // V8 keeps weakly held objects alive until the job ends and runs finalizers in later tasks
    const collect = async () => {
      for (let i = 0; i < 4; i++) {
        gc();
        await tick();
      }
    };
    await collect();
    const baseTable = UOp.tableSize();
    const baseHeap = process.memoryUsage().heapUsed;
    const kept = UOp.variable('kept', 0, 7);
    const keptId = kept.id;
    let peak = 0;
    const batch = 20_000;
    for (let b = 0; b < 1_000_000 / batch; b++) {
      for (let i = 0; i < batch; i++) c(int32, b * batch + i);
      peak = Math.max(peak, UOp.tableSize() - baseTable);
      if (b % 10 === 9) await collect();
      else await tick();
    }
    await collect();
    // at most the nodes of the batches since the last collection, never all million
    expect(peak).toBeLessThan(300_000);
    // after collection: the recent-node cache holds up to RECENT nodes strongly, and nothing else survives
    expect(UOp.tableSize() - baseTable).toBeLessThan(RECENT + 1_000);
    expect(process.memoryUsage().heapUsed - baseHeap).toBeLessThan(30 * 2 ** 20);
    // a node someone holds survives collection and is still what an equal construction returns
    expect(UOp.variable('kept', 0, 7)).toBe(kept);
    expect(kept.id).toBe(keptId);
  }, 60_000);
});

describe('content key', () => {
  it("keys the args it keys from their fields (BUFFER, PARAM, REDUCE, RANGE) as any other object's", () => {
    const generic = (arg: object) => argKey(Ops.CUSTOM, arg as ArgOf<Ops.CUSTOM>);
    const args: [Ops, object][] = [
      [Ops.BUFFER, { slot: 7, dtype: dtypes.float32, device: 'CPU', addrspace: AddrSpace.GLOBAL }],
      // BUFFER's key text is made from a head per dtype and device: other slots, devices and spaces after it
      [Ops.BUFFER, { slot: 12, dtype: dtypes.float32, device: 'CPU', addrspace: AddrSpace.GLOBAL }],
      [Ops.BUFFER, { slot: -0, dtype: dtypes.float32, device: 'CUDA:1', addrspace: AddrSpace.GLOBAL }],
      [Ops.BUFFER, { slot: 3, dtype: dtypes.float32, device: 'CPU', addrspace: AddrSpace.LOCAL }],
      [Ops.BUFFER, { slot: 3, dtype: dtypes.int8, device: TWO, addrspace: AddrSpace.GLOBAL }],
      [Ops.PARAM, { slot: 'start', dtype: dtypes.index, device: undefined }],
      [Ops.PARAM, { slot: 2, dtype: dtypes.float16, device: 'CUDA', addrspace: AddrSpace.LOCAL, swizzle: 3 }],
      [Ops.REDUCE, { op: Ops.MAX, axes: [0, 2] }],
      [Ops.RANGE, { id: 4, type: AxisType.REDUCE }],
    ];
    for (const [op, arg] of args) expect(argKey(op, arg as never)).toBe(generic(arg));
  });

  it('is a sha256 hex digest, stable for equal graphs and different for different ones', () => {
    const g = keyGraph();
    for (const u of Object.values(g)) expect(u.key).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set(Object.values(g).map((u) => u.key)).size).toBe(Object.keys(g).length);
    expect(keysOf(keyGraph())).toEqual(keysOf(g));
    const a = buf([4]);
    expect(a.add(1).key).not.toBe(a.add(2).key);
    expect(a.add(1).key).not.toBe(a.mul(1).key);
    expect(c(float32, 1).key).not.toBe(c(float64, 1).key);
    expect(c(float32, 0).key).not.toBe(c(float32, -0).key);
    expect(a.withTag(1).key).not.toBe(a.withTag('1').key);
    expect(a.withTag('').key).not.toBe(a.key);
    const b = UOp.buffer(1, float32, [4]);
    expect(a.add(b).key).not.toBe(b.add(a).key);
  });

  it("hashes as the JS SHA-256 does where Node's native one serves (src/node.ts)", () => {
    const abc = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';
    expect(sha256('abc')).toBe(abc);
    expect(sha256Js('abc')).toBe(abc);
    for (const text of [
      '',
      'héllo ☃ 𝄞',
      'x'.repeat(55),
      'x'.repeat(56),
      'y'.repeat(20_000),
      Object.values(keysOf(keyGraph())).join(),
    ])
      expect(sha256(text)).toBe(sha256Js(text));
  });

  it('is the same in another process, where ids differ', async () => {
    const script = fileURLToPath(new URL('./key-graph.ts', import.meta.url));
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        ['--import', 'tsx', script, '--print-keys'],
        { cwd: root },
        (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
      ),
    );
    const there = JSON.parse(out) as Record<string, string>;
    const here = keyGraph();
    expect(there).toEqual(keysOf(here));
    expect(Object.keys(there).length).toBeGreaterThan(5);
  }, 30_000);
});

describe('derived property: dtype', () => {
  const b = buf([2, 3]);
  const i = buf([2, 3], int32);
  it('sources take theirs from the arg; BINARY is uint8; RANGE is index', () => {
    expect(b.dtype).toBe(float32);
    expect(c(float16, 1).dtype).toBe(float16);
    expect(UOp.param(0, uint8, [3]).dtype).toBe(uint8);
    expect(UOp.variable('n', 0, 3).dtype).toBe(index);
    expect(UOp.make(Ops.BINARY, [], new Uint8Array(5)).dtype).toBe(uint8);
    expect(UOp.range(4, 0).dtype).toBe(index);
  });
  it('movement, REDUCE, COPY, unary, binary, INDEX and AFTER keep src[0].dtype', () => {
    for (const u of [
      b.reshape([6]),
      b.permute([1, 0]),
      b.expand([2, 3]),
      b.flip([true, false]),
      b.pad([0, 0], [3, 3]),
      b.shrink([0, 0], [1, 3]),
      b.reduce(Ops.MAX, [0]),
      UOp.make(Ops.COPY, [b], 'GPU'),
      b.recip(),
      b.add(b),
      b.mul(2),
      b.maximum(b),
      b.index(ci(1)),
      UOp.make(Ops.AFTER, [b, UOp.make(Ops.STORE, [b, b])]),
    ])
      expect(u.dtype).toBe(float32);
    expect(i.idiv(2).dtype).toBe(int32);
    expect(i.mod(2).dtype).toBe(int32);
  });
  it('CAST and BITCAST take the arg; comparisons give bool; WHERE gives src[1].dtype; STORE void', () => {
    expect(b.cast(float16).dtype).toBe(float16);
    expect(b.bitcast(int32).dtype).toBe(int32);
    expect(b.lt(b).dtype).toBe(bool);
    expect(i.ne(i).dtype).toBe(bool);
    expect(i.lt(i).where(b, b).dtype).toBe(float32);
    expect(UOp.make(Ops.STORE, [b, b]).dtype).toBe(dtypes.void);
    expect(UOp.sink().dtype).toBe(dtypes.void);
  });
  it('FUNCTION/CALL (tuple-valued) are void; GETTUPLE gives the element dtype', () => {
    const p = UOp.param(0, float32, [3]);
    const f = UOp.make(Ops.FUNCTION, [UOp.make(Ops.TUPLE, [p.add(1), p.lt(p)]), buf([3])]);
    expect(f.dtype).toBe(dtypes.void);
    expect(UOp.make(Ops.GETTUPLE, [f], 0).dtype).toBe(float32);
    expect(UOp.make(Ops.GETTUPLE, [f], 1).dtype).toBe(bool);
  });
});

describe('derived property: shape', () => {
  const b = buf([2, 3]);
  it('FUNCTION results substitute the arguments into symbolic PARAM sizes', () => {
    const n = UOp.make(Ops.PARAM, [UOp.shapeVec([]), ci(1), ci(64)], { slot: 1, dtype: index });
    const x = UOp.param(0, float32, [n, 3]);
    const body = UOp.make(Ops.TUPLE, [x.add(x), x.reshape([n.mul(3)])]);
    const f = UOp.make(Ops.FUNCTION, [body, buf([8, 3]), ci(8)]);
    expect(UOp.make(Ops.GETTUPLE, [f], 0).shape).toEqual([8, 3]);
    expect(UOp.make(Ops.GETTUPLE, [f], 1).shape).toEqual([24]);
    // a TUPLE on its own keeps the symbolic size
    expect(UOp.make(Ops.GETTUPLE, [body], 0).shape).toEqual([n, 3]);
  });
  it('sources: BUFFER/PARAM from src[0], CONST and RANGE are (), BINARY is its length', () => {
    expect(b.shape).toEqual([2, 3]);
    expect(UOp.param(0, float32, [5, 1]).shape).toEqual([5, 1]);
    expect(c(int32, 3).shape).toEqual([]);
    expect(UOp.range(4, 0).shape).toEqual([]);
    expect(UOp.variable('n', 0, 3).shape).toEqual([]);
    expect(UOp.make(Ops.BINARY, [], new Uint8Array(5)).shape).toEqual([5]);
    expect(buf([]).shape).toEqual([]);
  });
  it('movement ops', () => {
    expect(b.permute([1, 0]).shape).toEqual([3, 2]);
    expect(buf([2, 3, 4]).permute([2, 0, 1]).shape).toEqual([4, 2, 3]);
    expect(b.flip([true, false]).shape).toEqual([2, 3]);
    expect(b.reshape([3, 1, 2]).shape).toEqual([3, 1, 2]);
    expect(buf([1, 3]).expand([4, 3]).shape).toEqual([4, 3]);
    expect(b.pad([1, 0], [4, 5]).shape).toEqual([4, 5]);
    expect(b.shrink([1, 1], [1, 2]).shape).toEqual([1, 2]);
    expect(buf([0, 3]).reshape([3, 0]).shape).toEqual([3, 0]);
  });
  it('INDEX removes a dim for a ()-shaped index and makes it k for a (k,)-shaped one', () => {
    const t = buf([4, 5, 6]);
    expect(t.index(ci(1)).shape).toEqual([5, 6]);
    expect(t.index(ci(1), ci(2)).shape).toEqual([6]);
    expect(t.index(buf([7], int32)).shape).toEqual([7, 5, 6]);
    expect(t.index(ci(0), buf([3], int32)).shape).toEqual([3, 6]);
  });
  it('STACK adds a leading axis; BITCAST preserves the bytes', () => {
    expect(UOp.make(Ops.STACK, [b, b, b]).shape).toEqual([3, 2, 3]);
    expect(buf([2, 4]).bitcast(uint8).shape).toEqual([2, 16]);
    expect(buf([2, 4]).bitcast(float16).shape).toEqual([2, 8]);
    expect(buf([2, 4], uint8).bitcast(float32).shape).toEqual([2, 1]);
    expect(buf([2, 4]).bitcast(int32).shape).toEqual([2, 4]);
  });
  it('REDUCE and REPLICATED collapse their axes to 1', () => {
    expect(b.reduce(Ops.ADD, [1]).shape).toEqual([2, 1]);
    expect(b.reduce(Ops.MUL, [0, 1]).shape).toEqual([1, 1]);
    expect(b.reduce(Ops.ADD, []).shape).toEqual([2, 3]);
    expect(UOp.make(Ops.REPLICATED, [b], [0]).shape).toEqual([1, 3]);
  });
  it('elementwise ops broadcast right-aligned; CAST, COPY, AFTER and LOAD keep the shape', () => {
    expect(buf([2, 1]).add(buf([1, 3])).shape).toEqual([2, 3]);
    expect(buf([4, 2, 3]).mul(buf([3])).shape).toEqual([4, 2, 3]);
    expect(buf([3]).mul(buf([4, 1, 3])).shape).toEqual([4, 1, 3]);
    expect(b.add(1).shape).toEqual([2, 3]);
    expect(buf([2, 1]).lt(buf([3])).shape).toEqual([2, 3]);
    expect(buf([2, 1], bool).where(buf([1, 3]), c(float32, 0)).shape).toEqual([2, 3]);
    expect(b.cast(int32).shape).toEqual([2, 3]);
    expect(UOp.make(Ops.COPY, [b], 'GPU').shape).toEqual([2, 3]);
    expect(UOp.make(Ops.LOAD, [b], null).shape).toEqual([2, 3]);
    expect(UOp.make(Ops.AFTER, [b, UOp.make(Ops.STORE, [b, b])]).shape).toEqual([2, 3]);
    expect(UOp.make(Ops.STORE, [b, b]).shape).toEqual([]);
    expect(UOp.sink().shape).toBeNull();
  });
  it('symbolic sizes from variables', () => {
    const n = UOp.variable('n', 1, 10);
    const m = UOp.variable('m', 1, 10);
    const s = buf([n, 3]);
    expect(s.shape).toEqual([n, 3]);
    expect(s.shape![0]).toBe(n);
    expect(s.reshape([3, n]).shape).toEqual([3, n]);
    expect(s.reshape([n, 3, 1]).shape).toEqual([n, 3, 1]);
    expect(s.reshape([n.mul(3)]).shape).toEqual([n.mul(3)]);
    expect(buf([n.mul(3)]).reshape([3, n]).shape).toEqual([3, n]);
    expect(buf([n, m]).reshape([m.mul(n)]).shape).toEqual([m.mul(n)]);
    expect(buf([1, 3]).expand([n, 3]).shape).toEqual([n, 3]);
    expect(s.add(buf([1, 3])).shape).toEqual([n, 3]);
    expect(s.add(buf([3])).shape).toEqual([n, 3]);
    expect(s.permute([1, 0]).shape).toEqual([3, n]);
    expect(s.reduce(Ops.ADD, [0]).shape).toEqual([1, 3]);
    expect(() => s.reshape([n, 4])).toThrow(/RESHAPE: cannot reshape \(n, 3\) to \(n, 4\)/);
    expect(() => s.reshape([m, 3])).toThrow(/RESHAPE/);
    expect(() => s.add(buf([m, 3]))).toThrow(/ADD: cannot broadcast shapes \(n, 3\) and \(m, 3\)/);
    expect(UOp.range(n, 0).shape).toEqual([]);
  });
});

describe('derived property: device', () => {
  const b = buf([4, 6]);
  const t = buf([4, 6], float32, TWO);
  it('BUFFER from the arg (a name or a tuple); CONST, RANGE and BINARY have none', () => {
    expect(b.device).toBe('CPU');
    expect(t.device).toEqual(TWO);
    expect(c(float32, 1).device).toBeNull();
    expect(UOp.range(4, 0).device).toBeNull();
    expect(UOp.make(Ops.BINARY, [], new Uint8Array(2)).device).toBeNull();
  });
  it('PARAM from the arg when given', () => {
    expect(UOp.param(0, float32, [3], 'GPU').device).toBe('GPU');
    expect(UOp.param(0, float32, [3]).device).toBeNull();
    expect(UOp.variable('n', 0, 3).device).toBeNull();
  });
  it('movement, REDUCE, CAST, ALU, INDEX, STORE and AFTER follow their sources; COPY goes to the arg', () => {
    for (const u of [
      t.reshape([24]),
      t.permute([1, 0]),
      t.reduce(Ops.ADD, [0]),
      t.cast(int32),
      t.add(1),
      t.lt(t).where(t, c(float32, 0)),
      t.index(ci(0)),
      UOp.make(Ops.STORE, [t, t]),
      UOp.make(Ops.AFTER, [t, UOp.make(Ops.STORE, [t, t])]),
    ])
      expect(u.device).toEqual(TWO);
    // a device-free constant broadcasts onto its partner's device
    expect(c(float32, 1).add(b).device).toBe('CPU');
    expect(UOp.make(Ops.COPY, [b], 'GPU:1').device).toBe('GPU:1');
    expect(UOp.make(Ops.COPY, [b], TWO).device).toEqual(TWO);
    expect(UOp.make(Ops.LOAD, [b], { device: 'DISK' }).device).toBe('DISK');
    expect(UOp.make(Ops.LOAD, [b], null).device).toBe('CPU');
    expect(UOp.make(Ops.LOAD, [b], { addrspace: AddrSpace.LOCAL }).device).toBe('CPU');
  });
  it('FUNCTION and CALL take src[1].device', () => {
    const p = UOp.param(0, float32, [3]);
    const body = UOp.make(Ops.TUPLE, [p.add(1)]);
    expect(UOp.make(Ops.FUNCTION, [body, buf([3], float32, 'GPU')]).device).toBe('GPU');
    expect(UOp.make(Ops.CALL, [body, buf([3], float32, TWO)]).device).toEqual(TWO);
  });
});

describe('derived property: addrspace', () => {
  it('BUFFER from the arg, PARAM and LOAD default to GLOBAL, movement follows, ALU has none', () => {
    const b = buf([4]);
    expect(b.addrspace).toBe(AddrSpace.GLOBAL);
    const local = UOp.make(Ops.BUFFER, [UOp.shapeVec([4])], {
      slot: 0,
      dtype: float32,
      device: 'CPU',
      addrspace: AddrSpace.LOCAL,
    });
    expect(local.addrspace).toBe(AddrSpace.LOCAL);
    expect(local.reshape([2, 2]).permute([1, 0]).addrspace).toBe(AddrSpace.LOCAL);
    expect(local.index(ci(1)).addrspace).toBe(AddrSpace.LOCAL);
    expect(UOp.make(Ops.AFTER, [local, UOp.make(Ops.STORE, [local, local])]).addrspace).toBe(AddrSpace.LOCAL);
    expect(UOp.param(0, float32, [4]).addrspace).toBe(AddrSpace.GLOBAL);
    expect(
      UOp.make(Ops.PARAM, [UOp.shapeVec([4])], { slot: 0, dtype: float32, addrspace: AddrSpace.REG })
        .addrspace,
    ).toBe(AddrSpace.REG);
    expect(UOp.make(Ops.LOAD, [b], null).addrspace).toBe(AddrSpace.GLOBAL);
    expect(UOp.make(Ops.LOAD, [b], { addrspace: AddrSpace.REG }).addrspace).toBe(AddrSpace.REG);
    expect(b.add(1).addrspace).toBeNull();
    expect(c(float32, 1).addrspace).toBeNull();
  });
});

describe('derived property: vmin/vmax', () => {
  it('CONST is [v, v]; sources without bounds have the dtype range', () => {
    expect(range(c(int32, 7))).toEqual([7, 7]);
    expect(range(c(bool, true))).toEqual([1, 1]);
    expect(range(c(float32, 0.5))).toEqual([0.5, 0.5]);
    expect(range(buf([3], uint8))).toEqual([0, 255]);
    expect(range(buf([3], int32))).toEqual([-(2 ** 31), 2 ** 31 - 1]);
    expect(range(buf([3], float32))).toEqual([-Infinity, Infinity]);
    expect(range(UOp.param(0, bool, [3]))).toEqual([0, 1]);
    expect(range(UOp.variable('n', 2, 9))).toEqual([2, 9]);
  });
  it('RANGE is [0, n-1], also for a symbolic bound', () => {
    expect(range(UOp.range(10, 0))).toEqual([0, 9]);
    expect(range(UOp.range(UOp.variable('n', 3, 8), 1))).toEqual([0, 7]);
  });
  it('PAD includes 0 in the range of its input: the padded area reads 0', () => {
    expect(range(c(int32, 5).reshape([1, 1]).pad([0, 0], [2, 1]))).toEqual([0, 5]);
    expect(range(c(int32, -3).reshape([1]).pad([1], [2]))).toEqual([-3, 0]);
    expect(range(v32('p', 2, 9).reshape([1]).pad([0], [3]))).toEqual([0, 9]);
  });
  it('other movement ops, INDEX, COPY and AFTER keep src[0]; REDUCE, BITCAST and unary ALU give the dtype range', () => {
    const k = c(int32, 5);
    expect(range(k.reshape([1]).expand([4]))).toEqual([5, 5]);
    expect(range(k.reshape([1, 1]).permute([1, 0]).shrink([0, 0], [1, 1]))).toEqual([5, 5]);
    expect(range(UOp.make(Ops.COPY, [k.reshape([1])], 'GPU'))).toEqual([5, 5]);
    const u = UOp.make(Ops.BUFFER, [UOp.shapeVec([4])], {
      slot: 0,
      dtype: uint8,
      device: 'CPU',
      addrspace: AddrSpace.GLOBAL,
    });
    expect(range(u.index(ci(1)))).toEqual([0, 255]);
    expect(range(k.reshape([1]).reduce(Ops.ADD, [0]))).toEqual([-(2 ** 31), 2 ** 31 - 1]);
    expect(range(k.bitcast(float32))).toEqual([-Infinity, Infinity]);
    expect(range(c(float32, 2).recip())).toEqual([-Infinity, Infinity]);
  });
  it('ADD, MUL and MAX follow the spec formulas', () => {
    const a = v32('a', -3, 5);
    const b = v32('b', 2, 7);
    expect(range(a.add(b))).toEqual([-1, 12]);
    expect(range(a.mul(b))).toEqual([-21, 35]);
    expect(range(a.mul(a))).toEqual([-15, 25]); // the intervals are independent
    expect(range(a.maximum(b))).toEqual([2, 7]);
    expect(range(a.maximum(1))).toEqual([1, 5]);
    expect(range(a.sub(b))).toEqual([-10, 3]);
    expect(range(a.neg())).toEqual([-5, 3]);
  });
  it('an integer result that can overflow its dtype widens to the dtype range', () => {
    const a = UOp.variable('a', 0, 200, uint8);
    expect(range(a.add(100))).toEqual([0, 255]);
    expect(range(a.add(10))).toEqual([10, 210]);
    expect(range(v32('big', 0, 2 ** 30).mul(4))).toEqual([-(2 ** 31), 2 ** 31 - 1]);
  });
  it('CMPLT and CMPNE are decided from the intervals', () => {
    const a = v32('a', 0, 3);
    expect(range(a.lt(4))).toEqual([1, 1]);
    expect(range(a.lt(0))).toEqual([0, 0]);
    expect(range(a.lt(2))).toEqual([0, 1]);
    expect(range(a.ne(7))).toEqual([1, 1]);
    expect(range(a.ne(2))).toEqual([0, 1]);
    expect(range(c(int32, 2).ne(2))).toEqual([0, 0]);
    expect(range(a.eq(7))).toEqual([0, 0]);
    expect(range(a.ge(0))).toEqual([1, 1]);
  });
  it('WHERE spans both branches unless the condition is decided', () => {
    const a = v32('a', 0, 3);
    const x = v32('x', 10, 20);
    const y = v32('y', -5, 12);
    expect(range(a.lt(2).where(x, y))).toEqual([-5, 20]);
    expect(range(a.lt(9).where(x, y))).toEqual([10, 20]);
    expect(range(a.lt(0).where(x, y))).toEqual([-5, 12]);
  });
  it('CAST: exact for floats (rounded to the target), truncated or the whole range for ints, decided for bool', () => {
    const a = v32('a', -5, 5);
    expect(range(a.cast(float32))).toEqual([-5, 5]);
    expect(range(c(int32, 16777217).cast(float32))).toEqual([16777216, 16777216]);
    expect(range(c(float64, 0.1).cast(float32))).toEqual([Math.fround(0.1), Math.fround(0.1)]);
    expect(range(c(int32, 70000).cast(float16))).toEqual([Infinity, Infinity]);
    expect(range(a.cast(uint8))).toEqual([0, 255]);
    expect(range(v32('p', 2, 7).cast(uint8))).toEqual([2, 7]);
    expect(range(UOp.variable('f', 0.5, 3.7, float32).cast(int32))).toEqual([0, 3]);
    expect(range(UOp.variable('g', -3.7, -0.5, float32).cast(int32))).toEqual([-3, 0]);
    expect(range(v32('p', 2, 7).cast(bool))).toEqual([1, 1]);
    expect(range(c(int32, 0).cast(bool))).toEqual([0, 0]);
    expect(range(a.cast(bool))).toEqual([0, 1]);
    expect(range(buf([2], float32).cast(int32))).toEqual([-(2 ** 31), 2 ** 31 - 1]);
  });
  it('IDIV is floor division and MOD takes the divisor sign', () => {
    const a = v32('a', -7, 9);
    expect(range(a.idiv(2))).toEqual([-4, 4]);
    expect(range(a.idiv(-2))).toEqual([-5, 3]);
    expect(range(c(int32, -7).idiv(2))).toEqual([-4, -4]);
    expect(range(a.mod(4))).toEqual([0, 3]);
    expect(range(a.mod(-4))).toEqual([-3, 0]);
    expect(range(v32('s', 1, 3).mod(4))).toEqual([1, 3]); // already below the divisor
    expect(range(a.idiv(v32('d', -1, 1)))).toEqual([-(2 ** 31), 2 ** 31 - 1]); // the divisor may be 0
  });
  it('AND, OR, XOR, SHL and SHR are bounded for non-negative operands', () => {
    const a = v32('a', 0, 12);
    const b = v32('b', 0, 5);
    expect(range(a.and(b))).toEqual([0, 5]);
    expect(range(a.or(b))).toEqual([0, 15]);
    expect(range(a.xor(b))).toEqual([0, 15]);
    expect(range(a.shl(2))).toEqual([0, 48]);
    expect(range(a.shr(2))).toEqual([0, 3]);
    expect(range(v32('n', -1, 3).and(b))).toEqual([-(2 ** 31), 2 ** 31 - 1]);
    const p = UOp.variable('p', 0, 1, bool);
    expect(range(p.and(c(bool, false)))).toEqual([0, 0]);
    expect(range(p.or(c(bool, true)))).toEqual([1, 1]);
  });

  // brute force: every value the op can produce lies in [vmin, vmax]; where the spec gives a formula, the
  // bounds are attained
  const evalOp: Partial<Record<Ops, (a: number, b: number) => number | undefined>> = {
    [Ops.ADD]: (a, b) => a + b,
    [Ops.MUL]: (a, b) => a * b,
    [Ops.MAX]: (a, b) => Math.max(a, b),
    [Ops.CMPLT]: (a, b) => Number(a < b),
    [Ops.CMPNE]: (a, b) => Number(a !== b),
    [Ops.IDIV]: (a, b) => (b === 0 ? undefined : Math.floor(a / b)),
    [Ops.MOD]: (a, b) => (b === 0 ? undefined : a - b * Math.floor(a / b)),
    [Ops.AND]: (a, b) => a & b,
    [Ops.OR]: (a, b) => a | b,
    [Ops.XOR]: (a, b) => a ^ b,
    [Ops.SHL]: (a, b) => a << b,
    [Ops.SHR]: (a, b) => a >> b,
  };
  const exact = new Set([Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.CMPNE]);
  const shifts = new Set([Ops.SHL, Ops.SHR]);
  const interval = (lo: number, hi: number) => fc.tuple(fc.integer({ min: lo, max: hi }), fc.nat(hi - lo));
  for (const [opKey, f] of Object.entries(evalOp)) {
    const op = Number(opKey) as Ops;
    it(`${Ops[op]} bounds every value it can produce (brute force)`, () => {
      fc.assert(
        fc.property(
          interval(-12, 12),
          shifts.has(op) ? interval(0, 6) : interval(-12, 12),
          ([a0, da], [b0, db]) => {
            const [a1, b1] = [a0 + da, b0 + db];
            const u = UOp.make(op, [v32('a', a0, a1), v32('b', b0, b1)]);
            let lo = Infinity;
            let hi = -Infinity;
            for (let a = a0; a <= a1; a++)
              for (let b = b0; b <= b1; b++) {
                const r = f(a, b);
                if (r === undefined) continue;
                lo = Math.min(lo, r);
                hi = Math.max(hi, r);
              }
            if (lo === Infinity) return; // only division by zero
            expect(u.vmin).toBeLessThanOrEqual(lo);
            expect(u.vmax).toBeGreaterThanOrEqual(hi);
            const tight =
              exact.has(op) || (op === Ops.IDIV && (b0 > 0 || b1 < 0)) || (op === Ops.SHR && a0 >= 0);
            if (tight) expect(range(u)).toEqual([lo + 0, hi + 0]);
          },
        ),
        { numRuns: 150 },
      );
    });
  }
});

describe('derived property: axis', () => {
  const t = buf([4, 6], float32, TWO);
  const axis = (u: UOp) => u.axis;
  it('BUFFER on a device tuple is sharded on axis 0; on one device it has none', () => {
    expect(axis(t)).toBe(0);
    expect(axis(buf([4, 6]))).toBeNull();
    expect(axis(UOp.param(0, float32, [4], TWO))).toBe(0);
    expect(axis(c(float32, 1))).toBeNull();
    expect(axis(UOp.range(4, 0))).toBeNull();
  });
  it('PERMUTE follows the permutation', () => {
    expect(axis(t.permute([1, 0]))).toBe(1);
    expect(axis(t.permute([0, 1]))).toBe(0);
    expect(axis(buf([2, 3, 4], float32, TWO).permute([2, 0, 1]))).toBe(1);
    expect(axis(buf([2, 3, 4], float32, TWO).permute([1, 2, 0]))).toBe(2);
  });
  it('RESHAPE remaps the axis to the one that keeps the shard boundary', () => {
    expect(axis(t.reshape([24]))).toBe(0);
    expect(axis(t.reshape([2, 2, 6]))).toBe(0);
    expect(axis(t.reshape([1, 4, 6]))).toBe(1);
    const s1 = t.permute([1, 0]); // (6, 4) sharded on axis 1
    expect(axis(s1.reshape([6, 2, 2]))).toBe(1);
    expect(axis(s1.reshape([3, 2, 4]))).toBe(2);
    expect(axis(s1.reshape([6, 4, 1]))).toBe(1);
    expect(() => s1.reshape([24]).axis).toThrow(
      /RESHAPE: cannot reshape \(6, 4\) sharded on axis 1 to \(24\)/,
    );
  });
  it('REDUCE and REPLICATED on the shard axis drop it; on another axis keep it', () => {
    expect(axis(t.reduce(Ops.ADD, [0]))).toBeNull();
    expect(axis(t.reduce(Ops.ADD, [0, 1]))).toBeNull();
    expect(axis(t.reduce(Ops.MAX, [1]))).toBe(0);
    expect(axis(UOp.make(Ops.REPLICATED, [t], [0]))).toBeNull();
    expect(axis(UOp.make(Ops.REPLICATED, [t], [1]))).toBe(0);
  });
  it('COPY to a device tuple shards on axis 0; to one device gathers (null)', () => {
    const single = buf([4, 6]);
    expect(axis(UOp.make(Ops.COPY, [single], TWO))).toBe(0);
    expect(axis(UOp.make(Ops.COPY, [t.permute([1, 0])], TWO))).toBe(0);
    expect(axis(UOp.make(Ops.COPY, [t], 'GPU:0'))).toBeNull();
    expect(axis(UOp.make(Ops.LOAD, [single], { device: TWO }))).toBe(0);
    expect(axis(UOp.make(Ops.LOAD, [t], { device: 'CPU' }))).toBeNull();
  });
  it('a LOAD without a device (a contiguous copy in place) keeps the axis', () => {
    expect(axis(UOp.make(Ops.LOAD, [t.permute([1, 0])], null))).toBe(1);
    expect(axis(UOp.make(Ops.LOAD, [t.permute([1, 0])], { addrspace: AddrSpace.GLOBAL }))).toBe(1);
  });
  it('the spec collectives: broadcast, scatter, gather, reduce_scatter', () => {
    const s = buf([6]);
    const bcast = UOp.make(
      Ops.REPLICATED,
      [UOp.make(Ops.COPY, [s.reshape([1, 6]).expand([2, 6])], TWO)],
      [0],
    );
    expect(axis(bcast)).toBeNull();
    expect(bcast.device).toEqual(TWO);
    expect(axis(UOp.make(Ops.COPY, [s], TWO))).toBe(0);
    const sharded = buf([12], float32, TWO);
    expect(axis(UOp.make(Ops.COPY, [sharded], 'GPU:0'))).toBeNull();
    const rs = UOp.make(Ops.COPY, [buf([12]).reshape([2, 2, 3]).permute([1, 0, 2])], TWO)
      .reduce(Ops.ADD, [1])
      .reshape([6]);
    expect(axis(rs)).toBe(0);
    expect(rs.shape).toEqual([6]);
  });
  it('ALU ops, CAST and markers inherit from their sources', () => {
    const s1 = t.permute([1, 0]);
    expect(axis(s1.add(1))).toBe(1);
    expect(axis(s1.cast(int32))).toBe(1);
    expect(axis(c(float32, 2).mul(s1))).toBe(1);
    expect(axis(buf([6, 4]).add(s1))).toBe(1);
    expect(axis(s1.lt(s1).where(s1, c(float32, 0)))).toBe(1);
    expect(axis(UOp.make(Ops.CONTIGUOUS, [s1]))).toBe(1);
    expect(axis(buf([6, 4]).add(1))).toBeNull();
  });
});

describe('invalid constructions throw errors that name the op, the operands and what is valid', () => {
  const b = buf([2, 3]);
  const cases: [string, () => unknown, RegExp[]][] = [
    [
      'broadcast of unequal axes',
      () => b.add(buf([4, 3])),
      [/^ADD: /, /\(2, 3\) and \(4, 3\)/, /axis -2 has sizes 2 and 4/, /equal or 1/],
    ],
    ['broadcast in WHERE', () => buf([2], bool).where(buf([3]), buf([3])), [/^WHERE: /, /\(2,\) and \(3,\)/]],
    [
      'reshape with another element count',
      () => b.reshape([4, 2]),
      [/^RESHAPE: /, /\(2, 3\) to \(4, 2\)/, /6 elements vs 8/, /same number/],
    ],
    [
      'reshape to a negative size',
      () => b.reshape([-1, 6]),
      [/^RESHAPE: /, /non-negative integers/, /\(-1, 6\)/],
    ],
    [
      'expand of a non-1 axis',
      () => b.expand([4, 3]),
      [/^EXPAND: /, /\(2, 3\) to \(4, 3\)/, /axis 0 has size 2/, /only size-1 axes expand/],
    ],
    ['expand to another rank', () => b.expand([1, 2, 3]), [/^EXPAND: /, /number of axes must match/]],
    [
      'a permute that repeats an axis',
      () => b.permute([1, 1]),
      [/^PERMUTE: /, /\[1, 1\]/, /not a permutation of the 2 axes of \(2, 3\)/],
    ],
    ['a permute of the wrong length', () => b.permute([0]), [/^PERMUTE: /, /\[0\]/, /not a permutation/]],
    ['a permute out of range', () => b.permute([0, 2]), [/^PERMUTE: /, /\[0, 2\]/]],
    [
      'pad beyond the output',
      () => b.pad([2, 0], [3, 3]),
      [
        /^PAD: /,
        /\(2, 3\)/,
        /offset \(2, 0\)/,
        /inside \(3, 3\)/,
        /axis 0 needs 0 <= offset and offset \+ 2 <= 3/,
      ],
    ],
    [
      'pad at a negative offset',
      () => b.pad([-1, 0], [3, 3]),
      [/^PAD: /, /sizes and offsets must be non-negative integers or index scalars/, /\(-1, 0\)/],
    ],
    ['pad with the wrong rank', () => b.pad([0], [3]), [/^PAD: /, /one entry per axis of \(2, 3\)/]],
    [
      'shrink beyond the input',
      () => b.shrink([1, 0], [2, 3]),
      [/^SHRINK: /, /from offset \(1, 0\) of \(2, 3\)/, /axis 0 needs 0 <= offset and offset \+ size <= 2/],
    ],
    [
      'shrink at a negative offset',
      () => b.shrink([0, -1], [1, 1]),
      [/^SHRINK: /, /non-negative/, /\(0, -1\)/],
    ],
    [
      'a buffer of negative size',
      () => buf([-1]),
      [/^BUFFER: /, /non-negative integers or index scalars/, /\(-1,\)/],
    ],
    [
      'a fractional size',
      () => UOp.make(Ops.RESHAPE, [b, UOp.make(Ops.VCONST, [], { values: [1.5, 4], dtype: index })]),
      [/^RESHAPE: /, /non-negative integers/, /\(1\.5, 4\)/],
    ],
    [
      'a symbolic size that is not an index',
      () => buf([v32('n', 1, 4)]),
      [/^BUFFER: /, /index scalars, got \(n,\)/],
    ],
    [
      'a shape operand holding a vector',
      () => UOp.make(Ops.BUFFER, [UOp.make(Ops.STACK, [UOp.shapeVec([4])])], b.arg as ArgOf<Ops.BUFFER>),
      [/^BUFFER: /, /sizes and offsets must be non-negative integers or index scalars/],
    ],
    [
      'a shape operand that is not a STACK or VCONST',
      () => UOp.make(Ops.RESHAPE, [b, ci(6)]),
      [/^RESHAPE: /, /a shape operand must be a STACK or VCONST of index scalars, got CONST/],
    ],
    [
      'a CAST to something that is not a DType',
      () => UOp.make(Ops.CAST, [b], 'float16' as never),
      [/^CAST: /, /the arg must be the target DType, got float16/],
    ],
    [
      'a BITCAST to something that is not a DType',
      () => UOp.make(Ops.BITCAST, [b], null as never),
      [/^BITCAST: /, /the arg must be the target DType, got null/],
    ],
    [
      'a stack of two dtypes',
      () => UOp.make(Ops.STACK, [c(float32, 1), c(int32, 1)]),
      [/^STACK: /, /all elements must have one dtype, got float32, int32/],
    ],
    [
      'a store of another dtype',
      () => UOp.make(Ops.STORE, [b, buf([2, 3], int32)]),
      [/^STORE: /, /the value's dtype int32 must be the buffer's float32/, /cast it first/],
    ],
    [
      'reduce of a missing axis',
      () => b.reduce(Ops.ADD, [2]),
      [/^REDUCE: /, /axis 2 does not exist in \(2, 3\)/, /valid axes are 0\.\.1/],
    ],
    ['reduce of a repeated axis', () => b.reduce(Ops.ADD, [1, 1]), [/^REDUCE: /, /axis 1 is given twice/]],
    ['replicated on a missing axis', () => UOp.make(Ops.REPLICATED, [b], [5]), [/^REPLICATED: /, /axis 5/]],
    [
      'WHERE with a non-bool condition',
      () => b.where(b, b),
      [/^WHERE: /, /condition must be bool, got float32/, /x != 0/],
    ],
    [
      'WHERE with branches of two dtypes',
      () => UOp.make(Ops.WHERE, [buf([3], bool), buf([3]), buf([3], int32)]),
      [/^WHERE: /, /float32 and int32/],
    ],
    [
      'a binary op on different dtypes (make)',
      () => UOp.make(Ops.ADD, [b, buf([2, 3], int32)]),
      [/^ADD: /, /operand dtypes differ \(float32, int32\)/, /cast them to one dtype/],
    ],
    [
      'a binary op on different dtypes (method)',
      () => b.mul(buf([2, 3], int32)),
      [/^MUL: /, /float32 and int32/, /cast/],
    ],
    [
      'a comparison on different dtypes',
      () => b.lt(buf([2, 3], float16)),
      [/^CMPLT: /, /float32 and float16/],
    ],
    [
      'an integer op on floats',
      () => b.mod(2),
      [/^MOD: /, /needs integer \(or bool\) operands, got float32/],
    ],
    [
      'true division of integers',
      () => buf([2], int32).div(2),
      [/^DIV: /, /needs a float dtype, got int32/, /idiv/],
    ],
    ['a flip with the wrong flag count', () => b.flip([true]), [/^FLIP: /, /1 flags for shape \(2, 3\)/]],
    [
      'a bitcast that splits an element',
      () => buf([3], uint8).bitcast(float32),
      [/^BITCAST: /, /\(3,\) of uint8 as float32/, /whole number of float32 \(4 bytes\)/],
    ],
    [
      'a stack of two shapes',
      () => UOp.make(Ops.STACK, [b, buf([3, 2])]),
      [/^STACK: /, /\(2, 3\) and \(3, 2\)/],
    ],
    [
      'a store of another shape',
      () => UOp.make(Ops.STORE, [b, buf([3, 2])]),
      [/^STORE: /, /buffer shape \(2, 3\) and value shape \(3, 2\)/],
    ],
    ['too many indices', () => b.index(ci(0), ci(0), ci(0)), [/^INDEX: /, /3 indices for \(2, 3\)/]],
    ['a float index', () => b.index(c(float32, 0)), [/^INDEX: /, /must be integers, got float32/]],
    [
      'a GETTUPLE out of range',
      () => UOp.make(Ops.GETTUPLE, [UOp.make(Ops.TUPLE, [b])], 3),
      [/^GETTUPLE: /, /3/],
    ],
    [
      'a variable with min > max',
      () => UOp.variable('k', 5, 1),
      [/variable k/, /min 5 must not exceed max 1/],
    ],
  ];
  it('float-only unary ops on an integer, but TRUNC is left to the spec verifier', () => {
    for (const op of [Ops.RECIP, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT])
      expect(() => UOp.make(op, [buf([3], int32)])).toThrow(
        new RegExp(`^${Ops[op]}: needs a float operand, got int32; cast it to a float dtype first`),
      );
    expect(UOp.make(Ops.TRUNC, [buf([3], int32)]).dtype).toBe(int32);
  });
  it.each(cases)('%s', (_name, build, patterns) => {
    let message = '';
    try {
      build();
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).not.toBe('');
    for (const p of patterns) expect(message).toMatch(p);
  });
});

describe('long chains', () => {
  const N = 200_000;
  it(`derived properties of a ${N}-node ALU chain compute without recursion`, () => {
    const v = UOp.variable('v', 0, 10);
    let x = v;
    for (let i = 0; i < N; i++) x = x.add(1);
    expect(x.vmin).toBe(N);
    expect(x.vmax).toBe(N + 10);
    expect(x.key).toMatch(/^[0-9a-f]{64}$/);
    expect(x.device).toBeNull();
    expect(x.axis).toBeNull();
    expect(x.addrspace).toBeNull();
    expect(x.toposort().length).toBe(N + 5); // the adds, the constant 1, v, v's shape and its two bounds
    expect(x.src[0]!.vmin).toBe(N - 1); // the cached intervals of the inner nodes
  }, 60_000);
  it(`device, addrspace and axis of a ${N / 2}-node movement chain on a device tuple`, () => {
    let x = buf([4, 6], float32, TWO);
    for (let i = 0; i < N / 2; i++) x = x.permute([1, 0]);
    expect(x.shape).toEqual([4, 6]);
    expect(x.device).toEqual(TWO);
    expect(x.addrspace).toBe(AddrSpace.GLOBAL);
    expect(x.axis).toBe(0);
    expect(x.src[0]!.axis).toBe(1);
    expect(x.vmin).toBe(-Infinity);
    expect(x.key).not.toBe(x.src[0]!.key);
  }, 60_000);
});

describe('arithmetic methods build the spec decompositions', () => {
  const a = buf([3]);
  const b = UOp.buffer(1, float32, [3]);
  const i = buf([3], int32);
  const j = UOp.buffer(1, int32, [3]);
  const u = buf([3], uint32);
  const w = UOp.buffer(1, uint32, [3]);
  const mk = UOp.make;
  const TRUE = c(bool, true);
  it('primitives', () => {
    expect(a.add(b)).toBe(mk(Ops.ADD, [a, b]));
    expect(a.add(2)).toBe(mk(Ops.ADD, [a, c(float32, 2)]));
    expect(a.mul(b)).toBe(mk(Ops.MUL, [a, b]));
    expect(i.idiv(j)).toBe(mk(Ops.IDIV, [i, j]));
    expect(i.mod(3)).toBe(mk(Ops.MOD, [i, c(int32, 3)]));
    expect(a.maximum(b)).toBe(mk(Ops.MAX, [a, b]));
    expect(a.lt(b)).toBe(mk(Ops.CMPLT, [a, b]));
    expect(a.ne(b)).toBe(mk(Ops.CMPNE, [a, b]));
    expect(a.recip()).toBe(mk(Ops.RECIP, [a]));
    expect(a.trunc()).toBe(mk(Ops.TRUNC, [a]));
    expect(i.and(j)).toBe(mk(Ops.AND, [i, j]));
    expect(i.or(j)).toBe(mk(Ops.OR, [i, j]));
    expect(i.xor(j)).toBe(mk(Ops.XOR, [i, j]));
    expect(i.shl(1)).toBe(mk(Ops.SHL, [i, c(int32, 1)]));
    expect(i.shr(1)).toBe(mk(Ops.SHR, [i, c(int32, 1)]));
  });
  it('NEG is MUL(a, -1); SUB is ADD(a, NEG(b)); DIV is MUL(a, RECIP(b))', () => {
    expect(a.neg()).toBe(mk(Ops.MUL, [a, c(float32, -1)]));
    expect(a.sub(b)).toBe(mk(Ops.ADD, [a, mk(Ops.MUL, [b, c(float32, -1)])]));
    expect(a.sub(2)).toBe(mk(Ops.ADD, [a, c(float32, -2)]));
    expect(i.sub(j)).toBe(mk(Ops.ADD, [i, mk(Ops.MUL, [j, c(int32, -1)])]));
    // unsigned: -1 wraps to the all-ones constant, and a + b * (2^32 - 1) wraps to a - b
    expect(u.sub(w)).toBe(mk(Ops.ADD, [u, mk(Ops.MUL, [w, c(uint32, 4294967295)])]));
    expect(a.div(b)).toBe(mk(Ops.MUL, [a, mk(Ops.RECIP, [b])]));
    expect(a.div(4)).toBe(mk(Ops.MUL, [a, mk(Ops.RECIP, [c(float32, 4)])]));
  });
  it('CMPGT is CMPLT(b, a); CMPLE, CMPGE and CMPEQ negate with CMPNE(x, true)', () => {
    expect(a.gt(b)).toBe(mk(Ops.CMPLT, [b, a]));
    expect(a.gt(1)).toBe(mk(Ops.CMPLT, [c(float32, 1), a]));
    expect(a.le(b)).toBe(mk(Ops.CMPNE, [mk(Ops.CMPLT, [b, a]), TRUE]));
    expect(a.ge(b)).toBe(mk(Ops.CMPNE, [mk(Ops.CMPLT, [a, b]), TRUE]));
    expect(a.eq(b)).toBe(mk(Ops.CMPNE, [mk(Ops.CMPNE, [a, b]), TRUE]));
    const p = buf([3], bool);
    expect(p.logicalNot()).toBe(mk(Ops.CMPNE, [p, TRUE]));
    expect(p.neg()).toBe(mk(Ops.CMPNE, [p, TRUE]));
  });
  it('minimum is -max(-a, -b) for signed types and a WHERE for unsigned ones', () => {
    const neg = (x: UOp, d: DType) => mk(Ops.MUL, [x, c(d, -1)]);
    expect(a.minimum(b)).toBe(neg(mk(Ops.MAX, [neg(a, float32), neg(b, float32)]), float32));
    expect(u.minimum(w)).toBe(mk(Ops.WHERE, [mk(Ops.CMPLT, [u, w]), u, w]));
  });
  it('where, cast and bitcast', () => {
    const p = a.lt(b);
    expect(p.where(a, b)).toBe(mk(Ops.WHERE, [p, a, b]));
    expect(p.where(a, 0)).toBe(mk(Ops.WHERE, [p, a, c(float32, 0)]));
    expect(p.where(1, b)).toBe(mk(Ops.WHERE, [p, c(float32, 1), b]));
    expect(() => p.where(1, 2)).toThrow(/WHERE: at least one branch must be a UOp/);
    expect(a.cast(int32)).toBe(mk(Ops.CAST, [a], int32));
    expect(a.cast(float32)).toBe(a);
    expect(a.bitcast(uint32)).toBe(mk(Ops.BITCAST, [a], uint32));
    expect(a.bitcast(float32)).toBe(a);
  });
  it('constants take the operand dtype, stored as that dtype stores them', () => {
    const h = buf([3], float16);
    expect(h.add(0.1).src[1]).toBe(c(float16, 0.1));
    expect(h.add(0.1).src[1]!.constValue).toBe(0.0999755859375);
    expect(buf([3], uint8).add(300).src[1]!.constValue).toBe(44);
    expect(buf([3], uint8).add(-1).src[1]!.constValue).toBe(255);
  });
});

describe('ops and the public API', () => {
  it('has every op named in the spec drafts, in the spec groups', () => {
    const names = [
      ...['BUFFER', 'BUFFERVIEW', 'PARAM', 'CONST', 'VCONST', 'BINARY'],
      ...['PERMUTE', 'FLIP', 'RESHAPE', 'EXPAND', 'PAD', 'SHRINK', 'INDEX', 'STACK', 'BITCAST', 'REPLICATED'],
      ...['REDUCE', 'FUNCTION', 'CALL', 'TUPLE', 'GETTUPLE', 'LOAD', 'COPY', 'STORE'],
      ...['RANGE', 'END', 'AFTER', 'GROUP', 'SINK', 'LINEAR'],
      ...['RECIP', 'TRUNC', 'CAST', 'ADD', 'MUL', 'MAX', 'MOD', 'IDIV', 'CMPLT', 'CMPNE'],
      ...['XOR', 'OR', 'AND', 'SHR', 'SHL', 'WHERE'],
      ...[
        'NEG',
        'SUB',
        'DIV',
        'CMPGT',
        'CMPGE',
        'CMPLE',
        'CMPEQ',
        'NOT',
        'EXP2',
        'LOG2',
        'SIN',
        'SQRT',
        'POW',
      ],
      ...['MULACC', 'THREEFRY', 'CONTIGUOUS', 'CONTIGUOUSBACKWARD', 'DETACH'],
      ...['BARRIER', 'SPECIAL', 'IF', 'ENDIF', 'WMMA', 'CUSTOM', 'ATOMICADD'],
    ];
    for (const n of names) expect(typeof (Ops as unknown as Record<string, unknown>)[n], n).toBe('number');
    expect(GroupOp.Movement.has(Ops.PERMUTE) && GroupOp.Movement.has(Ops.BITCAST)).toBe(true);
    expect(GroupOp.Reduce.has(Ops.REDUCE)).toBe(true);
    expect([...GroupOp.Call].sort()).toEqual([Ops.FUNCTION, Ops.CALL, Ops.TUPLE, Ops.GETTUPLE].sort());
    expect(GroupOp.LoadStore.has(Ops.LOAD) && GroupOp.LoadStore.has(Ops.STORE)).toBe(true);
    expect([...GroupOp.Ordering].sort()).toEqual(
      [Ops.RANGE, Ops.END, Ops.AFTER, Ops.GROUP, Ops.SINK, Ops.LINEAR].sort(),
    );
    for (const op of [
      Ops.NEG,
      Ops.SUB,
      Ops.DIV,
      Ops.CMPGT,
      Ops.CMPGE,
      Ops.CMPLE,
      Ops.CMPEQ,
      Ops.NOT,
      Ops.MULACC,
    ])
      expect(GroupOp.Decomposed.has(op), Ops[op]).toBe(true);
    expect([...GroupOp.Marker].sort()).toEqual([Ops.CONTIGUOUS, Ops.CONTIGUOUSBACKWARD, Ops.DETACH].sort());
    for (const op of [Ops.BARRIER, Ops.SPECIAL, Ops.WMMA, Ops.ATOMICADD])
      expect(GroupOp.Codegen.has(op)).toBe(true);
  });

  it('exports the core names from src/index.ts', async () => {
    const api = await import('../../src/index.ts');
    for (const name of ['dtypes', 'DType', 'UOp', 'Ops', 'UPat', 'PatternMatcher', 'graphRewrite', 'Context'])
      expect((api as unknown as Record<string, unknown>)[name], name).toBeDefined();
    expect(api.UOp).toBe(UOp);
    expect(api.dtypes.float32).toBe(float32);
    const n = api.UOp.variable('n', 0, 9);
    expect([n.vmin, n.vmax, n.shape, n.dtype, n.device]).toEqual([0, 9, [], index, null]);
    expect(api.UOp.const(int32, 3).constValue).toBe(3);
    expect(UOp.range(8, 0, AxisType.REDUCE).arg).toEqual({
      id: 0,
      type: AxisType.REDUCE,
    } satisfies ArgOf<Ops.RANGE>);
  });

  it('Context scopes settings and restores them', async () => {
    const api = await import('../../src/index.ts');
    const before = api.Context.DEBUG;
    const seen = api.Context.with({ DEBUG: before + 3 }, () => api.Context.DEBUG);
    expect(seen).toBe(before + 3);
    expect(api.Context.DEBUG).toBe(before);
    expect(() =>
      api.Context.with({ DEBUG: 1 }, () => {
        throw new Error('inner');
      }),
    ).toThrow('inner');
    expect(api.Context.DEBUG).toBe(before);
    expect(() => api.Context.with({ NOPE: 1 }, () => 0)).toThrow(/unknown setting NOPE/);
    expect(() => api.Context.with({ DEBUG: 'x' }, () => 0)).toThrow(/DEBUG takes a number/);
  });
});
