// The devices the Tensor suite runs on: the JS and CPU backends, and the SIMT emulator, which runs every op as
// a GPU-style kernel (workgroups, LOCAL memory, shared reductions) without a GPU.
// TEST_DEVICES=CUDA (a comma-separated list) runs it on others instead: `npm run test:gpu` on a GPU machine.
export const DEVICES = process.env.TEST_DEVICES?.split(',') ?? ['JS', 'CPU', 'SIMT'];
