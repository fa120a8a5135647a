// Gather on the GPU: d_out[i] = d_values[d_indices[i]] (numpy.take), for
// elements of any dtype (4 or 8 bytes). Host-facing, like kernels/scan.h:
// plain C++, returns a cudaError_t value as int, never synchronizes, needs no
// temporary storage.
#ifndef PRIMSERVE_KERNELS_GATHER_H_
#define PRIMSERVE_KERNELS_GATHER_H_

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace primserve::gpu {

// For i in [0, n): d_out[i] = d_values[d_indices[i]], elements of
// `element_size` bytes (4 or 8). An index outside [0, num_values) is never
// read through: *d_bad_position (a device int64) receives the smallest such
// i, or -1 when every index is valid; d_out is then unspecified where its
// own index was bad. d_out null: only the check (a caller that must write
// nothing on a bad index checks first). d_bad_position is required.
int Gather(const void* d_values, int element_size, uint64_t num_values,
           const int64_t* d_indices, uint64_t n, void* d_out, int64_t* d_bad_position,
           CUstream_st* stream);

// As Gather of the first min(*d_count, max_n) indices, where d_count is a
// device uint64 read only by the kernel (a pipeline's count from a step
// before, with no host synchronization): max_n sizes the grid, the buffers
// hold max_n elements, and d_out past the count is not written. d_count is
// required.
int GatherCounted(const void* d_values, int element_size, uint64_t num_values,
                  const int64_t* d_indices, uint64_t max_n, const uint64_t* d_count, void* d_out,
                  int64_t* d_bad_position, CUstream_st* stream);

}  // namespace primserve::gpu

#endif  // PRIMSERVE_KERNELS_GATHER_H_
