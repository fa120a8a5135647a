// Command-line parsing shared by the client tools.
#ifndef PRIMSERVE_CLIENT_CLI_FLAGS_H_
#define PRIMSERVE_CLIENT_CLI_FLAGS_H_

#include <vector>

namespace primserve {

// absl::ParseCommandLine, except that a rejected command line (or --help)
// exits with 2 rather than absl's 1: the tools keep 1 for failed calls.
std::vector<char*> ParseCommandLineOrExitTwo(int argc, char** argv);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_CLI_FLAGS_H_
