// What a handler needs to know of its gRPC call: the status it answers
// with, the caller's deadline and identity, and where its shared-memory
// and buffer refs resolve.
#ifndef PRIMSERVE_SERVER_RPC_CALL_CONTEXT_H_
#define PRIMSERVE_SERVER_RPC_CALL_CONTEXT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "server/buffers/registry.h"
#include "server/shm/registry.h"
#include "server/shm/request_memory.h"

namespace primserve {

grpc::Status ToGrpc(const absl::Status& status);

// The caller's deadline, as the scheduler takes it.
absl::Time DeadlineOf(const grpc::ServerContextBase& context);

// Who is calling, as admission keeps callers apart (Task::peer): the value of
// the request header `caller_header` when it is named and present (a proxy in
// front sets it to the client's address), else the connection's address
// without its port (PeerKey).
std::string CallerOf(const grpc::ServerContextBase& context,
                     const std::string& caller_header);

// What a unary or Multiplex request's shared-memory refs resolve in: the
// registry, or (null: the server runs without --shared_memory) a refusal;
// and its buffer refs: `owner`'s buffers in `buffers` (null: refused).
std::unique_ptr<shm::RequestMemory> RequestMemoryOf(const shm::Registry* registry,
                                                    buffers::Registry* buffers,
                                                    const std::string& owner);

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_CALL_CONTEXT_H_
