// `primserve --backend=cpu` on a GPU machine leaves CUDA alone: the runtime
// (which loads the driver, libcuda, and makes a context holding device
// memory) is never initialized. The same binary with --backend=auto does load
// the driver there, which shows the check can see it. Needs a GPU (tagged
// "gpu"): without a driver there is nothing to load either way.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/child_process.h"

namespace primserve {
namespace {

std::string g_primserve;

// The memory map of `server` once it listens (empty if it never does).
std::string MapsOnceListening(ChildProcess& server) {
  for (const absl::Time give_up = absl::Now() + absl::Seconds(60);
       server.running() && absl::Now() < give_up; absl::SleepFor(absl::Milliseconds(20))) {
    if (server.log().find("primserve listening on") != std::string::npos) {
      return ReadFile(absl::StrCat("/proc/", server.pid(), "/maps"));
    }
  }
  return "";
}

std::string LogPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/primserve-", name, ".log");
}

TEST(CudaCpuBackendTest, CpuBackendNeverLoadsTheDriver) {
  for (const std::string backend : {"auto", "cpu"}) {
    SCOPED_TRACE(backend);
    ChildProcess server({g_primserve, absl::StrCat("--backend=", backend), "--host=127.0.0.1",
                         "--port=0", "--metrics_port=-1"},
                        LogPath(backend));
    ASSERT_TRUE(server.started());
    const std::string maps = MapsOnceListening(server);
    ASSERT_FALSE(maps.empty()) << server.log();
    const bool driver_loaded = maps.find("libcuda.so") != std::string::npos;
    EXPECT_EQ(driver_loaded, backend == "auto") << server.log();
  }
}

}  // namespace
}  // namespace primserve

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Bazel passes the binary; in a packed GPU bundle it sits beside the test.
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [PATH_TO_PRIMSERVE]\n", argv[0]);
    return 2;
  }
  const std::string self = argv[0];
  const size_t slash = self.rfind('/');
  primserve::g_primserve =
      argc == 2 ? argv[1] : (slash == std::string::npos ? "." : self.substr(0, slash)) + "/primserve";
  return RUN_ALL_TESTS();
}
