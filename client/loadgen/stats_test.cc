// A level's accounting: only the calls that end inside the measurement
// window count, failures by status code, and nearest-rank percentiles.
#include "client/loadgen/stats.h"

#include <cmath>

#include "gtest/gtest.h"

namespace primserve {
namespace {

CallOutcome Ok(uint64_t bytes) {
  CallOutcome outcome;
  outcome.bytes = bytes;
  return outcome;
}

TEST(RecorderTest, CountsOnlyCallsEndingInTheWindow) {
  const absl::Time start = absl::UnixEpoch();
  Recorder recorder(start, absl::Seconds(1), absl::Seconds(2));
  EXPECT_EQ(recorder.end(), start + absl::Seconds(3));
  recorder.Record(start, start + absl::Milliseconds(999), Ok(10));    // warmup
  recorder.Record(start, start + absl::Seconds(1), Ok(20));           // first instant
  recorder.Record(start + absl::Seconds(2), start + absl::Seconds(3), Ok(40));  // window's end
  CallOutcome mismatch = Ok(80);
  mismatch.verified = mismatch.mismatch = true;
  recorder.Record(start, start + absl::Seconds(2), mismatch);
  CallOutcome failed;
  failed.status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "full");
  recorder.Record(start, start + absl::Seconds(2), failed);
  recorder.RecordNotSent(start + absl::Seconds(2));
  recorder.RecordNotSent(start);  // warmup

  const LevelStats stats = recorder.Take();
  ASSERT_EQ(stats.latencies_ms.size(), 1u);
  EXPECT_EQ(stats.latencies_ms[0], 1000);
  EXPECT_EQ(stats.bytes, 20u);
  EXPECT_EQ(stats.verified, 1u);
  EXPECT_EQ(stats.mismatches, 1u);
  EXPECT_EQ(stats.errors, (std::map<std::string, uint64_t>{{"NOT_SENT", 1},
                                                           {"RESOURCE_EXHAUSTED", 1}}));
  EXPECT_EQ(stats.failures(), 3u);
}

TEST(SummarizeTest, RatesAndNearestRankPercentiles) {
  LevelStats stats;
  for (int ms = 100; ms >= 1; --ms) stats.latencies_ms.push_back(ms);
  stats.bytes = 4'000'000'000;
  const Summary summary = Summarize(stats, absl::Seconds(2), 1000);
  EXPECT_DOUBLE_EQ(summary.requests_per_second, 50);
  EXPECT_DOUBLE_EQ(summary.items_per_second, 50'000);
  EXPECT_DOUBLE_EQ(summary.gigabytes_per_second, 2);
  EXPECT_EQ(summary.p50_ms, 50);
  EXPECT_EQ(summary.p90_ms, 90);
  EXPECT_EQ(summary.p99_ms, 99);
}

TEST(SummarizeTest, NoOkCallsHaveNoPercentiles) {
  LevelStats stats;
  const Summary summary = Summarize(stats, absl::Seconds(1), 1000);
  EXPECT_EQ(summary.requests_per_second, 0);
  EXPECT_TRUE(std::isnan(summary.p50_ms));
  EXPECT_TRUE(std::isnan(summary.p99_ms));
}

}  // namespace
}  // namespace primserve
