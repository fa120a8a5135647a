#include "server/engine/metrics.h"

#include <thread>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/engine/task.h"
#include "tests/http_testing.h"

namespace primserve {
namespace {

using ::primserve::testing::HttpGet;

// Serves `metrics` on an ephemeral loopback port and returns one scrape.
class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(metrics_.ServeHttp("127.0.0.1:0").ok()); }

  std::string Scrape() {
    absl::StatusOr<testing::HttpResponse> response = HttpGet(metrics_.http_port(), "/metrics");
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return "";
    EXPECT_EQ(response->status, 200);
    return response->body;
  }

  // The value of the sample whose name and labels are exactly `series`;
  // -1 when absent.
  static double Sample(const std::string& exposition, const std::string& series) {
    return testing::SampleValue(exposition, series).value_or(-1);
  }

  Metrics metrics_;
};

TEST_F(MetricsTest, ServesEveryFamilyOnItsPort) {
  EXPECT_GT(metrics_.http_port(), 0);
  const std::string text = Scrape();
  // Families whose series exist from the start; the others (requests_total,
  // request_duration_seconds, gpu_memory_bytes, build_info) appear on first use.
  for (const char* family :
       {"primserve_payload_bytes_total counter", "primserve_elements_total counter",
        "primserve_batch_size_requests histogram", "primserve_batch_size_elements histogram",
        "primserve_batches_total counter", "primserve_queue_depth gauge",
        "primserve_queue_capacity gauge",
        "primserve_requests_in_flight gauge", "primserve_rejections_total counter"}) {
    EXPECT_NE(text.find(absl::StrCat("# TYPE ", family, "\n")), std::string::npos) << family;
  }
  EXPECT_EQ(text.find("primserve_requests_total"), std::string::npos);
  // Counters that exist before anything happens read 0, so rate() sees the first one.
  EXPECT_EQ(Sample(text, R"(primserve_rejections_total{reason="queue_full"})"), 0);
  EXPECT_EQ(Sample(text, R"(primserve_elements_total{rpc="AggregateByKey"})"), 0);
}

TEST_F(MetricsTest, ServeHttpTwiceOrOnABusyPortFails) {
  EXPECT_EQ(metrics_.ServeHttp("127.0.0.1:0").code(), absl::StatusCode::kFailedPrecondition);
  Metrics other;
  EXPECT_FALSE(other.ServeHttp(absl::StrCat("127.0.0.1:", metrics_.http_port())).ok());
  EXPECT_EQ(other.http_port(), 0);
}

TEST_F(MetricsTest, EveryRpcHasItsLabel) {
  const std::string text = Scrape();
  for (Rpc rpc : kAllRpcs) {
    EXPECT_EQ(Sample(text, absl::StrCat(R"(primserve_elements_total{rpc=")", RpcName(rpc), R"("})")),
              0)
        << RpcName(rpc);
  }
}

