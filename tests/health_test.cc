// The gRPC health service follows the backend: when the backend reports it
// can no longer serve (e.g. a sticky CUDA error), health goes NOT_SERVING;
// each device of several shows as its own service ("primserve.device.N"),
// apart from the server's ("").
#include <atomic>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"

namespace primserve {
namespace {

// A CPU backend whose health the test sets.
class SwitchableBackend final : public ExecutionBackend {
 public:
  explicit SwitchableBackend(std::atomic<bool>* broken) : broken_(broken) {}
  std::string name() const override { return "switchable"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override { cpu_.Execute(std::move(batch)); }
  absl::Status Health() const override {
    return *broken_ ? absl::UnavailableError("injected sticky error") : absl::OkStatus();
  }

 private:
  CpuBackend cpu_;
  std::atomic<bool>* broken_;
};

TEST(HealthTest, NotServingOnceTheBackendIsUnhealthy) {
  std::atomic<bool> broken{false};
  ServerOptions options;
  options.address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::make_unique<SwitchableBackend>(&broken));
  ASSERT_TRUE(server.ok()) << server.status();
  PrimitivesClient client(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", (*server)->port())));
  ASSERT_TRUE(client.IsServing());
  broken = true;
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (client.IsServing() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(client.IsServing()) << "health still SERVING 10 s after the backend failed";
}

// A CPU backend standing for two devices, of which the test can lose one.
class TwoDeviceBackend final : public ExecutionBackend {
 public:
  explicit TwoDeviceBackend(std::atomic<bool>* lost_one) : lost_one_(lost_one) {}
  std::string name() const override { return "two-device"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override { cpu_.Execute(std::move(batch)); }
  std::vector<std::pair<int, absl::Status>> DeviceHealth() const override {
    return {{0, absl::OkStatus()},
            {1, *lost_one_ ? absl::UnavailableError("CUDA device 1 is out of service")
                           : absl::OkStatus()}};
  }

 private:
  CpuBackend cpu_;
  std::atomic<bool>* lost_one_;
};

// The health service's answer for `service`; UNKNOWN if it gave none,
// SERVICE_UNKNOWN for a service it does not know.
grpc::health::v1::HealthCheckResponse::ServingStatus HealthOf(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    return grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN;
  }
  if (!status.ok()) return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  return response.status();
}

TEST(HealthTest, EachDeviceIsAServiceOfItsOwn) {
  using Response = grpc::health::v1::HealthCheckResponse;
  std::atomic<bool> lost_one{false};
  ServerOptions options;
  options.address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::make_unique<TwoDeviceBackend>(&lost_one));
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                     grpc::InsecureChannelCredentials());
  EXPECT_EQ(HealthOf(channel, "primserve.device.0"), Response::SERVING);
  EXPECT_EQ(HealthOf(channel, "primserve.device.1"), Response::SERVING);
  EXPECT_EQ(HealthOf(channel, "primserve.device.2"), Response::SERVICE_UNKNOWN);
  lost_one = true;
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (HealthOf(channel, "primserve.device.1") == Response::SERVING && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(HealthOf(channel, "primserve.device.1"), Response::NOT_SERVING);
  EXPECT_EQ(HealthOf(channel, "primserve.device.0"), Response::SERVING);
  EXPECT_EQ(HealthOf(channel, ""), Response::SERVING);
  PrimitivesClient client(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", (*server)->port())));
  EXPECT_TRUE(client.IsServing());
}

}  // namespace
}  // namespace primserve
