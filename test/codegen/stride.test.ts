// stride(idx, r): how far an index moves per step of a range, which decides whether a reduction gets vector lanes.
import { describe, expect, it } from 'vitest';
import { stride } from '../../src/codegen/vectors.ts';
import { UOp } from '../../src/uop/uop.ts';

const r = UOp.range(64, 0);
const q = UOp.range(8, 1);
const p = UOp.range(32, 2);

describe('stride', () => {
  it('is the coefficient of r in an affine index', () => {
    expect(stride(r, r)).toBe(1);
    expect(stride(r.add(q.mul(64)), r)).toBe(1);
    expect(stride(r.mul(4).add(q.mul(256)).add(3), r)).toBe(4);
    expect(stride(r.mul(4).add(q.mul(256)), q)).toBe(256);
    expect(stride(q.mul(256).add(r.mul(4)).add(r.mul(3)), r)).toBe(7);
    expect(stride(r.mul(3).sub(q), r)).toBe(3);
    expect(stride(q.sub(r.mul(2)), r)).toBe(-2);
    expect(stride(r.mul(16).add(q).mul(2), r)).toBe(32);
  });

  it('allows // and % of other ranges', () => {
    expect(stride(p.idiv(4).mul(512).add(p.mod(4)).add(r), r)).toBe(1);
    expect(stride(q.mod(3).add(r.mul(8)), r)).toBe(8);
  });

  it('is undefined where r is divided, taken modulo or multiplied by a non-constant', () => {
    expect(stride(r.idiv(4), r)).toBeUndefined();
    expect(stride(r.mod(4), r)).toBeUndefined();
    expect(stride(r.add(q.mul(64)).idiv(16).add(p), r)).toBeUndefined();
    expect(stride(r.mul(4).add(q).mod(64), r)).toBeUndefined();
    expect(stride(r.mul(r), r)).toBeUndefined();
    expect(stride(r.mul(q), r)).toBeUndefined();
  });

  // the doc promises the step for any index affine in r, and one that does not read r is (step 0); the one
  // caller (outputLanes) only asks about loads that read r, so nothing depends on this yet
  it('is 0 for an index that does not read r', () => {
    expect(stride(q.mul(7).add(p), r)).toBe(0);
  });
});
