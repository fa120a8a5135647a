// End to end with a real Prometheus: starts the primserve binary (CPU backend)
// and Debian's /usr/bin/prometheus scraping it every second with
// deploy/alerts.yml loaded, sends known requests with the client library,
// then asks Prometheus's HTTP API whether every counter and histogram moved by
// exactly what was sent, and whether every alert rule evaluates cleanly.
//
// Usage: prometheus_test <primserve binary> <alerts.yml>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/child_process.h"
#include "tests/http_testing.h"

namespace primserve {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";

std::string g_primserve;    // argv[1]
std::string g_alerts_file;  // argv[2]

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// The number after `prefix` in `text`; 0 when absent.
int NumberAfter(const std::string& text, const std::string& prefix) {
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return 0;
  int number = 0;
  const size_t start = at + prefix.size();
  const size_t end = text.find_first_not_of("0123456789", start);
  return absl::SimpleAtoi(text.substr(start, end - start), &number) ? number : 0;
}

// A port nobody listens on right now. Prometheus cannot report an ephemeral
// port, so it gets one picked here.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

class PrometheusTest : public ::testing::Test {
 protected:
  // Data of Prometheus's answer to GET `target` (JSON "data"), or why not.
  absl::StatusOr<google::protobuf::Value> ApiData(const std::string& target) {
    absl::StatusOr<testing::HttpResponse> response = testing::HttpGet(prometheus_port_, target);
    if (!response.ok()) return response.status();
    google::protobuf::Struct json;
    if (!google::protobuf::util::JsonStringToMessage(response->body, &json).ok() ||
        json.fields().at("status").string_value() != "success") {
      return absl::InternalError(absl::StrCat(target, " answered ", response->status, ": ",
                                              response->body.substr(0, 500)));
    }
    return json.fields().at("data");
  }

  // The values of an instant PromQL query's result vector.
  absl::StatusOr<std::vector<double>> Query(const std::string& promql) {
    absl::StatusOr<google::protobuf::Value> data =
        ApiData(absl::StrCat("/api/v1/query?query=", testing::UrlEncode(promql)));
    if (!data.ok()) return data.status();
    std::vector<double> values;
    for (const google::protobuf::Value& sample :
         data->struct_value().fields().at("result").list_value().values()) {
      // "value": [<unix time>, "<number>"]
      const std::string& text =
          sample.struct_value().fields().at("value").list_value().values(1).string_value();
      double value = 0;
      if (!absl::SimpleAtod(text, &value)) return absl::InternalError("bad sample " + text);
      values.push_back(value);
    }
    return values;
  }

  // The single value of `promql`; NaN (failing every comparison) when the
  // query fails or has no or several results.
  double QueryOne(const std::string& promql) {
    absl::StatusOr<std::vector<double>> values = Query(promql);
    EXPECT_TRUE(values.ok()) << promql << ": " << values.status();
    if (!values.ok()) return NAN;
    EXPECT_EQ(values->size(), 1u) << promql;
    return values->size() == 1 ? values->front() : NAN;
  }

  int prometheus_port_ = 0;
};

TEST_F(PrometheusTest, CountersAndHistogramsMoveByWhatWasSent) {
  if (access(kPrometheus, X_OK) != 0) {
    GTEST_SKIP() << kPrometheus << " is not installed (tools/setup.sh installs it)";
  }
  const std::string dir = TempDir();

  // primserve on ephemeral ports, learned from its log.
  ChildProcess server({g_primserve, "--backend=cpu", "--host=127.0.0.1", "--port=0",
                "--metrics_host=127.0.0.1", "--metrics_port=0", "--max_request_elements=1000",
                "--shutdown_grace_seconds=1"},
               dir + "/primserve.log");
  ASSERT_TRUE(server.started());
  int grpc_port = 0, metrics_port = 0;
  for (const absl::Time give_up = absl::Now() + absl::Seconds(20);
       (grpc_port == 0 || metrics_port == 0) && absl::Now() < give_up;
       absl::SleepFor(absl::Milliseconds(50))) {
    ASSERT_TRUE(server.running()) << server.log();
    grpc_port = NumberAfter(server.log(), "primserve listening on 127.0.0.1:");
    metrics_port = NumberAfter(server.log(), "metrics at http://127.0.0.1:");
  }
  ASSERT_NE(grpc_port, 0) << server.log();
  ASSERT_NE(metrics_port, 0) << server.log();

  prometheus_port_ = FreePort();
  ASSERT_NE(prometheus_port_, 0);
  const std::string config = dir + "/prometheus.yml";
  std::ofstream(config) << absl::StrFormat(
      "global:\n"
      "  scrape_interval: 1s\n"
      "  evaluation_interval: 1s\n"
      "rule_files: ['%s']\n"
      "scrape_configs:\n"
      "  - job_name: primserve\n"
      "    static_configs:\n"
      "      - targets: ['127.0.0.1:%d']\n",
      std::filesystem::absolute(g_alerts_file).string(), metrics_port);
  ChildProcess prometheus({kPrometheus, "--config.file=" + config,
                    "--storage.tsdb.path=" + dir + "/prometheus-data",
                    absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port_)},
                   dir + "/prometheus.log");
  ASSERT_TRUE(prometheus.started());

