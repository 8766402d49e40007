// The NULL device: compiles nothing and runs nothing, so that the compiler's own cost can be measured.
import { Allocator } from './allocator.ts';
import { Backend, checkBuffers, type KernelLanguage, type Program } from './backend.ts';

class NullAllocator extends Allocator<null> {
  protected create(): null {
    return null;
  }

  bytes(_mem: null, nbytes: number): never {
    throw new Error(
      `${this.device}: cannot read ${nbytes} bytes: the NULL device holds no data (it runs no kernels); use CPU or JS to read values`,
    );
  }

  // uploads are dropped, so that programs that create tensors from data can still be measured
  override copyin(): void {}
}

export class NullBackend extends Backend {
  constructor(name: string) {
    super(name, 'NULL', new NullAllocator(name));
  }

  // kernels are rendered as for the CPU, so scheduling and codegen cost what they cost there
  language(): KernelLanguage {
    return 'C';
  }

  compile(name: string): Program {
    const backend = this;
    return {
      name,
      device: this.name,
      run(bufs) {
        checkBuffers(backend, name, bufs);
        return 0;
      },
    };
  }
}
