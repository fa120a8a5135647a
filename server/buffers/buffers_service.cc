#include "server/buffers/buffers_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/buffers/owner.h"

namespace primserve::buffers {
namespace {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                 const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

void Fill(const Info& info, const std::string& location, v1::BufferInfo* out) {
  out->set_name(info.name);
  out->set_dtype(static_cast<v1::DType>(info.dtype));
  out->set_length(info.length);
  out->set_device_id(info.device);
  out->set_location(location);
  out->set_expires_in_seconds(info.expires_in_seconds);
}

// One Write stream: each message's whole elements land at its offset, or
// after the previous message's.
class WriteReactor final : public grpc::ServerReadReactor<v1::WriteBufferRequest> {
 public:
  WriteReactor(Registry* registry, std::string owner, v1::WriteBufferResponse* response)
      : registry_(registry), owner_(std::move(owner)), response_(response) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client has sent its last message
      if (messages_ == 0) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "a Write stream with no message names no buffer"));
        return;
      }
      response_->set_elements_written(written_);
      Finish(grpc::Status::OK);
      return;
    }
    if (absl::Status applied = Apply(); !applied.ok()) {
      Finish(ToGrpc(applied));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  absl::Status Apply() {
    const std::string where = absl::StrCat("Write message ", messages_ + 1);
    if (messages_++ == 0) {
      if (absl::Status named = CheckName(request_.name(), absl::StrCat(where, ": name"));
          !named.ok()) {
        return named;
      }
      absl::StatusOr<Contents> contents = registry_->Get(owner_, request_.name());
      if (!contents.ok()) return contents.status();
      contents_ = *std::move(contents);
      name_ = request_.name();
    } else if (!request_.name().empty() && request_.name() != name_) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " names buffer ", request_.name(), " but the stream writes ", name_));
    }
    if (request_.offset() != 0) next_ = request_.offset();
    const std::string& data = request_.data();
    const size_t element_size = DTypeSize(contents_.dtype);
    if (data.size() % element_size != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: data has %d bytes, not whole %d-byte %s elements", where, data.size(),
          element_size, DTypeName(contents_.dtype)));
    }
    const uint64_t elements = data.size() / element_size;
    if (next_ > contents_.length || elements > contents_.length - next_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: elements [%d, %d) are past the end of buffer %s (%d elements)", where, next_,
          next_ + elements, name_, contents_.length));
    }
    if (absl::Status wrote = contents_.storage->Write(next_ * element_size, data.data(),
                                                      data.size());
        !wrote.ok()) {
      return wrote;
    }
    registry_->RecordWritten(data.size());
    next_ += elements;
    written_ += elements;
    return absl::OkStatus();
  }

  Registry* const registry_;
  const std::string owner_;
  v1::WriteBufferResponse* const response_;
  v1::WriteBufferRequest request_;
  uint64_t messages_ = 0;
  std::string name_;
  Contents contents_;  // held for the whole stream
  uint64_t next_ = 0;  // element the next message's data lands at
  uint64_t written_ = 0;
};