  // Known traffic: Scans from several threads at once (so some batch), 2
  // Reduces, 3 malformed Scans and 1 over --max_request_elements.
  constexpr int kThreads = 4, kScansPerThread = 5, kScanElements = 100;
  constexpr int kScans = kThreads * kScansPerThread, kReduces = 2, kInvalid = 3;
  PrimitivesClient client(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", grpc_port)),
                          absl::Seconds(30));
  std::atomic<uint64_t> bytes_in{0}, bytes_out{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      const std::vector<int32_t> input(kScanElements, 1);
      v1::ScanRequest request;
      *request.mutable_input() = PackArray<int32_t>(input);
      request.set_op(v1::SUM);
      for (int i = 0; i < kScansPerThread; ++i) {
        absl::StatusOr<v1::ScanResponse> response = client.Call(request);
        if (!response.ok()) ++failures;
        bytes_in += request.ByteSizeLong();
        if (response.ok()) bytes_out += response->ByteSizeLong();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(failures, 0);
  for (int i = 0; i < kReduces; ++i) {
    v1::ReduceRequest request;
    *request.mutable_input() = PackArray<double>(std::vector<double>{1.5, -2, 8});
    request.set_op(v1::MAX);
    absl::StatusOr<v1::ReduceResponse> response = client.Call(request);
    ASSERT_TRUE(response.ok()) << response.status();
    bytes_in += request.ByteSizeLong();
    bytes_out += response->ByteSizeLong();
  }
  for (int i = 0; i < kInvalid; ++i) {
    v1::ScanRequest request;  // no op
    *request.mutable_input() = PackArray<int32_t>(std::vector<int32_t>{1, 2, 3});
    EXPECT_EQ(client.Call(request).status().code(), absl::StatusCode::kInvalidArgument);
    bytes_in += request.ByteSizeLong();
  }
  v1::ScanRequest too_large;
  *too_large.mutable_input() = PackArray<int32_t>(std::vector<int32_t>(2000, 1));
  too_large.set_op(v1::SUM);
  EXPECT_EQ(client.Call(too_large).status().code(), absl::StatusCode::kResourceExhausted);
  bytes_in += too_large.ByteSizeLong();
  const double sent_by = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());

  // Every series of one scrape shares its timestamp: wait for a scrape that
  // began after the last answer, so the checks below see final values.
  bool scraped_after = false;
  for (const absl::Time give_up = absl::Now() + absl::Seconds(40);
       !scraped_after && absl::Now() < give_up; absl::SleepFor(absl::Milliseconds(250))) {
    ASSERT_TRUE(prometheus.running()) << prometheus.log();
    absl::StatusOr<std::vector<double>> at = Query("timestamp(primserve_build_info)");
    scraped_after = at.ok() && at->size() == 1 && at->front() > sent_by;
  }
  ASSERT_TRUE(scraped_after) << "no scrape after the requests\n--- prometheus log:\n"
                             << prometheus.log();

  EXPECT_EQ(QueryOne(R"(up{job="primserve"})"), 1);
  EXPECT_EQ(QueryOne(R"(primserve_build_info{backend="cpu",device="cpu"})"), 1);
  EXPECT_EQ(
      QueryOne(R"(primserve_requests_total{rpc="Scan",op="SUM",dtype="INT32",code="OK"})"),
      kScans);
  EXPECT_EQ(
      QueryOne(R"(primserve_requests_total{rpc="Reduce",op="MAX",dtype="FLOAT64",code="OK"})"),
      kReduces);
  EXPECT_EQ(QueryOne(R"(sum(primserve_requests_total{rpc="Scan",code="INVALID_ARGUMENT"}))"),
            kInvalid);
  EXPECT_EQ(QueryOne(R"(sum(primserve_requests_total{rpc="Scan",code="RESOURCE_EXHAUSTED"}))"),
            1);
  EXPECT_EQ(QueryOne("sum(primserve_requests_total)"), kScans + kReduces + kInvalid + 1);
  EXPECT_EQ(QueryOne(R"(primserve_rejections_total{reason="invalid"})"), kInvalid);
  EXPECT_EQ(QueryOne(R"(primserve_rejections_total{reason="too_large"})"), 1);
  EXPECT_EQ(QueryOne(R"(sum(primserve_rejections_total{reason!~"invalid|too_large"}))"), 0);
  EXPECT_EQ(QueryOne(R"(primserve_payload_bytes_total{direction="in"})"),
            static_cast<double>(bytes_in.load()));
  EXPECT_EQ(QueryOne(R"(primserve_payload_bytes_total{direction="out"})"),
            static_cast<double>(bytes_out.load()));
  EXPECT_EQ(QueryOne(R"(primserve_elements_total{rpc="Scan"})"), kScans * kScanElements);
  EXPECT_EQ(QueryOne(R"(primserve_elements_total{rpc="Reduce"})"), kReduces * 3);

  // Every answered request has a total; only those that reached the batcher
  // (the valid ones) have a queue wait and a compute time.
  const int answered = kScans + kReduces + kInvalid + 1, ran = kScans + kReduces;
  EXPECT_EQ(QueryOne(R"(sum(primserve_request_duration_seconds_count{stage="total"}))"),
            answered);
  EXPECT_EQ(QueryOne(R"(sum(primserve_request_duration_seconds_count{stage="queue"}))"), ran);
  EXPECT_EQ(QueryOne(R"(sum(primserve_request_duration_seconds_count{stage="compute"}))"), ran);
  EXPECT_EQ(QueryOne(R"(primserve_request_duration_seconds_count{rpc="Reduce",stage="total"})"),
            kReduces);
  const double p99 = QueryOne(
      R"(histogram_quantile(0.99, sum by (le) (primserve_request_duration_seconds_bucket{rpc="Scan",stage="total"})))");
  EXPECT_GT(p99, 0);
  EXPECT_LE(p99, 10.48576) << "above the highest finite bucket";

  EXPECT_EQ(QueryOne("primserve_batch_size_requests_sum"), ran);
  EXPECT_EQ(QueryOne("primserve_batch_size_elements_sum"), kScans * kScanElements + kReduces * 3);
  const double batches = QueryOne("primserve_batches_total");
  EXPECT_EQ(QueryOne("primserve_batch_size_requests_count"), batches);
  EXPECT_GE(batches, 1);
  EXPECT_LE(batches, ran);
  EXPECT_EQ(QueryOne("primserve_queue_depth"), 0);
  EXPECT_EQ(QueryOne("primserve_queue_capacity"), 4096);
  EXPECT_EQ(QueryOne("primserve_requests_in_flight"), 0);

  // deploy/alerts.yml evaluates against the real series without errors (a
  // rule's health is "err" when its query fails, e.g. on a label clash).
  absl::StatusOr<google::protobuf::Value> rules = ApiData("/api/v1/rules");
  ASSERT_TRUE(rules.ok()) << rules.status();
  int checked = 0;
  for (const google::protobuf::Value& group :
       rules->struct_value().fields().at("groups").list_value().values()) {
    for (const google::protobuf::Value& rule :
         group.struct_value().fields().at("rules").list_value().values()) {
      const auto& fields = rule.struct_value().fields();
      EXPECT_NE(fields.at("health").string_value(), "err")
          << fields.at("name").string_value() << ": " << fields.at("lastError").string_value();
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << "alerts.yml loaded no rules";
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <primserve binary> <alerts.yml>\n", argv[0]);
    return 2;
  }
  primserve::g_primserve = argv[1];
  primserve::g_alerts_file = argv[2];
  return RUN_ALL_TESTS();
}
