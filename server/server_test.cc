#include "server/server.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"

namespace primserve {
namespace {

using ::testing::HasSubstr;

TEST(ParseChannelArgs, ReadsNameValuePairs) {
  absl::StatusOr<std::map<std::string, int>> args =
      ParseChannelArgs("grpc.http2.max_frame_size=16777215,grpc.http2.bdp_probe=0");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(*args, (std::map<std::string, int>{{"grpc.http2.max_frame_size", 16777215},
                                               {"grpc.http2.bdp_probe", 0}}));
  EXPECT_TRUE(ParseChannelArgs("").value().empty());
}

TEST(ParseChannelArgs, RefusesWhatIsNotNameEqualsInteger) {
  for (const char* bad : {"grpc.http2.bdp_probe", "=1", "grpc.x=one", "grpc.x=1.5",
                          "grpc.x=99999999999"}) {
    absl::StatusOr<std::map<std::string, int>> args = ParseChannelArgs(bad);
    EXPECT_EQ(args.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(args.status().message(), HasSubstr(bad));
  }
}

TEST(PrimServer, ServesWithChannelArgsSet) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.grpc_channel_args = {{"grpc.http2.max_frame_size", 16777215},
                               {"grpc.http2.bdp_probe", 0}};
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::make_unique<CpuBackend>());
  ASSERT_TRUE(server.ok()) << server.status();
  PrimitivesClient client(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", (*server)->port())));
  const std::vector<int32_t> input(1 << 20, 1);
  absl::StatusOr<std::vector<int32_t>> scanned =
      client.Scan<int32_t>(absl::MakeConstSpan(input), Op::kSum);
  ASSERT_TRUE(scanned.ok()) << scanned.status();
  EXPECT_EQ(scanned->back(), 1 << 20);
}

}  // namespace
}  // namespace primserve
