// A JIT's recorded launches as one CUDA graph: a replay is one cuGraphLaunch instead of a driver call per kernel
// (each costs microseconds from JS). Kernels that read a buffer the replay swaps (a new input) get their
// arguments rewritten in the instantiated graph first.
import type { DeviceBuffer } from './buffer.ts';
import type { CUDAProgram } from './cuda.ts';
import { ArgBlock, checkDriver, type Gpu, OutHandle, use } from './cuda-api.ts';

/** sizeof(CUDA_KERNEL_NODE_PARAMS_v2): func, grid and block sizes, shared bytes, kernelParams, extra, kern, ctx. */
const PARAMS_BYTES = 72;

interface Node {
  handle: number;
  program: CUDAProgram;
  recorded: readonly DeviceBuffer[];
  /** The buffers its arguments name now. */
  current: DeviceBuffer[];
  args: ArgBlock;
  params: Uint8Array;
}

const destroyed = new FinalizationRegistry<{ gpu: Gpu; graph: number; exec: number }>(
  ({ gpu, graph, exec }) => {
    const d = use(gpu);
    d.cuGraphExecDestroy(exec);
    d.cuGraphDestroy(graph);
  },
);

export class CUDAGraph {
  private readonly nodes: Node[] = [];
  private readonly exec: number;

  constructor(
    private readonly gpu: Gpu,
    launches: readonly { program: CUDAProgram; bufs: readonly DeviceBuffer[] }[],
  ) {
    const d = use(gpu);
    const handle = new OutHandle();
    checkDriver(d, d.cuGraphCreate(handle.ptr, 0), 'cuGraphCreate');
    const graph = handle.read();
    // a chain: each kernel after the one before, as on one stream
    const previous = new BigUint64Array(1);
    for (const { program, bufs } of launches) {
      const node: Node = {
        handle: 0,
        program,
        recorded: bufs,
        current: [...bufs],
        args: new ArgBlock(bufs.length),
        params: new Uint8Array(PARAMS_BYTES),
      };
      node.args.set(bufs);
      const view = new DataView(node.params.buffer);
      view.setBigUint64(0, BigInt(program.fn), true);
      for (const [i, n] of program.launch.dims.entries()) view.setUint32(8 + 4 * i, n, true);
      view.setUint32(32, program.launch.shared, true); // sharedMemBytes
      view.setBigUint64(40, BigInt(node.args.address), true);
      const added = new OutHandle();
      const deps = this.nodes.length ? 1 : 0;
      checkDriver(
        d,
        d.cuGraphAddKernelNode_v2(added.ptr, graph, deps ? previous : null, deps, node.params),
        `cuGraphAddKernelNode (kernel ${program.name})`,
      );
      node.handle = added.read();
      previous[0] = BigInt(node.handle);
      this.nodes.push(node);
    }
    const exec = new OutHandle();
    checkDriver(d, d.cuGraphInstantiateWithFlags(exec.ptr, graph, 0), 'cuGraphInstantiate');
    this.exec = exec.read();
    // the graph stays: its nodes name the kernels whose arguments a replay updates
    destroyed.register(this, { gpu, graph, exec: this.exec });
  }

  /** Runs the launches with `swap`'s buffers in place of the recorded ones they map. */
  replay(swap: ReadonlyMap<DeviceBuffer, DeviceBuffer>): void {
    const d = use(this.gpu);
    for (const node of this.nodes) {
      let changed = false;
      for (let i = 0; i < node.recorded.length; i++) {
        const b = swap.get(node.recorded[i]!) ?? node.recorded[i]!;
        if (b !== node.current[i]) {
          node.current[i] = b;
          changed = true;
        }
      }
      if (changed) {
        node.args.set(node.current);
        checkDriver(
          d,
          d.cuGraphExecKernelNodeSetParams_v2(this.exec, node.handle, node.params),
          `cuGraphExecKernelNodeSetParams (kernel ${node.program.name})`,
        );
      }
      for (const w of node.program.launch.writes) node.current[w]?.written();
    }
    checkDriver(d, d.cuGraphLaunch(this.exec, 0), 'cuGraphLaunch');
  }
}
