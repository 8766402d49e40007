// tsgrad's public API in Node: browser.ts's, with the CPU device (the default where a C compiler works).
import './runtime/node.ts';

export * from './browser.ts';
export { type SafeLoadOptions, safeLoad, safeMetadata, safeSave } from './nn/state.ts';
