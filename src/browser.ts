// tsgrad's public API without Node: the JS and NULL devices, JS the default (src/index.ts adds CPU).
export {
  AddrSpace,
  type ConstValue,
  DType,
  type DTypeLike,
  dtypes,
  PtrDType,
  prodDType,
  promote,
  promoteAll,
  sumAccDType,
  sumDType,
  truncate,
} from './dtype.ts';
export { type Jitted, jit } from './engine/jit.ts';
export { CHECK_INDEX, Context, ContextVar, DEBUG, SPEC } from './helpers.ts';
export * from './nn/index.ts';
export { Device, type MemoryStats, memoryStats } from './runtime/device.ts';
export {
  type FnOptions,
  fn,
  fnMethod,
  type NestedArray,
  Tensor,
  type TensorData,
  type TensorOptions,
} from './tensor/index.ts';
export {
  type Arg,
  type ArgOf,
  AxisType,
  axisLetter,
  type Device as DeviceName,
  GroupOp,
  Ops,
} from './uop/ops.ts';
export {
  type Captures,
  graphRewrite,
  PatternMatcher,
  setRewriteTracer,
  substitute,
  UPat,
} from './uop/pattern.ts';
export { fromCode, printGraph, printLinear, toCode } from './uop/print.ts';
export { type Stage, specs, verify, verifyStage } from './uop/spec.ts';
export { simplify, symbolic } from './uop/symbolic.ts';
export { type OpNode, type Shape, type sint, UOp } from './uop/uop.ts';
