// Whether ops build a gradient graph: Tensor.noGrad turns it off while open (a leaf module, read by every op).

/** How many Tensor.noGrad regions are open; while any is, op results are detached. */
export const gradMode = { offDepth: 0 };
