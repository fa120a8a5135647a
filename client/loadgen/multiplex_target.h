// The Target whose calls are requests on a Multiplex stream per channel:
// requests go out in order, one write at a time; answers come back in any
// order and are matched to their calls by id.
#ifndef PRIMSERVE_CLIENT_LOADGEN_MULTIPLEX_TARGET_H_
#define PRIMSERVE_CLIENT_LOADGEN_MULTIPLEX_TARGET_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/loadgen/target.h"
#include "core/rpc.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/slice.h"

namespace primserve {

class MultiplexStream;

class MultiplexTarget final : public Target {
 public:
  // Opens a Multiplex stream on each of `channels`; the requests added are
  // `rpc`'s.
  MultiplexTarget(std::string name, Rpc rpc,
                  const std::vector<std::shared_ptr<grpc::Channel>>& channels);
  // Half-closes the streams and waits for their end.
  ~MultiplexTarget() override;

  const std::string& name() const override { return name_; }
  size_t num_requests() const override { return requests_.size(); }
  void Add(const google::protobuf::Message& request, Check check) override;
  void Start(size_t channel, size_t index, bool verify,
             std::function<void(const CallOutcome&)> done) const override;

 private:
  struct Request {
    grpc::Slice body;  // MultiplexRequest's oneof field, tag and length included
    Check check;
  };

  const std::string name_;
  const std::string field_tag_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  std::vector<std::unique_ptr<MultiplexStream>> streams_;
  std::vector<Request> requests_;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_MULTIPLEX_TARGET_H_
