#include "server/buffers/owner.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/engine/admission.h"

namespace primserve::buffers {

std::string OwnerOf(const grpc::ServerContextBase& context,
                    const std::string& caller_header) {
  if (!caller_header.empty()) {
    const auto& metadata = context.client_metadata();
    if (auto it = metadata.find(caller_header); it != metadata.end()) {
      return absl::StrCat("header:", absl::string_view(it->second.data(), it->second.size()));
    }
    return absl::StrCat("peer:", PeerKey(context.peer()));
  }
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    std::string identity = "tls:";
    for (const grpc::string_ref& part : auth->GetPeerIdentity()) {
      absl::StrAppend(&identity, absl::string_view(part.data(), part.size()), ";");
    }
    return identity;
  }
  return "";
}

}  // namespace primserve::buffers
