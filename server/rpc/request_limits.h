// The bounds every request is checked against, and the server-wide request
// options (set from flags in main.cc).
#ifndef PRIMSERVE_SERVER_RPC_REQUEST_LIMITS_H_
#define PRIMSERVE_SERVER_RPC_REQUEST_LIMITS_H_

#include <cstdint>

namespace primserve {

struct RequestLimits {
  // Most elements in any array of a request (segment_offsets included), and
  // most AggregateByKey groups.
  uint64_t max_elements = uint64_t{1} << 31;
  // Largest answer a request may ask for, in bytes of array data (checked at
  // validation, from the request's sizes, before anything is allocated).
  uint64_t max_response_bytes = uint64_t{1} << 30;
  // Requests one Multiplex stream may have read and not yet answered; the
  // stream reads no further until answers are written.
  uint64_t multiplex_window = 1024;
  // Bytes of those requests (as received): a Multiplex stream whose client
  // does not read its answers stops reading at whichever comes first (one
  // request is read whatever its size). Counting requests alone let one
  // stream read 1024 large requests, refused one by one past admission's
  // bounds, for a client that reads nothing.
  uint64_t multiplex_window_bytes = uint64_t{64} << 20;
  // Every request reproducible (--reproducible_floats): float SUM/PROD give
  // the same bits alone, batched or streamed. Off (the default: it costs
  // more than 10% on some RPCs, docs/API.md "Reproducible floats"), only requests
  // that set `reproducible` are.
  bool reproducible_floats = false;
  // Whether the backend answers Scan's and Reduce's accumulator_dtype
  // (ExecutionBackend::WidensAccumulators: the CPU and CUDA backends do;
  // elsewhere such requests are refused before they reach the backend).
  bool wide_accumulators = false;
  // Most steps in one Pipeline (--max_pipeline_steps).
  uint64_t max_pipeline_steps = 16;
  // Most bytes a Pipeline's intermediates (the outputs its later steps read)
  // may take at worst: each caller's resident-buffer quota
  // (--max_buffer_bytes_per_caller), as they are memory the caller holds
  // on the server while the pipeline runs.
  uint64_t max_pipeline_intermediate_bytes = uint64_t{16} << 30;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_REQUEST_LIMITS_H_
