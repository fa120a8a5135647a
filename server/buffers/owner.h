// Whose buffers a call sees: resident buffers belong to the caller that
// made them, told apart as the README's "Exposure and lockdown" says.
#ifndef PRIMSERVE_SERVER_BUFFERS_OWNER_H_
#define PRIMSERVE_SERVER_BUFFERS_OWNER_H_

#include <string>

#include "grpcpp/server_context.h"

namespace primserve::buffers {

// With `caller_header` named: that request header's value, or the peer's
// IP address (no port) for a call without it. Else the TLS client
// certificate's identity when the peer presented one. Else "": plaintext
// callers without the header share one namespace.
std::string OwnerOf(const grpc::ServerContextBase& context, const std::string& caller_header);

}  // namespace primserve::buffers

#endif  // PRIMSERVE_SERVER_BUFFERS_OWNER_H_
