#include "client/buffers_client.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"

namespace primserve {
namespace {

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// Runs f(i) for i in [0, n) on n threads (the first on this one) and
// returns the first error.
template <typename F>
absl::Status OnEach(size_t n, F f) {
  std::vector<absl::Status> results(n);
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) threads.emplace_back([&, i] { results[i] = f(i); });
  results[0] = f(0);
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

BuffersClient::BuffersClient(std::vector<std::shared_ptr<grpc::Channel>> channels,
                             absl::Duration timeout)
    : BuffersClient(std::move(channels), nullptr, timeout) {}

BuffersClient::BuffersClient(std::vector<std::shared_ptr<grpc::Channel>> channels,
                             std::shared_ptr<BufferRoutes> routes, absl::Duration timeout)
    : channels_(std::move(channels)), routes_(std::move(routes)), timeout_(timeout) {}

size_t BuffersClient::StripesOf(size_t asked, uint64_t elements) const {
  size_t stripes = asked == 0 ? channels_.size() : std::min(asked, channels_.size());
  return std::max<size_t>(1, std::min<uint64_t>(stripes, elements));
}

absl::StatusOr<std::string> BuffersClient::Locate(const std::string& name) {
  if (routes_ == nullptr) return std::string();
  return routes_->Find(name);
}

std::unique_ptr<v1::Buffers::Stub> BuffersClient::StubTo(const std::string& location, size_t i) {
  return v1::Buffers::NewStub(location.empty() ? channels_[i]
                                               : routes_->ChannelTo(location, static_cast<int>(i)));
}

absl::Status BuffersClient::Routed(const grpc::Status& status, const std::string& name,
                                   const std::string& location) {
  if (location.empty()) return ToAbsl(status);
  return BufferRoutes::Routed(ToAbsl(status), name, location);
}

absl::StatusOr<v1::BufferInfo> BuffersClient::Create(const std::string& name, DType dtype,
                                                     uint64_t length) {
  v1::CreateBufferRequest request;
  request.set_name(name);
  request.set_dtype(static_cast<v1::DType>(dtype));
  request.set_length(length);
  v1::BufferInfo info;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  if (grpc::Status s = StubTo("", 0)->Create(&context, request, &info); !s.ok()) return ToAbsl(s);
  if (routes_ != nullptr) routes_->Remember(name, info.location());
  return info;
}

absl::Status BuffersClient::WriteOn(const std::string& location, size_t channel,
                                    const std::string& name, uint64_t offset,
                                    absl::string_view bytes) {
  v1::WriteBufferResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  std::unique_ptr<v1::Buffers::Stub> stub = StubTo(location, channel);
  auto stream = stub->Write(&context, &response);
  v1::WriteBufferRequest message;
  message.set_name(name);
  message.set_offset(offset);
  // Later messages continue after the previous one (offset 0); an empty
  // range still sends one message, naming the buffer.
  size_t at = 0;
  do {
    const size_t n = std::min(kPieceBytes, bytes.size() - at);
    message.set_data(bytes.data() + at, n);
    if (!stream->Write(message)) break;
    if (progress_) progress_(n);
    message.clear_name();
    message.clear_offset();
    at += n;
  } while (at < bytes.size());
  stream->WritesDone();
  return Routed(stream->Finish(), name, location);
}

absl::Status BuffersClient::Write(const std::string& name, uint64_t offset,
                                  absl::string_view bytes, size_t channel) {
  absl::StatusOr<std::string> location = Locate(name);
  if (!location.ok()) return location.status();
  return WriteOn(*location, channel, name, offset, bytes);
}

absl::StatusOr<v1::BufferInfo> BuffersClient::PutBytes(const std::string& name, DType dtype,
                                                       absl::string_view bytes, size_t stripes) {
  const size_t element_size = DTypeSize(dtype);
  if (bytes.size() % element_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(bytes.size(), " bytes are not whole ",
                                                   element_size, "-byte elements"));
  }
  const uint64_t elements = bytes.size() / element_size;
  absl::StatusOr<v1::BufferInfo> info = Create(name, dtype, elements);
  if (!info.ok()) return info.status();
  const std::string location = routes_ != nullptr ? info->location() : "";
  const size_t n = StripesOf(stripes, elements);
  absl::Status wrote = OnEach(n, [&](size_t i) {
    const uint64_t begin = elements * i / n, end = elements * (i + 1) / n;
    if (begin == end) return absl::OkStatus();
    return WriteOn(location, i, name, begin,
                   bytes.substr(begin * element_size, (end - begin) * element_size));
  });
  if (!wrote.ok()) return wrote;
  return info;
}

absl::StatusOr<v1::BufferInfo> BuffersClient::Info(const std::string& name) {
  absl::StatusOr<std::string> location = Locate(name);
  if (!location.ok()) return location.status();
  v1::ListBuffersResponse list;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  if (grpc::Status s = StubTo(*location, 0)->List(&context, v1::ListBuffersRequest(), &list);
      !s.ok()) {
    return Routed(s, name, *location);
  }
  for (const v1::BufferInfo& info : list.buffers()) {
    if (info.name() == name) return info;
  }
  if (routes_ != nullptr) routes_->Forget(name);
  return absl::NotFoundError(absl::StrCat("no buffer named ", name));
}

absl::Status BuffersClient::ReadRange(const std::string& location, size_t channel,
                                      const std::string& name, uint64_t begin, uint64_t end,
                                      size_t element_size, char* out) {
  v1::ReadBufferRequest request;
  request.set_name(name);
  request.set_offset(begin);
  request.set_length(end - begin);
  request.set_piece_bytes(kPieceBytes);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  std::unique_ptr<v1::Buffers::Stub> stub = StubTo(location, channel);
  auto stream = stub->Read(&context, request);
  v1::ReadBufferResponse piece;
  absl::Status pieces_ok;
  while (stream->Read(&piece)) {
    const uint64_t at = piece.offset();
    if (at < begin || piece.data().size() > (end - at) * element_size) {
      pieces_ok = absl::InternalError("a Read piece is outside the range asked for");
      context.TryCancel();
      continue;
    }
    std::memcpy(out + (at - begin) * element_size, piece.data().data(), piece.data().size());
    if (progress_) progress_(piece.data().size());
  }
  const grpc::Status status = stream->Finish();
  if (!pieces_ok.ok()) return pieces_ok;
  return Routed(status, name, location);
}

absl::Status BuffersClient::ReadInto(const v1::BufferInfo& info, char* out, size_t stripes) {
  const size_t element_size = DTypeSize(static_cast<DType>(info.dtype()));
  const uint64_t elements = info.length();
  const std::string location = routes_ != nullptr ? info.location() : "";
  const size_t n = StripesOf(stripes, elements);
  return OnEach(n, [&](size_t i) {
    const uint64_t begin = elements * i / n, end = elements * (i + 1) / n;
    if (begin == end) return absl::OkStatus();
    return ReadRange(location, i, info.name(), begin, end, element_size,
                     out + begin * element_size);
  });
}

absl::StatusOr<std::string> BuffersClient::GetBytes(const std::string& name, size_t stripes) {
  absl::StatusOr<v1::BufferInfo> info = Info(name);
  if (!info.ok()) return info.status();
  std::string bytes(info->length() * DTypeSize(static_cast<DType>(info->dtype())), '\0');
  absl::Status read = ReadInto(*info, bytes.data(), stripes);
  if (!read.ok()) return read;
  return bytes;
}

absl::Status BuffersClient::Free(const std::string& name) {
  absl::StatusOr<std::string> location = Locate(name);
  if (!location.ok()) return location.status();
  v1::FreeBufferRequest request;
  request.set_name(name);
  v1::FreeBufferResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  const grpc::Status status = StubTo(*location, 0)->Free(&context, request, &response);
  if (routes_ != nullptr && (status.ok() || status.error_code() == grpc::StatusCode::NOT_FOUND)) {
    routes_->Forget(name);
  }
  return Routed(status, name, *location);
}

absl::StatusOr<v1::ListBuffersResponse> BuffersClient::List() {
  v1::ListBuffersResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  if (grpc::Status s = StubTo("", 0)->List(&context, v1::ListBuffersRequest(), &response);
      !s.ok()) {
    return ToAbsl(s);
  }
  return response;
}

}  // namespace primserve