// One Read: the range in pieces of at most piece_bytes, one write at a time.
class ReadReactor final : public grpc::ServerWriteReactor<v1::ReadBufferResponse> {
 public:
  ReadReactor(Registry* registry, const std::string& owner, const v1::ReadBufferRequest& request)
      : registry_(registry) {
    absl::Status started = Start(owner, request);
    if (!started.ok()) {
      Finish(ToGrpc(started));
      return;
    }
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client stopped reading"));
      return;
    }
    if (next_ == end_) {
      Finish(grpc::Status::OK);
      return;
    }
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  absl::Status Start(const std::string& owner, const v1::ReadBufferRequest& request) {
    if (absl::Status named = CheckName(request.name(), "name"); !named.ok()) return named;
    absl::StatusOr<Contents> contents = registry_->Get(owner, request.name());
    if (!contents.ok()) return contents.status();
    contents_ = *std::move(contents);
    const uint64_t length = contents_.length;
    if (request.offset() > length || request.length() > length - request.offset()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("[%d, +%d) is past the end of buffer %s (%d elements)",
                          request.offset(), request.length(), request.name(), length));
    }
    element_size_ = DTypeSize(contents_.dtype);
    next_ = request.offset();
    end_ = request.length() != 0 ? next_ + request.length() : length;
    const uint64_t piece_bytes = request.piece_bytes() != 0
                                     ? request.piece_bytes()
                                     : BuffersService::kDefaultPieceBytes;
    piece_elements_ = std::max<uint64_t>(1, piece_bytes / element_size_);
    return absl::OkStatus();
  }

  void WriteNext() {
    const uint64_t n = std::min(piece_elements_, end_ - next_);
    response_.Clear();
    response_.set_offset(next_);
    std::string* data = response_.mutable_data();
    data->resize(n * element_size_);
    if (absl::Status read = contents_.storage->Read(next_ * element_size_, data->size(),
                                                    data->data());
        !read.ok()) {
      Finish(ToGrpc(read));
      return;
    }
    registry_->RecordRead(data->size());
    next_ += n;
    StartWrite(&response_);
  }

  Registry* const registry_;
  Contents contents_;  // held for the whole stream
  size_t element_size_ = 4;
  uint64_t next_ = 0;
  uint64_t end_ = 0;
  uint64_t piece_elements_ = 1;
  v1::ReadBufferResponse response_;
};

}  // namespace

grpc::ServerUnaryReactor* BuffersService::Create(grpc::CallbackServerContext* context,
                                                 const v1::CreateBufferRequest* request,
                                                 v1::BufferInfo* response) {
  if (request->dtype() < v1::INT32 || request->dtype() > v1::FLOAT64) {
    return Answer(context, absl::InvalidArgumentError(absl::StrCat(
                               "dtype ", static_cast<int>(request->dtype()),
                               " is not a DType a buffer can hold (INT32 ... FLOAT64)")));
  }
  absl::StatusOr<Info> info =
      registry_->Create(OwnerOf(*context, caller_header_), request->name(),
                        static_cast<DType>(request->dtype()), request->length());
  if (info.ok()) Fill(*info, registry_->location(), response);
  return Answer(context, info.status());
}

grpc::ServerReadReactor<v1::WriteBufferRequest>* BuffersService::Write(
    grpc::CallbackServerContext* context, v1::WriteBufferResponse* response) {
  return new WriteReactor(registry_, OwnerOf(*context, caller_header_), response);
}

grpc::ServerWriteReactor<v1::ReadBufferResponse>* BuffersService::Read(
    grpc::CallbackServerContext* context, const v1::ReadBufferRequest* request) {
  return new ReadReactor(registry_, OwnerOf(*context, caller_header_), *request);
}

grpc::ServerUnaryReactor* BuffersService::Free(grpc::CallbackServerContext* context,
                                               const v1::FreeBufferRequest* request,
                                               v1::FreeBufferResponse*) {
  if (absl::Status named = CheckName(request->name(), "name"); !named.ok()) {
    return Answer(context, named);
  }
  return Answer(context, registry_->Free(OwnerOf(*context, caller_header_), request->name()));
}

grpc::ServerUnaryReactor* BuffersService::List(grpc::CallbackServerContext* context,
                                               const v1::ListBuffersRequest*,
                                               v1::ListBuffersResponse* response) {
  const std::string owner = OwnerOf(*context, caller_header_);
  const std::string location = registry_->location();
  for (const Info& info : registry_->List(owner)) Fill(info, location, response->add_buffers());
  response->set_location(location);
  response->set_bytes_used(registry_->BytesUsed(owner));
  response->set_bytes_limit(registry_->BytesLimit());
  return Answer(context, absl::OkStatus());
}

}  // namespace primserve::buffers
