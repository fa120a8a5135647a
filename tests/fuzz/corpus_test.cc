// Replays the checked-in seed corpus through the request path in the plain
// and sanitizer builds, and checks that the seeds cover every RPC with both
// accepted and rejected requests, so the fuzzer starts from every branch.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fuzz/request_path.h"

namespace primserve::fuzz {
namespace {

constexpr char kCorpus[] = "tests/fuzz/corpus";

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(CorpusTest, EverySeedParsesAndEveryRpcIsAcceptedAndRejected) {
  std::vector<int> accepted(kNumRpcs), rejected(kNumRpcs);
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus)) {
    const std::string bytes = ReadFile(entry.path());
    const Outcome outcome = RunRequestBytes(absl::MakeConstSpan(
        reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    EXPECT_TRUE(outcome.parsed) << entry.path();
    ++(outcome.status.ok() ? accepted : rejected)[outcome.rpc];
    ++seeds;
  }
  for (int rpc = 0; rpc < kNumRpcs; ++rpc) {
    EXPECT_GT(accepted[rpc], 0) << "no accepted seed for RPC " << rpc;
    EXPECT_GT(rejected[rpc], 0) << "no rejected seed for RPC " << rpc;
  }
  std::printf("replayed %d seeds\n", seeds);
}

}  // namespace
}  // namespace primserve::fuzz
