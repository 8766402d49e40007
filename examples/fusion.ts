// tsgrad's main demo for now: a small lazy program, the kernels it fuses into, and its result.
import { Context, Device, Tensor } from '../src/index.ts';

const a = new Tensor([
  [0, 1, 2, 3],
  [4, 5, 6, 7],
  [8, 9, 10, 11],
]).cast(Tensor.float32);
const b = new Tensor([[0.5, -1, 2, 0.25]]);
const c = new Tensor([1, -1, 1, -1]).reshape([1, 4]);

// nothing has run yet: these lines only build a graph
const fused = a.mul(b).add(c).relu().sum(1); // one kernel: multiply, add, relu and the reduce together
const probs = a
  .sub(a.max(1, true))
  .exp()
  .div(a.sub(a.max(1, true)).exp().sum(1, true)); // softmax

console.log(`device: ${Device.default}\n`);
console.log('(a*b+c).relu().sum(1), its kernels at DEBUG=2:');
Context.with({ DEBUG: 2 }, () => fused.realize());
console.log(fused.tolist(), '\n');
console.log('softmax(a, 1), its kernels at DEBUG=2:');
Context.with({ DEBUG: 2 }, () => probs.realize());
console.log(probs.tolist());
