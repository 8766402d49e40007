// The SIMT emulator on hand-written programs: workgroups, SPECIAL indices, LOCAL memory with BARRIER,
// IF/ENDIF masks, and the errors it reports where a GPU would do something undefined.
import { describe, expect, it, vi } from 'vitest';
import { AddrSpace, dtypes } from '../../src/dtype.ts';
import { bufferData, deviceBuffer } from '../../src/engine/buffers.ts';
import { Device } from '../../src/runtime/device.ts';
import type { SimtInstruction } from '../../src/runtime/simt.ts';
import { Tensor } from '../../src/tensor/index.ts';
import { Ops } from '../../src/uop/ops.ts';

const f32 = (slot: number, size: number, addrspace = AddrSpace.GLOBAL) =>
  ({ slot, dtype: 'float32', addrspace, size }) as const;

/** Runs instructions on SIMT over float32 buffers holding `inputs`; returns the buffers afterwards. */
function run(instructions: SimtInstruction[], inputs: number[][]): number[][] {
  const backend = Device.get('SIMT');
  const program = backend.compile('k', JSON.stringify({ name: 'k', instructions }));
  const bufs = inputs.map((v) => new Tensor(new Float32Array(v), { device: 'SIMT' }).realize().uop);
  program.run(bufs.map(deviceBuffer));
  return bufs.map((b) => Array.from(bufferData(b) as Float32Array));
}

// out[g] = sum of in[4g .. 4g+3]: each of 4 threads of group g loads one element into LOCAL memory, and
// after a BARRIER thread 0 adds them up
const groupSum = (barrier: boolean, guardBarrier = false): SimtInstruction[] => [
  ['CONST', 'index', [], { value: 4 }], // 0
  ['SPECIAL', 'index', [0], { name: 'lidx0' }], // 1
  ['CONST', 'index', [], { value: 2 }], // 2
  ['SPECIAL', 'index', [2], { name: 'gidx0' }], // 3
  ['PARAM', 'float32', [], f32(0, 2)], // 4 out
  ['PARAM', 'float32', [], f32(1, 8)], // 5 in
  ['PARAM', 'float32', [], f32(2, 4, AddrSpace.LOCAL)], // 6 local
  ['MUL', 'index', [3, 0]], // 7
  ['ADD', 'index', [7, 1]], // 8
  ['INDEX', 'float32', [5, 8]], // 9
  ['LOAD', 'float32', [9]], // 10
  ['INDEX', 'float32', [6, 1]], // 11
  ['STORE', 'void', [11, 10]], // 12
  ['CONST', 'index', [], { value: 1 }], // 13
  ['CMPLT', 'bool', [1, 13]], // 14 lidx0 < 1
  ...(guardBarrier ? ([['IF', 'void', [14]]] as SimtInstruction[]) : []),
  ...(barrier ? ([['BARRIER', 'void', [12]]] as SimtInstruction[]) : []),
  ...(guardBarrier ? ([['ENDIF', 'void', [15]]] as SimtInstruction[]) : []),
];

/** Thread 0's sum of the LOCAL buffer into out[gidx0]; b is the position of its first instruction. */
function sumTail(b: number): SimtInstruction[] {
  return [
    ['IF', 'void', [14]], // b
    ['CONST', 'index', [], { value: 0 }], // b+1
    ['INDEX', 'float32', [6, b + 1]], // b+2
    ['LOAD', 'float32', [b + 2]], // b+3
    ['INDEX', 'float32', [6, 13]], // b+4
    ['LOAD', 'float32', [b + 4]], // b+5
    ['CONST', 'index', [], { value: 2 }], // b+6
    ['INDEX', 'float32', [6, b + 6]], // b+7
    ['LOAD', 'float32', [b + 7]], // b+8
    ['CONST', 'index', [], { value: 3 }], // b+9
    ['INDEX', 'float32', [6, b + 9]], // b+10
    ['LOAD', 'float32', [b + 10]], // b+11
    ['ADD', 'float32', [b + 3, b + 5]], // b+12
    ['ADD', 'float32', [b + 8, b + 11]], // b+13
    ['ADD', 'float32', [b + 12, b + 13]], // b+14
    ['INDEX', 'float32', [4, 3]], // b+15
    ['STORE', 'void', [b + 15, b + 14]], // b+16
    ['ENDIF', 'void', [b]], // b+17
  ];
}

