// Indexed assignment on Tensor: set.
