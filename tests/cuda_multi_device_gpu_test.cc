// The CUDA backend over every visible device, through the real gRPC path:
// verified scans, reduces and selects of random data from concurrent callers
// land on every device (the per-device counters of /metrics say so); then,
// with two or more devices, a sticky fault injected on device 1 under load
// gives no wrong answer and ends serving with the reason: a sticky error ends
// CUDA in the whole process, device 0 included (device_isolation_probe
// showed it on two H200s), so every device goes out of service, the server
// and each primserve.device.N health service NOT_SERVING, later requests
// refused at once, and /metrics shows primserve_device_up 0, the series the
// PrimserveDeviceLost alert fires on. Needs a GPU (tagged "gpu"); the fault
// test runs last, since CUDA does not survive it.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "server/cuda/cuda_backend.h"
#include "server/cuda/fault_injector.h"
#include "server/engine/metrics.h"
#include "server/server.h"
#include "tests/http_testing.h"

namespace primserve {
namespace {

using Health = grpc::health::v1::HealthCheckResponse;

// One server on the CUDA backend over every visible device, with metrics
// served and faults on demand.
struct Served {
  Metrics metrics;
  CudaFaultInjector faults;
  std::unique_ptr<PrimServer> server;
  std::shared_ptr<grpc::Channel> channel;
  int devices = 0;

  absl::Status Start() {
    if (absl::Status s = metrics.ServeHttp("127.0.0.1:0"); !s.ok()) return s;
    CudaBackendOptions cuda_options;
    cuda_options.metrics = &metrics;
    cuda_options.faults = &faults;
    absl::StatusOr<std::unique_ptr<CudaBackend>> cuda = CudaBackend::Create(cuda_options);
    if (!cuda.ok()) return cuda.status();
    devices = static_cast<int>((*cuda)->DeviceHealth().size());
    std::printf("devices: %d (%s)\n", devices, (*cuda)->device_names().c_str());
    ServerOptions options;
    options.address = "127.0.0.1:0";
    options.metrics = &metrics;
    options.batcher.batch_timeout_micros = 300;
    options.batcher.max_batch_size = 64;
    options.batcher.num_threads = 8;
    absl::StatusOr<std::unique_ptr<PrimServer>> started =
        PrimServer::Start(options, *std::move(cuda));
    if (!started.ok()) return started.status();
    server = *std::move(started);
    // Straight to this server, no retries: a failure must show as one.
    ConnectOptions direct;
    direct.health_check = false;
    direct.max_attempts = 1;
    channel = PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", server->port()), direct);
    return absl::OkStatus();
  }

  std::string Scrape() {
    absl::StatusOr<testing::HttpResponse> response =
        testing::HttpGet(metrics.http_port(), "/metrics");
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? response->body : "";
  }

  double Sample(const std::string& text, const std::string& series) {
    return testing::SampleValue(text, series).value_or(-1);
  }

