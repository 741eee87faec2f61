// A launch that two overloaded kernels take equally well: as the call `add(values, 1.0)` would
// be, it is ambiguous, and the build stops with a message that says so.

__global__ void add(int* values, int amount) {
  values[threadIdx.x] += amount;
}
__global__ void add(int* values, float amount) {
  values[threadIdx.x] += static_cast<int>(amount);
}

void launch(int* values) {
  add<<<1, 32>>>(values, 1.0);  // double: int and float are equally good conversions
}
