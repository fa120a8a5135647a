// The load of one level: closed loop (a number of calls kept outstanding)
// or open loop (calls sent on a schedule whatever the responses).
#ifndef PRIMSERVE_CLIENT_LOADGEN_LOOPS_H_
#define PRIMSERVE_CLIENT_LOADGEN_LOOPS_H_

#include "client/loadgen/options.h"
#include "client/loadgen/stats.h"
#include "client/loadgen/target.h"

namespace primserve {

// Calls `target` at `level` (a rate with options.open_loop, else a
// concurrency) through the warmup and the measurement window, and returns
// what the calls that ended in the window came to.
LevelStats RunLevel(const Target& target, double level, const Options& options);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_LOOPS_H_