  Health::ServingStatus HealthOf(const std::string& service) {
    auto stub = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    Health response;
    if (!stub->Check(&context, request, &response).ok()) return Health::UNKNOWN;
    return response.status();
  }
};

// What a caller saw: answers checked against the host's own arithmetic.
struct Tally {
  std::atomic<int> right{0};
  std::atomic<int> wrong{0};
  std::atomic<int> unavailable{0};
  std::atomic<int> other_error{0};
};

// One scan, reduce and select of random int64s (exact in any order), each
// answer checked; an error counted by kind. Mostly small (batched), now and
// then 16 MiB (a batch of its own).
void CallAndCheck(PrimitivesClient& client, std::mt19937_64& rng, Tally& tally) {
  const size_t n = rng() % 16 == 0 ? (size_t{1} << 21) + rng() % 1000 : 1 + rng() % 200000;
  std::vector<int64_t> input(n);
  for (int64_t& v : input) v = static_cast<int64_t>(rng() % 2001) - 1000;
  auto count = [&tally](const absl::Status& status) {
    (status.code() == absl::StatusCode::kUnavailable ? tally.unavailable : tally.other_error)++;
    if (status.code() != absl::StatusCode::kUnavailable) {
      std::printf("unexpected error: %s\n", status.ToString().c_str());
    }
  };

  absl::StatusOr<std::vector<int64_t>> scan = client.Scan<int64_t>(input, Op::kSum);
  if (scan.ok()) {
    std::vector<int64_t> expected(n);
    int64_t sum = 0;
    for (size_t i = 0; i < n; ++i) expected[i] = sum += input[i];
    (*scan == expected ? tally.right : tally.wrong)++;
  } else {
    count(scan.status());
  }

  absl::StatusOr<Reduction<int64_t>> max = client.Reduce<int64_t>(input, Op::kMax);
  if (max.ok()) {
    const bool right = max->values.size() == 1 &&
                       max->values[0] == *std::max_element(input.begin(), input.end());
    (right ? tally.right : tally.wrong)++;
  } else {
    count(max.status());
  }

  Predicate<int64_t> positive;
  positive.kind = PredicateKind::kGt;
  positive.operand = 0;
  absl::StatusOr<Selection<int64_t>> kept = client.Select<int64_t>(input, positive);
  if (kept.ok()) {
    std::vector<int64_t> expected;
    std::copy_if(input.begin(), input.end(), std::back_inserter(expected),
                 [](int64_t v) { return v > 0; });
    (kept->values == expected ? tally.right : tally.wrong)++;
  } else {
    count(kept.status());
  }
}

// `threads` callers, each with its own client and seed, until `stop`.
std::vector<std::thread> StartCallers(Served& served, int threads, int calls_each,
                                      std::atomic<bool>& stop, Tally& tally) {
  std::vector<std::thread> callers;
  for (int t = 0; t < threads; ++t) {
    callers.emplace_back([&served, &stop, &tally, t, calls_each] {
      PrimitivesClient client(served.channel);
      std::mt19937_64 rng(1000 + t);
      for (int i = 0; i < calls_each && !stop; ++i) CallAndCheck(client, rng, tally);
    });
  }
  return callers;
}

// The sum of primserve_device_requests_total over devices once it stops
// changing (the counters are recorded after each batch's drain, off the
// answers' path).
double SettledDeviceRequests(Served& served, std::string* text) {
  double last = -1;
  for (int tries = 0; tries < 50; ++tries) {
    *text = served.Scrape();
    double total = 0;
    for (int d = 0; d < served.devices; ++d) {
      total += served.Sample(
          *text, absl::StrCat("primserve_device_requests_total{device=\"", d, "\"}"));
    }
    if (total == last) return total;
    last = total;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return last;
}

// Calls per caller: MULTI_DEVICE_CALLS, else 12 (fewer under
// compute-sanitizer, whose kernels run many times slower).
int CallsEach() {
  const char* calls = std::getenv("MULTI_DEVICE_CALLS");
  return calls != nullptr && std::atoi(calls) > 0 ? std::atoi(calls) : 12;
}

TEST(CudaMultiDeviceTest, VerifiedAnswersOnEveryDevice) {
  Served served;
  ASSERT_TRUE(served.Start().ok());
  Tally tally;
  std::atomic<bool> stop{false};
  const int calls = CallsEach();
  std::vector<std::thread> callers = StartCallers(served, 8, calls, stop, tally);
  for (std::thread& caller : callers) caller.join();
  std::printf("answers: %d right, %d wrong, %d unavailable, %d other errors\n", tally.right.load(),
              tally.wrong.load(), tally.unavailable.load(), tally.other_error.load());
  EXPECT_EQ(tally.right, 8 * calls * 3);
  EXPECT_EQ(tally.wrong + tally.unavailable + tally.other_error, 0);

  std::string text;
  EXPECT_EQ(SettledDeviceRequests(served, &text), 8 * calls * 3);
  for (int d = 0; d < served.devices; ++d) {
    const std::string device = absl::StrCat("{device=\"", d, "\"}");
    const double requests = served.Sample(text, "primserve_device_requests_total" + device);
    const double bytes = served.Sample(text, "primserve_device_bytes_total" + device);
    const double kernel = served.Sample(text, "primserve_device_kernel_seconds_total" + device);
    std::printf("device %d: %.0f requests, %.0f input bytes, %.3f s in kernels\n", d, requests,
                bytes, kernel);
    EXPECT_GT(requests, 0) << "device " << d << " ran nothing";
    EXPECT_GT(bytes, 0) << "device " << d;
    EXPECT_GT(kernel, 0) << "device " << d;
    EXPECT_EQ(served.Sample(text, "primserve_device_up" + device), 1);
    EXPECT_GT(served.Sample(text, absl::StrCat("primserve_gpu_memory_bytes{device=\"", d,
                                               "\",kind=\"budget\"}")),
              0);
    EXPECT_EQ(served.HealthOf(absl::StrCat("primserve.device.", d)), Health::SERVING);
  }
  served.server->Shutdown(absl::Seconds(5));
}

TEST(CudaMultiDeviceTest, StickyFaultOnDeviceOneStopsServingWithTheReason) {
  Served served;
  ASSERT_TRUE(served.Start().ok());
  if (served.devices < 2) GTEST_SKIP() << "needs two CUDA devices; " << served.devices << " seen";

  // Under load from 8 callers, device 1's next batch meets a trapping kernel.
  Tally during;
  std::atomic<bool> stop{false};
  std::vector<std::thread> callers = StartCallers(served, 8, 1 << 30, stop, during);
  absl::SleepFor(absl::Seconds(1));
  served.faults.Arm(CudaFault::kSticky, 1, /*device=*/1);
  const absl::Time armed = absl::Now();
  while (served.server->backend().Health().ok() && absl::Now() - armed < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  // Load goes on for 2 s after the loss.
  absl::SleepFor(absl::Seconds(2));
  stop = true;
  for (std::thread& caller : callers) caller.join();
  std::printf("under load, fault on device 1: %d right, %d wrong, %d unavailable, %d other\n",
              during.right.load(), during.wrong.load(), during.unavailable.load(),
              during.other_error.load());
  EXPECT_EQ(during.wrong, 0);
  EXPECT_EQ(during.other_error, 0);
  EXPECT_GE(during.unavailable, 1);
  EXPECT_GT(during.right, 100);

  // CUDA is gone for the whole process: every device is out of service,
  // each saying why.
  const ExecutionBackend& backend = served.server->backend();
  const absl::Status health = backend.Health();
  std::printf("health: %s\n", health.ToString().c_str());
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(health.message().find("cudaErrorLaunchFailure"), std::string::npos) << health;
  for (const auto& [device, device_health] : backend.DeviceHealth()) {
    EXPECT_EQ(device_health.code(), absl::StatusCode::kUnavailable) << "device " << device;
    EXPECT_NE(device_health.message().find(absl::StrCat("CUDA device ", device,
                                                        " is out of service")),
              std::string::npos)
        << device_health;
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (served.HealthOf("") != Health::NOT_SERVING && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(served.HealthOf(""), Health::NOT_SERVING);
  for (int d = 0; d < served.devices; ++d) {
    EXPECT_EQ(served.HealthOf(absl::StrCat("primserve.device.", d)), Health::NOT_SERVING);
  }

  // Later requests are refused at once with the reason, touching no device.
  PrimitivesClient client(served.channel);
  const std::vector<int32_t> input = {3, -1, 4};
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<int32_t>> scan = client.Scan<int32_t>(input, Op::kSum);
  absl::StatusOr<Reduction<int32_t>> reduce = client.Reduce<int32_t>(input, Op::kMax);
  const absl::Duration refused_in = absl::Now() - start;
  for (const absl::Status& status : {scan.status(), reduce.status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_NE(status.message().find("is out of service"), std::string::npos) << status;
  }
  EXPECT_LT(refused_in, absl::Seconds(2));

  // The scrape holds what PrimserveDeviceLost (primserve_device_up == 0)
  // fires on, for every device.
  const std::string text = served.Scrape();
  for (int d = 0; d < served.devices; ++d) {
    const std::string series = absl::StrCat("primserve_device_up{device=\"", d, "\"}");
    std::printf("scraped %s %.0f\n", series.c_str(), served.Sample(text, series));
    EXPECT_EQ(served.Sample(text, series), 0);
  }
  served.server->Shutdown(absl::Seconds(5));
}

}  // namespace
}  // namespace primserve
