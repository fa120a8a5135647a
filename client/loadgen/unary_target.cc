#include "client/loadgen/unary_target.h"

#include <utility>

#include "grpcpp/support/slice.h"

namespace primserve {

UnaryTarget::UnaryTarget(std::string name, std::string method,
                         const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                         absl::Duration timeout)
    : name_(std::move(name)), method_(std::move(method)), timeout_(timeout) {
  for (const auto& channel : channels) {
    stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
}

void UnaryTarget::Add(const google::protobuf::Message& request, Check check) {
  grpc::Slice bytes(request.SerializeAsString());
  requests_.push_back({grpc::ByteBuffer(&bytes, 1), std::move(check)});
}

void UnaryTarget::Start(size_t channel, size_t index, bool verify,
                        std::function<void(const CallOutcome&)> done) const {
  auto* call = new Call;  // deleted by the callback
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  const Request& request = requests_[index];
  stubs_[channel]->UnaryCall(
      &call->context, method_, grpc::StubOptions(), &request.bytes, &call->response,
      [call, &request, verify, done = std::move(done)](grpc::Status status) {
        CallOutcome outcome;
        outcome.status = std::move(status);
        if (outcome.status.ok()) {
          outcome.bytes = request.bytes.Length() + call->response.Length();
          outcome.verified = verify;
          outcome.mismatch = verify && !request.check(call->response);
        }
        delete call;
        done(outcome);
      });
}

}  // namespace primserve
