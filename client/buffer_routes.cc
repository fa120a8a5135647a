#include "client/buffer_routes.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/client_context.h"

namespace primserve {
namespace {

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace

v1::BufferRef BufferRef(const std::string& name, uint64_t offset, uint64_t length) {
  v1::BufferRef ref;
  ref.set_name(name);
  ref.set_offset(offset);
  ref.set_length(length);
  return ref;
}

bool TargetSpreads(absl::string_view target) {
  return absl::StrContains(target, ',') || absl::StartsWith(target, "dns:");
}

std::vector<std::string> TargetAddresses(absl::string_view target) {
  std::vector<std::string> addresses;
  for (absl::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (absl::ConsumePrefix(&target, scheme)) {
      for (absl::string_view address : absl::StrSplit(target, ',', absl::SkipEmpty())) {
        addresses.emplace_back(address);
      }
      return addresses;
    }
  }
  // dns:///host:port or dns://authority/host:port, resolved here as gRPC would.
  if (!absl::ConsumePrefix(&target, "dns:")) return addresses;
  if (absl::ConsumePrefix(&target, "//")) target.remove_prefix(std::min(target.size(), target.find('/') + 1));
  const size_t colon = target.rfind(':');
  if (colon == absl::string_view::npos) return addresses;
  const std::string host(absl::StripPrefix(absl::StripSuffix(target.substr(0, colon), "]"), "["));
  const std::string port(target.substr(colon + 1));
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    const void* bytes = a->ai_family == AF_INET6
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
    if (inet_ntop(a->ai_family, bytes, ip, sizeof(ip)) == nullptr) continue;
    std::string address = a->ai_family == AF_INET6 ? absl::StrCat("[", ip, "]:", port)
                                                   : absl::StrCat(ip, ":", port);
    if (std::find(addresses.begin(), addresses.end(), address) == addresses.end()) {
      addresses.push_back(std::move(address));
    }
  }
  freeaddrinfo(found);
  return addresses;
}

namespace {

// Adds the buffers `message` and the messages in it name to `named`.
void AddBuffersOf(const google::protobuf::Message& message, NamedBuffers* named) {
  if (message.GetDescriptor() == v1::Array::descriptor()) {
    const auto& array = static_cast<const v1::Array&>(message);
    if (array.has_buffer()) named->inputs.push_back(array.buffer().name());
    return;
  }
  if (message.GetDescriptor() == v1::OutputBuffers::descriptor()) {
    const auto& outputs = static_cast<const v1::OutputBuffers&>(message);
    for (const std::string* name :
         {&outputs.values(), &outputs.indices(), &outputs.lengths(), &outputs.keys()}) {
      if (!name->empty()) named->outputs.push_back(*name);
    }
    return;
  }
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE) continue;
    if (!field->is_repeated()) {
      AddBuffersOf(reflection->GetMessage(message, field), named);
      continue;
    }
    for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
      AddBuffersOf(reflection->GetRepeatedMessage(message, field, i), named);
    }
  }
}

}  // namespace

NamedBuffers BuffersOf(const google::protobuf::Message& request) {
  NamedBuffers named;
  AddBuffersOf(request, &named);
  return named;
}

BufferRoutes::BufferRoutes(const std::string& target, std::shared_ptr<grpc::Channel> home,
                           Connector connect, absl::Duration timeout)
    : addresses_(TargetAddresses(target)),
      home_(std::move(home)),
      connect_(std::move(connect)),
      timeout_(timeout) {}

std::shared_ptr<grpc::Channel> BufferRoutes::ChannelTo(const std::string& location, int index) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[{location, index}];
  if (channel == nullptr) channel = connect_(location, index);
  return channel;
}

void BufferRoutes::Remember(const std::string& name, const std::string& location) {
  absl::MutexLock lock(&mu_);
  locations_[name] = location;
}

void BufferRoutes::Forget(const std::string& name) {
  absl::MutexLock lock(&mu_);
  locations_.erase(name);
}

absl::StatusOr<v1::ListBuffersResponse> BufferRoutes::ListOn(
    const std::shared_ptr<grpc::Channel>& channel) {
  v1::ListBuffersResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  const grpc::Status status =
      v1::Buffers::NewStub(channel)->List(&context, v1::ListBuffersRequest(), &response);
  if (!status.ok()) return ToAbsl(status);
  return response;
}

absl::StatusOr<std::string> BufferRoutes::Find(const std::string& name) {
  std::vector<std::string> seen = addresses_;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = locations_.find(name); it != locations_.end()) return it->second;
    for (const auto& [key, channel] : channels_) {
      if (key.second == 0 && std::find(seen.begin(), seen.end(), key.first) == seen.end()) {
        seen.push_back(key.first);
      }
    }
  }
  std::vector<std::shared_ptr<grpc::Channel>> instances = {home_};
  for (const std::string& location : seen) instances.push_back(ChannelTo(location));
  // An instance that does not answer is passed over: the buffer may be on
  // another, and if it was on that one it is gone.
  for (const std::shared_ptr<grpc::Channel>& channel : instances) {
    absl::StatusOr<v1::ListBuffersResponse> list = ListOn(channel);
    if (!list.ok()) continue;
    for (const v1::BufferInfo& info : list->buffers()) {
      if (info.name() == name) {
        Remember(name, info.location());
        return info.location();
      }
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "no buffer named ", name, " on the instances this client knows (the target",
      seen.empty() ? "" : absl::StrCat(", ", absl::StrJoin(seen, ", ")),
      "); a buffer is lost with the instance that held it"));
}

absl::StatusOr<std::string> BufferRoutes::LocationFor(const NamedBuffers& buffers) {
  std::string location, first;
  for (const std::string& name : buffers.inputs) {
    absl::StatusOr<std::string> at = Find(name);
    if (!at.ok()) return at.status();
    if (location.empty()) {
      location = *at;
      first = name;
    } else if (*at != location) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffers ", first, " (at ", location, ") and ", name, " (at ", *at,
                       ") are on different instances; one request reads buffers of one"));
    }
  }
  if (!location.empty()) return location;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& name : buffers.outputs) {
      if (auto it = locations_.find(name); it != locations_.end()) return it->second;
    }
  }
  absl::StatusOr<v1::ListBuffersResponse> list = ListOn(home_);
  if (!list.ok()) return list.status();
  if (list->location().empty()) {
    return absl::FailedPreconditionError(
        "the server does not say where it is (ListBuffersResponse.location): it predates "
        "buffer routing");
  }
  return list->location();
}

absl::Status BufferRoutes::Routed(absl::Status status, const std::string& name,
                                  const std::string& location) {
  if (status.code() != absl::StatusCode::kUnavailable) return status;
  return absl::NotFoundError(absl::StrCat("buffer ", name, " was on the instance at ", location,
                                          ", which does not answer (", status.message(),
                                          "): it went away, and its buffers with it"));
}

}  // namespace primserve
