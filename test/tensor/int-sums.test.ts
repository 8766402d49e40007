// Integer sums never wrap silently: sum and cumsum of bools and integers give int32 (uint32) only where no input
// of their length can overflow it, else int64 (uint64); prod of integers is int64; an explicit dtype is obeyed.
// Checked against BigInt sums on JS and CPU, including a mask count past 2^31 from an expanded constant.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type DType, dtypes, prodDType, sumDType } from '../../src/dtype.ts';
import { Tensor } from '../../src/tensor/index.ts';

describe('sumDType: int32 only while count times the largest magnitude fits', () => {
  it('picks the result dtype of each integer dtype by the count', () => {
    const cases: [DType, number, DType][] = [
      [dtypes.bool, 2 ** 31 - 1, dtypes.int32],
      [dtypes.bool, 2 ** 31, dtypes.int64],
      [dtypes.int8, 2 ** 24, dtypes.int32], // 2^24 * -128 is int32's minimum
      [dtypes.int8, 2 ** 24 + 1, dtypes.int64],
      [dtypes.int16, 2 ** 16, dtypes.int32],
      [dtypes.int16, 2 ** 16 + 1, dtypes.int64],
      [dtypes.int32, 0, dtypes.int32],
      [dtypes.int32, 1, dtypes.int32],
      [dtypes.int32, 2, dtypes.int64],
      [dtypes.int64, 1, dtypes.int64],
      [dtypes.uint8, 16843009, dtypes.uint32], // (2^32 - 1) / 255
      [dtypes.uint8, 16843010, dtypes.uint64],
      [dtypes.uint16, 65537, dtypes.uint32],
      [dtypes.uint16, 65538, dtypes.uint64],
      [dtypes.uint32, 1, dtypes.uint32],
      [dtypes.uint32, 2, dtypes.uint64],
      [dtypes.float16, 1e9, dtypes.float16],
      [dtypes.float32, 1e12, dtypes.float32],
    ];
    for (const [d, n, want] of cases)
      expect([d.name, n, sumDType(d, n).name]).toEqual([d.name, n, want.name]);
  });

  it('prodDType: integers and bools give int64 (uint64 if unsigned), floats keep theirs', () => {
    expect(
      [dtypes.bool, dtypes.int8, dtypes.int32, dtypes.uint8, dtypes.uint64, dtypes.float16].map(
        (d) => prodDType(d).name,
      ),
    ).toEqual(['int64', 'int64', 'int64', 'uint64', 'uint64', 'float16']);
  });
});

