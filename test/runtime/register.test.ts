// Adding a backend: a Backend registered under a new kind, and the renderer of the language it compiles.
import { describe, expect, it } from 'vitest';
import { registerRenderer } from '../../src/engine/compile.ts';
import { renderJS } from '../../src/renderer/js.ts';
import { registerDevice } from '../../src/runtime/device.ts';
import { JSBackend } from '../../src/runtime/js.ts';
import { Tensor } from '../../src/tensor/index.ts';

/** A JS device whose kernels are written in a language of its own (here: JS again, under another name). */
class ToyBackend extends JSBackend {
  override language(): string {
    return 'TOYJS';
  }
}

describe('a new backend', () => {
  it('runs once its device and its language are registered, and names the missing renderer before', () => {
    registerDevice('TOY', (name) => new ToyBackend(name));
    const y = () => new Tensor([1, 2, 3], { device: 'TOY' }).mul(2).add(1).tolist();
    expect(y).toThrow(
      /device TOY compiles TOYJS, for which no renderer is registered .*registered: C, CUDA, JS, SIMT/,
    );
    registerRenderer('TOYJS', renderJS);
    expect(y()).toEqual([3, 5, 7]);
  });
});
