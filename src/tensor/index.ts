// The Tensor class with every op family attached (each family file adds its methods to Tensor.prototype).
export {
  type NestedArray,
  type PadMode,
  type PadOptions,
  Tensor,
  type TensorData,
  type TensorOptions,
} from './tensor.ts';

import './creation.ts';
import './dtype-methods.ts';
import './elementwise.ts';

export type { Index, Slice } from './movement.ts';

import './movement.ts';
import './views.ts';
import './scan.ts';
import './random.ts';
import './reduce.ts';
import './nn.ts';
import './activations.ts';
import './losses.ts';
import './scatter.ts';
import './sort.ts';
import './setitem.ts';
import './pool.ts';
import './gradient.ts';
import './scope.ts';
import './disk.ts';

import { nameErrors } from './op-names.ts';

// last, when every family has attached its ops: their errors name the op the user called
nameErrors();

// the device registry, for code that may use only the Tensor API (src/nn): device names are Tensor options
export { Device } from '../runtime/device.ts';
export type { IsCloseOptions } from './activations.ts';
export { type FnOptions, fn, fnMethod } from './function.ts';
// index-value checks, for ops built on the Tensor API (src/nn's Embedding) to check as tensor ops do
export { checkIndex, type IndexRange } from './index-check.ts';
export type {
  BceLogitsOptions,
  CrossEntropyLossOptions,
  LossOptions,
  NllLossOptions,
  NormalizeOptions,
  Reduction,
} from './losses.ts';
export type { AttentionOptions, ConvOptions, CrossEntropyOptions, Padding, Size } from './nn.ts';
export type {
  AvgPoolOptions,
  InterpolateMode,
  InterpolateOptions,
  MaxPoolOptions,
  MaxUnpoolOptions,
  PoolOptions,
} from './pool.ts';
export type { Axes } from './reduce.ts';
export type { ScatterReduce, ScatterReduceOptions } from './scatter.ts';
export type { DiagonalOptions, MeshgridOptions } from './views.ts';
