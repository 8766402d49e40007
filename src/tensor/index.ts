// The Tensor class with every op family attached (each family file adds its methods to Tensor.prototype).
export { type NestedArray, Tensor, type TensorData, type TensorOptions } from './tensor.ts';