for (const device of ['JS', 'CPU'])
  describe(`integer sums on ${device}`, () => {
    const opts = { device };

    it('an int32 sum of two or more elements is int64 and exact past 2^31', () => {
      const x = new Tensor([2 ** 31 - 1, 1, 2 ** 31 - 1], opts);
      const s = x.sum();
      expect([s.dtype, Number(s.item())]).toEqual([dtypes.int64, 2 ** 32 - 1]);
      const m = new Tensor(
        [
          [-(2 ** 31), -(2 ** 31)],
          [5, 6],
        ],
        opts,
      ).sum(1);
      expect([m.dtype, m.tolist()]).toEqual([dtypes.int64, [-(2 ** 32), 11]]);
      // one element per sum cannot overflow: int32 stays
      const one = new Tensor([[7], [-(2 ** 31)]], opts).sum(1);
      expect([one.dtype, one.tolist()]).toEqual([dtypes.int32, [7, -(2 ** 31)]]);
    });

    it('uint32 sums go to uint64; small ints of ordinary sizes stay int32/uint32', () => {
      const u = new Tensor([2 ** 32 - 1, 1], { ...opts, dtype: 'uint32' }).sum();
      expect([u.dtype, Number(u.item())]).toEqual([dtypes.uint64, 2 ** 32]);
      const b = new Tensor([true, false, true], opts).sum();
      expect([b.dtype, b.item()]).toEqual([dtypes.int32, 2]);
      const i16 = new Tensor([-32768, -32768, -32768], { ...opts, dtype: 'int16' }).sum();
      expect([i16.dtype, i16.item()]).toEqual([dtypes.int32, -98304]);
    });

    it('counts a mask of 2^32 elements (an expanded constant, nothing allocated) in int64', () => {
      const c = Tensor.ones([1 << 16, 1 << 16], { ...opts, dtype: 'bool' }).sum();
      expect([c.dtype, Number(c.item())]).toEqual([dtypes.int64, 4294967296]);
      // 2^30 per row fits int32: counting stays int32
      const rows = Tensor.ones([2, 1 << 15, 1 << 15], { ...opts, dtype: 'bool' }).sum([1, 2]);
      expect([rows.dtype, rows.tolist()]).toEqual([dtypes.int32, [2 ** 30, 2 ** 30]]);
    });

    it('cumsum follows the sum of its axis: int32 prefixes past 2^31 are int64', () => {
      const c = new Tensor([2 ** 31 - 1, 1, 1], opts).cumsum();
      expect([c.dtype, (c.tolist() as number[]).map(Number)]).toEqual([
        dtypes.int64,
        [2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1],
      ]);
      const b = new Tensor([true, true, false, true], opts).cumsum();
      expect([b.dtype, b.tolist()]).toEqual([dtypes.int32, [1, 2, 2, 3]]);
      // a long axis goes in blocks; every block keeps the result's dtype
      const long = Tensor.full([1200], 2 ** 30, opts)
        .contiguous()
        .cumsum();
      expect([long.dtype, Number((long.tolist() as number[]).at(-1))]).toEqual([
        dtypes.int64,
        1200 * 2 ** 30,
      ]);
    });

    it('an explicit dtype is what the elements are cast to and the result is, wrapping as asked', () => {
      const x = new Tensor([2 ** 31 - 1, 1], opts);
      const s = x.sum(undefined, false, 'int32');
      expect([s.dtype, s.item()]).toEqual([dtypes.int32, -(2 ** 31)]);
      const f = x.sum(0, false, dtypes.float64);
      expect([f.dtype, f.item()]).toEqual([dtypes.float64, 2 ** 31]);
      const c = x.cumsum(0, 'int32');
      expect([c.dtype, c.tolist()]).toEqual([dtypes.int32, [2 ** 31 - 1, -(2 ** 31)]]);
      const p = new Tensor([65536, 65536], opts).prod(0, false, 'int32');
      expect([p.dtype, p.item()]).toEqual([dtypes.int32, 0]);
      expect(() => x.sum(0, false, 'int33' as 'int32')).toThrow(/sum.*int33/);
    });

    it('prod of integers is int64, of bools int64; mean of integers is float32', () => {
      const p = new Tensor([65536, 65536, -3], opts).prod();
      expect([p.dtype, Number(p.item())]).toEqual([dtypes.int64, -3 * 2 ** 32]);
      const b = new Tensor([true, false], opts).prod();
      expect([b.dtype, Number(b.item())]).toEqual([dtypes.int64, 0]);
      const m = new Tensor([2 ** 31 - 1, 2 ** 31 - 1], opts).mean();
      expect([m.dtype, m.item()]).toEqual([dtypes.float32, Math.fround(2 ** 31 - 1)]);
    });

    it('random integer tensors sum as BigInt sums do, along every axis', () => {
      const kinds = ['int8', 'int16', 'int32', 'uint8', 'uint16', 'uint32', 'bool'] as const;
      const value = (d: DType) =>
        d.isBool ? fc.boolean() : fc.integer({ min: d.min, max: d.max }).map((v) => v as number | boolean);
      const tensor = fc.constantFrom(...kinds).chain((name) => {
        const d = dtypes[name];
        return fc
          .tuple(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 6 }))
          .chain(([r, c]) =>
            fc.tuple(
              fc.constant(d),
              fc.constant([r, c]),
              fc.array(value(d), { minLength: r * c, maxLength: r * c }),
            ),
          );
      });
      fc.assert(
        fc.property(tensor, fc.constantFrom(undefined, 0, 1), ([d, [r, c], flat], axis) => {
          const big = flat.map((v) => BigInt(Number(v)));
          const at = (i: number, j: number) => big[i * c + j]!;
          const want =
            axis === undefined
              ? [big.reduce((a, b) => a + b, 0n)]
              : axis === 0
                ? Array.from({ length: c }, (_, j) =>
                    Array.from({ length: r }, (_, i) => at(i, j)).reduce((a, b) => a + b, 0n),
                  )
                : Array.from({ length: r }, (_, i) =>
                    Array.from({ length: c }, (_, j) => at(i, j)).reduce((a, b) => a + b, 0n),
                  );
          const x = new Tensor(flat, { ...opts, dtype: d }).reshape([r, c]);
          const s = x.sum(axis);
          expect(s.dtype).toBe(sumDType(d, axis === undefined ? r * c : axis === 0 ? r : c));
          const got = (axis === undefined ? [s.item()] : (s.tolist() as unknown[])).map((v) =>
            BigInt(v as number),
          );
          expect(got).toEqual(want);
        }),
        { numRuns: 40 },
      );
    });
  });
