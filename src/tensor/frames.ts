// The open Tensor.scope frames: what each records of the tensors made and assigned while it is open (a leaf
// module, so that the Tensor class can report to it without importing scope.ts).

export interface Frame<T> {
  made: Set<T>;
  /** Tensors assign() wrote to inside the scope: writes into tensors made before it must happen. */
  assigned: Set<T>;
}

export const frames: Frame<object>[] = [];

/** Called by every new Tensor: the innermost open scope owns it. */
export function noteMade(t: object): void {
  frames.at(-1)?.made.add(t);
}

/** Called by assign(). */
export function noteAssigned(t: object): void {
  frames.at(-1)?.assigned.add(t);
}
