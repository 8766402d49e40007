// First and later schedule of an 8x512 MLP training step on NULL (nothing compiles or runs).
const root = process.argv[2]!;
const { Context, SGD, Tensor, Linear } = await import(`${root}/src/index.ts`);
Context.with({ DEV: 'NULL' }, () => {
  Tensor.manualSeed(0);
  const layers = Array.from({ length: 8 }, () => new Linear(512, 512));
  const opt = new SGD(layers.flatMap((l: any) => [l.weight, l.bias]), { lr: 0.01 });
  const x = Tensor.rand([64, 512]).realize();
  const step = () => {
    opt.zeroGrad();
    let h = x;
    for (const l of layers) h = l.forward(h).relu();
    const loss = h.mean();
    loss.backward();
    opt.step(loss);
  };
  let t0 = performance.now();
  step();
  const first = performance.now() - t0;
  const later: number[] = [];
  for (let i = 0; i < 15; i++) {
    t0 = performance.now();
    step();
    later.push(performance.now() - t0);
  }
  later.sort((a, b) => a - b);
  console.log(`first ${first.toFixed(1)} ms, later median ${later[7]!.toFixed(2)} ms`);
});