describe('SIMT emulator', () => {
  it('runs workgroups of threads with LOCAL memory, a BARRIER and an IF', () => {
    const head = groupSum(true);
    const out = run(
      [...head, ...sumTail(head.length)],
      [
        [0, 0],
        [1, 2, 3, 4, 10, 20, 30, 40],
      ],
    );
    expect(out[0]).toEqual([10, 100]);
  });

  it('reports a race: a thread reading LOCAL memory another thread wrote with no BARRIER between', () => {
    const head = groupSum(false);
    expect(() =>
      run(
        [...head, ...sumTail(head.length)],
        [
          [0, 0],
          [1, 2, 3, 4, 10, 20, 30, 40],
        ],
      ),
    ).toThrow('thread 0 reads LOCAL element 1, which thread 1 wrote with no BARRIER between (a race)');
  });

  it('refuses a BARRIER that only some threads of a group reach', () => {
    const head = groupSum(true, true);
    expect(() =>
      run(
        [...head, ...sumTail(head.length)],
        [
          [0, 0],
          [1, 2, 3, 4, 10, 20, 30, 40],
        ],
      ),
    ).toThrow(
      /SIMT: kernel k, instruction 16 \(BARRIER\): a BARRIER inside a branch that not every thread of the group takes/,
    );
  });

  it('names the thread and buffer of an access outside a buffer', () => {
    const program: SimtInstruction[] = [
      ['CONST', 'index', [], { value: 3 }],
      ['SPECIAL', 'index', [0], { name: 'lidx0' }],
      ['PARAM', 'float32', [], f32(0, 2)],
      ['INDEX', 'float32', [2, 1]],
      ['CONST', 'float32', [], { value: 1.5 }],
      ['STORE', 'void', [3, 4]],
    ];
    expect(() => run(program, [[0, 0]])).toThrow(
      'thread 2 of group 0,0,0 reaches element 2 of a GLOBAL buffer of 2 (data0)',
    );
  });

  it('masks the threads an IF leaves out, and a gated store', () => {
    // out[l] = l for odd l only
    const program: SimtInstruction[] = [
      ['CONST', 'index', [], { value: 6 }], // 0
      ['SPECIAL', 'index', [0], { name: 'lidx0' }], // 1
      ['PARAM', 'float32', [], f32(0, 6)], // 2
      ['CONST', 'index', [], { value: 2 }], // 3
      ['MOD', 'index', [1, 3]], // 4
      ['CONST', 'index', [], { value: 1 }], // 5
      ['CMPNE', 'bool', [4, 5]], // 6 even
      ['CONST', 'bool', [], { value: true }], // 7
      ['CMPNE', 'bool', [6, 7]], // 8 odd
      ['IF', 'void', [8]], // 9
      ['INDEX', 'float32', [2, 1]], // 10
      ['CAST', 'float32', [1]], // 11
      ['STORE', 'void', [10, 11]], // 12
      ['ENDIF', 'void', [9]], // 13
    ];
    expect(run(program, [[-1, -1, -1, -1, -1, -1]])[0]).toEqual([-1, 1, -1, 3, -1, 5]);
  });
});

describe('SIMT device', () => {
  it('runs tensor programs as the JS device does', () => {
    const x = (d: string) =>
      new Tensor([3, -1, 4, 1, -5, 9], { device: d, dtype: dtypes.float32 }).reshape([2, 3]);
    const f = (d: string) => x(d).matmul(x(d).T).relu().add(x(d).sum(1, true)).exp().log().tolist();
    expect(f('SIMT')).toEqual(f('JS'));
  });

  it('agrees with JS on signed zeros, NaN as a bool and integer division by zero', () => {
    const f = (d: string) => {
      const x = new Tensor([-1.5, 0, 2, -0, Number.NaN], { device: d });
      const i = new Tensor([7, -7, 0, 3], { device: d, dtype: dtypes.int32 });
      return [
        x.clamp(undefined, 0).tolist(),
        x.neg().maximum(-0).tolist(),
        x.cast(dtypes.bool).tolist(),
        i.div(i.mul(0), { roundingMode: 'floor' }).tolist(),
        i.mod(i.sub(i)).tolist(),
      ];
    };
    const simt = f('SIMT');
    expect(simt).toEqual(f('JS'));
    expect(Object.is((simt[0] as number[])[1], 0)).toBe(true);
    expect(simt[2]).toEqual([true, false, true, false, true]);
  });

  it('decomposes the ops a device says it lacks', () => {
    const simt = Device.get('SIMT');
    const sources: string[] = [];
    const compile = simt.compile.bind(simt);
    const lacks = vi.spyOn(simt, 'lacks').mockReturnValue(new Set([Ops.EXP2, Ops.SIN]));
    const spy = vi.spyOn(simt, 'compile').mockImplementation((name, source) => {
      sources.push(source);
      return compile(name, source);
    });
    try {
      // a shape no other test compiles, so the program is built here
      const x = (d: string) => new Tensor([0.5, -1.25, 3, 0, 2.5, -4, 1, 7, -0.5, 6, 9], { device: d });
      const got = x('SIMT').exp2().add(x('SIMT').sin()).tolist() as number[];
      const want = x('JS').exp2().add(x('JS').sin()).tolist() as number[];
      for (const [i, v] of got.entries())
        expect(Math.abs(v - want[i]!)).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(want[i]!)));
      expect(sources.length).toBeGreaterThan(0);
      for (const source of sources) expect(source).not.toMatch(/"(EXP2|SIN)"/);
    } finally {
      spy.mockRestore();
      lacks.mockRestore();
    }
  });
});