TEST_F(MetricsTest, RequestDoneCountsByLabelsAndObservesTotal) {
  const Rpc scan = Rpc::kScan;
  metrics_.RequestDone(scan, /*op=*/1, /*dtype=*/1, absl::StatusCode::kOk,
                       absl::Milliseconds(3), 100, 40, 10);
  metrics_.RequestDone(scan, 1, 1, absl::StatusCode::kOk, absl::Microseconds(15), 60, 20, 5);
  // Out-of-range op, dtype and code fall back to "none" and UNKNOWN.
  metrics_.RequestDone(scan, 99, 0, static_cast<absl::StatusCode>(42), absl::Seconds(20), 7, 0,
                       0);
  const std::string text = Scrape();
  EXPECT_EQ(Sample(text, R"(primserve_requests_total{code="OK",dtype="INT32",op="SUM",rpc="Scan"})"),
            2);
  EXPECT_EQ(
      Sample(text, R"(primserve_requests_total{code="UNKNOWN",dtype="none",op="none",rpc="Scan"})"),
      1);
  EXPECT_EQ(Sample(text, R"(primserve_payload_bytes_total{direction="in"})"), 167);
  EXPECT_EQ(Sample(text, R"(primserve_payload_bytes_total{direction="out"})"), 60);
  EXPECT_EQ(Sample(text, R"(primserve_elements_total{rpc="Scan"})"), 15);

  // Buckets are 10us * 2^k: 15us lands in le=2e-05, 3ms in le=0.00512, 20 s in +Inf only.
  const std::string total = R"(primserve_request_duration_seconds_bucket{rpc="Scan",stage="total",)";
  EXPECT_EQ(Sample(text, total + R"(le="1e-05"})"), 0);
  EXPECT_EQ(Sample(text, total + R"(le="2e-05"})"), 1);
  EXPECT_EQ(Sample(text, total + R"(le="0.00256"})"), 1);
  EXPECT_EQ(Sample(text, total + R"(le="0.00512"})"), 2);
  EXPECT_EQ(Sample(text, total + R"(le="10.48576"})"), 2);
  EXPECT_EQ(Sample(text, total + R"(le="+Inf"})"), 3);
  EXPECT_EQ(Sample(text, R"(primserve_request_duration_seconds_count{rpc="Scan",stage="total"})"),
            3);
  // Stages nobody reported have no series.
  EXPECT_EQ(text.find(R"(stage="kernel")"), std::string::npos);
}

TEST_F(MetricsTest, StagesBatchesQueueAndRejections) {
  metrics_.ObserveStage(Rpc::kSelect, Stage::kQueue, absl::Microseconds(50));
  metrics_.ObserveStage(Rpc::kSelect, Stage::kCompute, absl::Milliseconds(1));
  metrics_.ObserveStage(Rpc::kAggregateByKey, Stage::kH2D, absl::Milliseconds(1));
  metrics_.BatchLaunched(3, 1000);
  metrics_.BatchLaunched(1, 5);
  metrics_.SetQueueDepth(17);
  metrics_.SetQueueCapacity(4096);
  metrics_.RequestStarted();
  metrics_.RequestStarted();
  metrics_.RequestFinished();
  metrics_.Rejected(RejectReason::kQueueFull);
  metrics_.Rejected(RejectReason::kDeadline);
  metrics_.Rejected(RejectReason::kDeadline);
  const std::string text = Scrape();
  EXPECT_EQ(
      Sample(text, R"(primserve_request_duration_seconds_count{rpc="Select",stage="queue"})"), 1);
  EXPECT_EQ(
      Sample(text, R"(primserve_request_duration_seconds_count{rpc="Select",stage="compute"})"),
      1);
  EXPECT_EQ(
      Sample(text, R"(primserve_request_duration_seconds_count{rpc="AggregateByKey",stage="h2d"})"),
      1);
  EXPECT_EQ(Sample(text, "primserve_batches_total"), 2);
  EXPECT_EQ(Sample(text, "primserve_batch_size_requests_sum"), 4);
  EXPECT_EQ(Sample(text, R"(primserve_batch_size_requests_bucket{le="2"})"), 1);
  EXPECT_EQ(Sample(text, R"(primserve_batch_size_requests_bucket{le="4"})"), 2);
  EXPECT_EQ(Sample(text, "primserve_batch_size_elements_sum"), 1005);
  EXPECT_EQ(Sample(text, R"(primserve_batch_size_elements_bucket{le="1024"})"), 2);
  EXPECT_EQ(Sample(text, R"(primserve_batch_size_elements_bucket{le="256"})"), 1);
  EXPECT_EQ(Sample(text, "primserve_queue_depth"), 17);
  EXPECT_EQ(Sample(text, "primserve_queue_capacity"), 4096);
  EXPECT_EQ(Sample(text, "primserve_requests_in_flight"), 1);
  EXPECT_EQ(Sample(text, R"(primserve_rejections_total{reason="queue_full"})"), 1);
  EXPECT_EQ(Sample(text, R"(primserve_rejections_total{reason="deadline"})"), 2);
  EXPECT_EQ(Sample(text, R"(primserve_rejections_total{reason="invalid"})"), 0);
}

