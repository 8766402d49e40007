// tsgrad's public API in Node: browser.ts's, with the CPU device (the default where a C compiler works).
import './node.ts';

export * from './browser.ts';
export { type Idx, type Mnist, type MnistOptions, mnist, readIdx } from './nn/datasets.ts';
export { type SafeLoadOptions, safeLoad, safeMetadata, safeSave } from './nn/state.ts';
