#include "client/loadgen/workload.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/loadgen/multiplex_target.h"
#include "client/loadgen/unary_target.h"
#include "google/protobuf/descriptor.h"
#include "proto/primserve/v1/echo.grpc.pb.h"
#include "proto/primserve/v1/primitives.grpc.pb.h"

namespace primserve {
namespace {

// Whether `response` holds what Echo promises: the data of the request's
// arrays, concatenated, then cut or zero-padded to response_bytes.
bool EchoMatches(const v1::EchoRequest& request, const v1::EchoResponse& response) {
  absl::string_view payload = response.payload();
  if (payload.size() != request.response_bytes()) return false;
  for (const v1::Array& array : request.arrays()) {
    const absl::string_view part = absl::string_view(array.data()).substr(0, payload.size());
    if (!absl::StartsWith(payload, part)) return false;
    payload.remove_prefix(part.size());
  }
  return payload.find_first_not_of('\0') == absl::string_view::npos;
}

// An Echo request with the arrays of `primitive` that asks for
// `response_bytes` back.
v1::EchoRequest EchoOf(const google::protobuf::Message& primitive, uint64_t response_bytes) {
  v1::EchoRequest echo;
  const google::protobuf::Descriptor* descriptor = primitive.GetDescriptor();
  const google::protobuf::Reflection* reflection = primitive.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->message_type() == v1::Array::descriptor() && !field->is_repeated() &&
        reflection->HasField(primitive, field)) {
      echo.add_arrays()->CopyFrom(reflection->GetMessage(primitive, field));
    }
  }
  echo.set_response_bytes(response_bytes);
  return echo;
}

}  // namespace

Workload::Workload(const Options& options,
                   const std::vector<std::shared_ptr<grpc::Channel>>& channels)
    : verify_(options.verify_every > 0),
      placement_(options.placement),
      in_place_(options.in_place),
      stream_piece_bytes_(options.stream_piece_bytes) {
  const std::string service = absl::StrCat("/", v1::Primitives::service_full_name(), "/");
  if (options.mode != Mode::kEcho) {
    if (options.stream_piece_bytes > 0) {
      const std::string method = absl::StrCat(RpcName(options.rpc.rpc), "Stream");
      primitive_ = std::make_unique<StreamTarget>(
          absl::StrCat(options.rpc.flag, "/stream"), service + method, channels, options.timeout,
          options.stream_piece_bytes,
          google::protobuf::MessageFactory::generated_factory()->GetPrototype(
              google::protobuf::DescriptorPool::generated_pool()
                  ->FindServiceByName(v1::Primitives::service_full_name())
                  ->FindMethodByName(method)
                  ->output_type()));
    } else if (options.multiplex) {
      primitive_ = std::make_unique<MultiplexTarget>(absl::StrCat(options.rpc.flag, "/multiplex"),
                                                     options.rpc.rpc, channels);
    } else {
      primitive_ = std::make_unique<UnaryTarget>(
          std::string(options.rpc.flag),
          absl::StrCat("/", v1::Primitives::service_full_name(), "/", RpcName(options.rpc.rpc)),
          channels, options.timeout);
    }
  }
  if (options.mode != Mode::kPrimitive && options.stream_piece_bytes > 0) {
    auto echo = std::make_unique<StreamTarget>(
        "echo/stream", absl::StrCat("/", v1::Echo::service_full_name(), "/EchoStream"), channels,
        options.timeout, options.stream_piece_bytes, nullptr);
    echo_stream_ = echo.get();
    echo_ = std::move(echo);
  } else if (options.mode != Mode::kPrimitive) {
    echo_ = std::make_unique<UnaryTarget>("echo",
                                          absl::StrCat("/", v1::Echo::service_full_name(), "/Echo"),
                                          channels, options.timeout);
  }
}

absl::Status Workload::Place(std::unique_ptr<PlacementRegion> region) {
  region_ = std::move(region);
  uint64_t cursor = 0;
  for (auto& place : pending_) {
    if (absl::Status s = place(*region_, &cursor); !s.ok()) return s;
  }
  pending_.clear();
  return absl::OkStatus();
}

void Workload::AddChecked(const google::protobuf::Message& request,
                          const google::protobuf::Message& expected, CheckOf check_of) {
  if (placement_ != Placement::kInline) return AddPlaced(request, expected, std::move(check_of));
  if (first_request_bytes_ == 0) {
    first_request_bytes_ = request.ByteSizeLong();
    first_response_bytes_ = expected.ByteSizeLong();
  }
  if (primitive_ != nullptr) primitive_->Add(request, check_of ? check_of(nullptr) : nullptr);
  if (echo_stream_ != nullptr) {
    AddEchoStream(request, expected.ByteSizeLong());
  } else if (echo_ != nullptr) {
    const v1::EchoRequest echo = EchoOf(request, expected.ByteSizeLong());
    echo_->Add(echo, verify_ ? Parsed<v1::EchoResponse>([echo](const v1::EchoResponse& r) {
                 return EchoMatches(echo, r);
               })
                             : nullptr);
  }
}

void Workload::AddEchoStream(const google::protobuf::Message& request, uint64_t response_bytes) {
  const std::vector<StreamPiece> pieces = CutIntoPieces(request, stream_piece_bytes_);
  const uint64_t n = pieces.back().end;
  const auto share = [&](uint64_t element) {
    return n == 0 ? response_bytes : response_bytes * element / n;
  };
  auto echoes = std::make_shared<std::vector<v1::EchoRequest>>();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const uint64_t start = i == 0 ? 0 : share(pieces[i].start);
    echoes->push_back(EchoOf(*pieces[i].message, share(pieces[i].end) - start));
  }
  std::vector<const google::protobuf::Message*> messages;
  for (const v1::EchoRequest& echo : *echoes) messages.push_back(&echo);
  StreamTarget::AnswersCheck check;
  if (verify_) {
    check = [echoes](const std::vector<grpc::ByteBuffer>& answers) {
      if (answers.size() != echoes->size()) return false;
      for (size_t i = 0; i < answers.size(); ++i) {
        v1::EchoResponse response;
        grpc::ByteBuffer answer = answers[i];
        if (!grpc::SerializationTraits<v1::EchoResponse>::Deserialize(&answer, &response).ok() ||
            !EchoMatches((*echoes)[i], response)) {
          return false;
        }
      }
      return true;
    };
  }
  echo_stream_->AddMessages(messages, std::move(check));
}

void Workload::AddPlaced(const google::protobuf::Message& request,
                         const google::protobuf::Message& expected, CheckOf check_of) {
  std::shared_ptr<google::protobuf::Message> owned(request.New());
  owned->CopyFrom(request);
  OutputRoom room = RoomOf(expected);
  placed_bytes_ += PlacedBytes(*owned, room, in_place_);
  if (first_response_bytes_ == 0) first_response_bytes_ = expected.ByteSizeLong();
  pending_.push_back([this, owned, room = std::move(room), check_of = std::move(check_of)](
                         PlacementRegion& region, uint64_t* cursor) -> absl::Status {
    if (absl::Status s = PlaceRequest(owned.get(), room, in_place_, region, cursor); !s.ok()) {
      return s;
    }
    if (first_request_bytes_ == 0) first_request_bytes_ = owned->ByteSizeLong();
    if (primitive_ != nullptr) {
      primitive_->Add(*owned, check_of ? check_of(&region) : nullptr);
    }
    return absl::OkStatus();
  });
}

}  // namespace primserve