TEST_F(MetricsTest, GpuMemoryAndBuildInfo) {
  metrics_.SetGpuMemory(0, GpuMemory{1, 2, 80, 70, 68});
  metrics_.SetGpuMemory(1, GpuMemory{5, 6, 80, 60, 68});
  metrics_.SetGpuMemory(0, GpuMemory{3, 4, 80, 50, 68});
  metrics_.SetBuildInfo("1.2.3", "cuda", "NVIDIA H100");
  const std::string text = Scrape();
  EXPECT_EQ(Sample(text, R"(primserve_gpu_memory_bytes{device="0",kind="pool_in_use"})"), 3);
  EXPECT_EQ(Sample(text, R"(primserve_gpu_memory_bytes{device="0",kind="pool_reserved"})"), 4);
  EXPECT_EQ(Sample(text, R"(primserve_gpu_memory_bytes{device="0",kind="device_free"})"), 50);
  EXPECT_EQ(Sample(text, R"(primserve_gpu_memory_bytes{device="1",kind="device_total"})"), 80);
  EXPECT_EQ(Sample(text, R"(primserve_gpu_memory_bytes{device="1",kind="budget"})"), 68);
  EXPECT_EQ(
      Sample(text,
             R"(primserve_build_info{backend="cuda",device="NVIDIA H100",version="1.2.3"})"),
      1);
}

TEST_F(MetricsTest, PerDeviceCountersAndUp) {
  metrics_.SetDeviceUp(0, true);
  metrics_.SetDeviceUp(1, true);
  std::string text = Scrape();
  // Each device's counters read 0 from its first report.
  EXPECT_EQ(Sample(text, R"(primserve_device_requests_total{device="1"})"), 0);
  EXPECT_EQ(Sample(text, R"(primserve_device_kernel_seconds_total{device="1"})"), 0);
  EXPECT_EQ(Sample(text, R"(primserve_device_up{device="1"})"), 1);

  metrics_.DeviceBatchDone(0, 3, 3000, absl::Milliseconds(250));
  metrics_.DeviceBatchDone(0, 1, 1000, absl::Milliseconds(250));
  metrics_.DeviceBatchDone(1, 5, 40, absl::Milliseconds(100));
  metrics_.SetDeviceUp(1, false);
  text = Scrape();
  EXPECT_EQ(Sample(text, R"(primserve_device_requests_total{device="0"})"), 4);
  EXPECT_EQ(Sample(text, R"(primserve_device_bytes_total{device="0"})"), 4000);
  EXPECT_DOUBLE_EQ(Sample(text, R"(primserve_device_kernel_seconds_total{device="0"})"), 0.5);
  EXPECT_EQ(Sample(text, R"(primserve_device_requests_total{device="1"})"), 5);
  EXPECT_EQ(Sample(text, R"(primserve_device_bytes_total{device="1"})"), 40);
  EXPECT_EQ(Sample(text, R"(primserve_device_up{device="0"})"), 1);
  EXPECT_EQ(Sample(text, R"(primserve_device_up{device="1"})"), 0);
  EXPECT_NE(text.find("# TYPE primserve_device_up gauge\n"), std::string::npos);
}

TEST_F(MetricsTest, ConcurrentFirstUseCountsEveryRequest) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this] {
      for (int i = 0; i < kPerThread; ++i) {
        metrics_.RequestDone(Rpc::kReduce, 3, 6, absl::StatusCode::kInvalidArgument, absl::Microseconds(1),
                             1, 0, 0);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::string text = Scrape();
  EXPECT_EQ(Sample(text,
                   R"(primserve_requests_total{code="INVALID_ARGUMENT",dtype="FLOAT64",op="MIN",rpc="Reduce"})"),
            kThreads * kPerThread);
  EXPECT_EQ(Sample(text, R"(primserve_request_duration_seconds_count{rpc="Reduce",stage="total"})"),
            kThreads * kPerThread);
}

}  // namespace
}  // namespace primserve
