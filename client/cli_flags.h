// Command-line pieces shared by the client tools.
#ifndef PRIMSERVE_CLIENT_CLI_FLAGS_H_
#define PRIMSERVE_CLIENT_CLI_FLAGS_H_

#include <vector>

namespace primserve {

// The --address flag's help: the tools dial it with PrimitivesClient::Connect.
inline constexpr char kAddressFlagHelp[] =
    "The server, host:port; or several, spread round robin over those that report healthy, "
    "with calls retried on UNAVAILABLE: ipv4:10.0.0.1:50051,10.0.0.2:50051 or a DNS name "
    "with an address per server, dns:///primserve-headless:50051.";

// absl::ParseCommandLine, except that a rejected command line (or --help)
// exits with 2 rather than absl's 1: the tools keep 1 for failed calls.
std::vector<char*> ParseCommandLineOrExitTwo(int argc, char** argv);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_CLI_FLAGS_H_
