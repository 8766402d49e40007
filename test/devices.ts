// The devices the Tensor suite runs on: the JS and CPU backends, and the SIMT emulator, which runs every op as
// a GPU-style kernel (workgroups, LOCAL memory, shared reductions) without a GPU.
export const DEVICES = ['JS', 'CPU', 'SIMT'];
