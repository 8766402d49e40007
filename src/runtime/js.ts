// The JS device: kernels are JavaScript function bodies over TypedArrays, compiled with new Function.
import { HostAllocator } from './allocator.ts';
import {
  Backend,
  checkBuffers,
  type KernelLanguage,
  numberedSource,
  type Program,
  secondsSince,
} from './backend.ts';
import type { DeviceBuffer } from './buffer.ts';

type Kernel = (...args: unknown[]) => void;

export class JSBackend extends Backend {
  constructor(name: string) {
    super(name, 'JS', new HostAllocator(name));
  }

  language(): KernelLanguage {
    return 'JS';
  }

  compile(name: string, source: string): Program {
    return new JSProgram(this, name, source);
  }

  // generated JavaScript has no vector types
  override vectorTypes(): boolean {
    return false;
  }
}

/** The number of parameters `prefix`0, `prefix`1, ... that a body names (a guess: comments may name more). */
function countNamed(source: string, prefix: string): number {
  let n = 0;
  for (const m of source.matchAll(new RegExp(`\\b${prefix}(\\d+)\\b`, 'g')))
    n = Math.max(n, Number(m[1]) + 1);
  return n;
}

class JSProgram implements Program {
  private fn: Kernel;
  private nbufs: number;
  private nvars: number;

  constructor(
    private readonly backend: JSBackend,
    readonly name: string,
    private readonly source: string,
  ) {
    // built now with the parameters the body names, so that a syntax error shows at compile time
    this.nbufs = countNamed(source, 'data');
    this.nvars = countNamed(source, 'var');
    this.fn = this.build();
  }

  get device(): string {
    return this.backend.name;
  }

  run(bufs: readonly DeviceBuffer[], vals: readonly number[] = [], timed = false): number {
    checkBuffers(this.backend, this.name, bufs);
    if (bufs.length !== this.nbufs || vals.length !== this.nvars) {
      // a buffer the body never names still takes its place before var0
      this.nbufs = bufs.length;
      this.nvars = vals.length;
      this.fn = this.build();
    }
    const args = new Array<unknown>(bufs.length + vals.length);
    for (let i = 0; i < bufs.length; i++) args[i] = bufs[i]!.view();
    for (let i = 0; i < vals.length; i++) args[bufs.length + i] = vals[i];
    const start = timed ? performance.now() : 0;
    try {
      this.fn(...args);
    } catch (e) {
      throw new Error(`JS: kernel ${this.name} threw: ${(e as Error).message}`, { cause: e });
    }
    return timed ? secondsSince(start) : 0;
  }

  private build(): Kernel {
    const params = [
      ...Array.from({ length: this.nbufs }, (_, i) => `data${i}`),
      ...Array.from({ length: this.nvars }, (_, i) => `var${i}`),
    ];
    try {
      // strict mode on the first line keeps line numbers: an undeclared variable throws instead of leaking
      return new Function(...params, `'use strict';${this.source}`) as Kernel;
    } catch (e) {
      throw new Error(
        `JS: kernel ${this.name} does not compile: ${(e as Error).message}\n--- source ---\n${numberedSource(this.source)}`,
      );
    }
  }
}
