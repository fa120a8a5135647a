// The gRPC health service follows the backend: when the backend reports it
// can no longer serve (e.g. a sticky CUDA error), health goes NOT_SERVING.
#include <atomic>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace primserve
