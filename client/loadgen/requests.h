// primload's requests: generated from the seed before the run, each with
// the CPU reference's answer and the check of the responses, and added to
// the workload.
#ifndef PRIMSERVE_CLIENT_LOADGEN_REQUESTS_H_
#define PRIMSERVE_CLIENT_LOADGEN_REQUESTS_H_

#include <cstdint>

#include "client/loadgen/options.h"
#include "client/loadgen/workload.h"

namespace primserve {

// Adds request `index` of the run, from its own seeded generator.
void AddRequest(const Options& options, uint32_t index, Workload* workload);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_REQUESTS_H_
