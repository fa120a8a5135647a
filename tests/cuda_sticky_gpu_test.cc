// A sticky CUDA error in the real engine (a kernel that traps, injected by
// CudaFaultInjector): the request that met it gets UNAVAILABLE naming the
// error, the gRPC health service turns NOT_SERVING, later requests are
// refused at once with the same reason instead of touching the dead context,
// and the server still shuts down cleanly. Needs a GPU (tagged "gpu"); a
// process of its own, since the context is lost for good.
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "server/cuda/cuda_backend.h"
#include "server/cuda/fault_injector.h"
#include "server/server.h"

namespace primserve {
namespace {

// The health service's answer; UNKNOWN if it gave none.
grpc::health::v1::HealthCheckResponse::ServingStatus HealthOf(
    const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::health::v1::HealthCheckResponse response;
  if (!stub->Check(&context, {}, &response).ok()) return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  return response.status();
}

TEST(CudaStickyErrorTest, RequestUnavailableHealthNotServingLaterRequestsRefused) {
  CudaFaultInjector faults;
  CudaBackendOptions cuda_options;
  cuda_options.faults = &faults;
  absl::StatusOr<std::unique_ptr<CudaBackend>> cuda = CudaBackend::Create(cuda_options);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  ServerOptions options;
  options.address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<PrimServer>> server = PrimServer::Start(options, *std::move(cuda));
  ASSERT_TRUE(server.ok()) << server.status();
  // One server, asked directly: client-side health checking would refuse
  // calls to a NOT_SERVING server itself ("backend unhealthy"), and retries
  // would hide how fast the server refuses.
  ConnectOptions direct;
  direct.health_check = false;
  direct.max_attempts = 1;
  auto channel = PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", (*server)->port()), direct);
  PrimitivesClient client(channel);
  const std::vector<int32_t> input = {3, -1, 4, 1, -5, 9, 2, -6};

  absl::StatusOr<std::vector<int32_t>> before = client.Scan<int32_t>(input, Op::kSum);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(*before, (std::vector<int32_t>{3, 2, 6, 7, 2, 11, 13, 7}));
  ASSERT_EQ(HealthOf(channel), grpc::health::v1::HealthCheckResponse::SERVING);

  faults.Arm(CudaFault::kSticky);
  absl::StatusOr<std::vector<int32_t>> hit = client.Scan<int32_t>(input, Op::kSum);
  ASSERT_FALSE(hit.ok());
  EXPECT_EQ(hit.status().code(), absl::StatusCode::kUnavailable) << hit.status();
  EXPECT_NE(hit.status().message().find("cudaErrorLaunchFailure"), std::string::npos)
      << hit.status();
  std::printf("the request that met the trap: %s\n", hit.status().ToString().c_str());
  EXPECT_EQ((*server)->backend().Health().code(), absl::StatusCode::kUnavailable);

  // The health watch mirrors the backend within its polling period.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  auto health = HealthOf(channel);
  while (health != grpc::health::v1::HealthCheckResponse::NOT_SERVING && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
    health = HealthOf(channel);
  }
  EXPECT_EQ(health, grpc::health::v1::HealthCheckResponse::NOT_SERVING);

  // Every RPC is refused quickly, with the reason.
  const absl::Time start = absl::Now();
  absl::StatusOr<Reduction<int32_t>> reduce = client.Reduce<int32_t>(input, Op::kMax);
  absl::StatusOr<std::vector<int32_t>> scan = client.Scan<int32_t>(input, Op::kMin);
  const absl::Duration refused_in = absl::Now() - start;
  for (const absl::Status& status : {reduce.status(), scan.status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_NE(status.message().find("cudaErrorLaunchFailure"), std::string::npos) << status;
  }
  EXPECT_LT(refused_in, absl::Seconds(2));
  std::printf("after the trap: health NOT_SERVING; two later requests refused in %s: %s\n",
              absl::FormatDuration(refused_in).c_str(), scan.status().ToString().c_str());
  (*server)->Shutdown(absl::Seconds(5));
}

}  // namespace
}  // namespace primserve
