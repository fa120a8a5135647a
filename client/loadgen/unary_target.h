// The Target whose calls are unary calls of one method.
#ifndef PRIMSERVE_CLIENT_LOADGEN_UNARY_TARGET_H_
#define PRIMSERVE_CLIENT_LOADGEN_UNARY_TARGET_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/loadgen/target.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace primserve {

class UnaryTarget final : public Target {
 public:
  // `method`: "/package.Service/Method".
  UnaryTarget(std::string name, std::string method,
              const std::vector<std::shared_ptr<grpc::Channel>>& channels, absl::Duration timeout);

  const std::string& name() const override { return name_; }
  size_t num_requests() const override { return requests_.size(); }
  void Add(const google::protobuf::Message& request, Check check) override;
  void Start(size_t channel, size_t index, bool verify,
             std::function<void(const CallOutcome&)> done) const override;

 private:
  struct Request {
    grpc::ByteBuffer bytes;
    Check check;
  };
  struct Call {
    grpc::ClientContext context;
    grpc::ByteBuffer response;
  };

  const std::string name_;
  const std::string method_;
  const absl::Duration timeout_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // one per channel
  std::vector<Request> requests_;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_UNARY_TARGET_H_
