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
    ++(outcome.status.ok() ? accepted : rejected)[RpcIndex(outcome.rpc)];
    ++seeds;
  }
  for (Rpc rpc : kAllRpcs) {
    EXPECT_GT(accepted[RpcIndex(rpc)], 0) << "no accepted seed for " << RpcName(rpc);
    EXPECT_GT(rejected[RpcIndex(rpc)], 0) << "no rejected seed for " << RpcName(rpc);
  }
  std::printf("replayed %d seeds\n", seeds);
}

}  // namespace
}  // namespace primserve::fuzz
