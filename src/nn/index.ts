// tsgrad.nn: layers, optimizers and state dicts (browser-safe; safetensors, in state.ts, needs Node).

export {
  BatchNorm,
  BatchNorm1d,
  BatchNorm2d,
  type BatchNormOptions,
  Conv2d,
  type Conv2dOptions,
  ConvTranspose2d,
  type ConvTransposeOptions,
  convTranspose2d,
  Dropout,
  Embedding,
  GroupNorm,
  type GroupNormOptions,
  LayerNorm,
  type LayerNormOptions,
  Linear,
  type LinearOptions,
  Module,
  RMSNorm,
  type RMSNormOptions,
} from './layers.ts';
export {
  Adam,
  type AdamOptions,
  AdamW,
  type AdamWOptions,
  LAMB,
  Optimizer,
  SGD,
  type SGDOptions,
} from './optim.ts';
export {
  assign,
  getBuffers,
  getParameters,
  getStateDict,
  type LoadOptions,
  type LoadReport,
  loadStateDict,
  type StateDict,
} from './state-dict.ts';
