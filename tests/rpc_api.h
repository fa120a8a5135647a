// The gRPC API the tests' servers serve unary Primitives calls with
// (ServerOptions::rpc_api): what PRIMSERVE_TEST_RPC_API names, which the
// *_cq_test targets of tests/rpc_api.bzl set to completion_queue; callback
// without it.
#ifndef PRIMSERVE_TESTS_RPC_API_H_
#define PRIMSERVE_TESTS_RPC_API_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "server/server.h"

namespace primserve {

inline ServerOptions::RpcApi TestRpcApi() {
  const char* name = std::getenv("PRIMSERVE_TEST_RPC_API");
  if (name == nullptr) return ServerOptions::RpcApi::kCallback;
  absl::StatusOr<ServerOptions::RpcApi> api = ParseRpcApi(name);
  if (!api.ok()) {
    std::fprintf(stderr, "PRIMSERVE_TEST_RPC_API: %s\n", std::string(api.status().message()).c_str());
    std::abort();
  }
  return *api;
}

}  // namespace primserve

#endif  // PRIMSERVE_TESTS_RPC_API_H_
