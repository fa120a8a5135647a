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
  // What the seeds give the raw-buffer parser (RunRequestBytes checked each
  // of its parses against protobuf's and aborts on a difference).
  int two_payloads = 0, nested_payloads = 0, echo_payloads = 0, handed_over = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus)) {
    const std::string bytes = ReadFile(entry.path());
    const Outcome outcome = RunRequestBytes(absl::MakeConstSpan(
        reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    EXPECT_TRUE(outcome.parsed) << entry.path();
    EXPECT_TRUE(outcome.wire_request.accepted) << entry.path();
    EXPECT_GE(outcome.wire_request.slices, 1u);
    ++(outcome.status.ok() ? accepted : rejected)[RpcIndex(outcome.rpc)];
    if (outcome.wire_request.tokens && outcome.wire_request.payloads >= 2) ++two_payloads;
    if (outcome.wire_multiplex.tokens && outcome.wire_multiplex.payloads >= 2) ++nested_payloads;
    if (outcome.wire_echo.tokens && outcome.wire_echo.payloads >= 2) ++echo_payloads;
    if (outcome.wire_request.accepted && !outcome.wire_request.tokens) ++handed_over;
    ++seeds;
  }
  for (Rpc rpc : kAllRpcs) {
    EXPECT_GT(accepted[RpcIndex(rpc)], 0) << "no accepted seed for " << RpcName(rpc);
    EXPECT_GT(rejected[RpcIndex(rpc)], 0) << "no rejected seed for " << RpcName(rpc);
  }
  EXPECT_GT(two_payloads, 0) << "no seed with two payloads";
  EXPECT_GT(nested_payloads, 0) << "no Multiplex seed with two payloads";
  EXPECT_GT(echo_payloads, 0) << "no Echo seed with two payloads";
  EXPECT_GT(handed_over, 0) << "no seed handed to protobuf (a group)";
  std::printf("replayed %d seeds\n", seeds);
}

// The check RunRequestBytes makes is live: bytes protobuf rejects are
// rejected by the wire parser too, and the outcome says so.
TEST(CorpusTest, WireVerdictsAreReported) {
  const std::string truncated = std::string(1, 0) + "\x0a\x05\x08\x01";
  Outcome outcome = RunRequestBytes(absl::MakeConstSpan(
      reinterpret_cast<const uint8_t*>(truncated.data()), truncated.size()));
  EXPECT_FALSE(outcome.parsed);
  EXPECT_FALSE(outcome.wire_request.accepted);
  EXPECT_FALSE(outcome.wire_multiplex.accepted);
  const std::string group = std::string(1, 0) + "\x93\x03\x08\x01\x94\x03";
  outcome = RunRequestBytes(absl::MakeConstSpan(
      reinterpret_cast<const uint8_t*>(group.data()), group.size()));
  EXPECT_TRUE(outcome.parsed);
  EXPECT_TRUE(outcome.wire_request.accepted);
  EXPECT_FALSE(outcome.wire_request.tokens);
}

}  // namespace
}  // namespace primserve::fuzz
