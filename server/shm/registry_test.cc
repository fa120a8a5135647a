#include "server/shm/registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace primserve::shm {
namespace {

using ::testing::HasSubstr;

// A POSIX shared-memory object of `size` bytes holding 0, 1, 2... (mod 256),
// removed at the end of the test.
class ShmObject {
 public:
  explicit ShmObject(uint64_t size) {
    static int count = 0;
    key_ = absl::StrCat("/primserve_registry_test_", getpid(), "_", count++);
    fd_ = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd_, 0) << std::strerror(errno);
    Resize(size);
    for (uint64_t i = 0; i < size; ++i) {
      const char byte = static_cast<char>(i);
      EXPECT_EQ(pwrite(fd_, &byte, 1, static_cast<off_t>(i)), 1);
    }
  }
  ~ShmObject() {
    close(fd_);
    shm_unlink(key_.c_str());
  }
  void Resize(uint64_t size) { EXPECT_EQ(ftruncate(fd_, static_cast<off_t>(size)), 0); }
  const std::string& key() const { return key_; }

 private:
  std::string key_;
  int fd_ = -1;
};

RegistryOptions Limits(uint64_t max_regions, uint64_t max_bytes) {
  RegistryOptions options;
  options.max_regions = max_regions;
  options.max_bytes = max_bytes;
  return options;
}

TEST(RegistryTest, RegistersListsAndUnregisters) {
  ShmObject object(8192);
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(registry.RegisterSystem("b", object.key(), 4100, 4000).ok());
  ASSERT_TRUE(registry.RegisterSystem("a", object.key(), 0, 8192).ok());
  absl::StatusOr<std::vector<RegionInfo>> all = registry.List("");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "a");
  const RegionInfo& b = (*all)[1];
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.kind, "system");
  EXPECT_EQ(b.key, object.key());
  EXPECT_EQ(b.offset, 4100u);
  EXPECT_EQ(b.byte_size, 4000u);
  EXPECT_EQ(b.requests_in_flight, 0u);

  // Region b starts at byte 4100 of the object (not page-aligned).
  absl::StatusOr<Lease> lease = registry.Acquire("b");
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::StatusOr<char*> data = lease->Range(4, 4, 4, "input.shm");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(static_cast<unsigned char>((*data)[0]), (4100 + 4) % 256);
  EXPECT_EQ(registry.List("b")->front().requests_in_flight, 1u);

  EXPECT_TRUE(registry.Unregister("a").ok());
  EXPECT_EQ(registry.List("").value().size(), 1u);
  EXPECT_EQ(registry.Unregister("a").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.List("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.Unregister("").ok());
  EXPECT_TRUE(registry.List("").value().empty());
}

TEST(RegistryTest, RefusesBadRegistrations) {
  ShmObject object(4096);
  Registry registry(RegistryOptions{});
  absl::Status missing = registry.RegisterSystem("r", "/primserve_no_such_object", 0, 16);
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.message(), HasSubstr("No such file or directory"));
  absl::Status small = registry.RegisterSystem("r", object.key(), 4000, 100);
  EXPECT_EQ(small.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(small.message(), HasSubstr("has 4096 bytes; the region needs [4000, 4100)"));
  EXPECT_EQ(registry.RegisterSystem("r", object.key(), std::numeric_limits<uint64_t>::max(), 2)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterSystem("r", object.key(), 0, 0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterSystem("", object.key(), 0, 8).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterSystem("r", "", 0, 8).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 0, 4096).ok());
  EXPECT_EQ(registry.RegisterSystem("r", object.key(), 0, 8).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.Acquire("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(RegistryTest, EnforcesItsLimits) {
  ShmObject object(4096);
  Registry registry(Limits(2, 3000));
  ASSERT_TRUE(registry.RegisterSystem("a", object.key(), 0, 1000).ok());
  absl::Status bytes = registry.RegisterSystem("b", object.key(), 0, 2001);
  EXPECT_EQ(bytes.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(bytes.message(), HasSubstr("--max_shared_memory_bytes"));
  ASSERT_TRUE(registry.RegisterSystem("b", object.key(), 0, 2000).ok());
  absl::Status regions = registry.RegisterSystem("c", object.key(), 0, 1);
  EXPECT_EQ(regions.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(regions.message(), HasSubstr("--max_shared_memory_regions"));
  ASSERT_TRUE(registry.Unregister("a").ok());
  EXPECT_TRUE(registry.RegisterSystem("c", object.key(), 0, 1).ok());
}

TEST(RegistryTest, AnUnregisteredRegionStaysMappedForItsLeases) {
  ShmObject object(4096);
  Registry registry(Limits(1, 1 << 20));
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 0, 4096).ok());
  {
    absl::StatusOr<Lease> lease = registry.Acquire("r");
    ASSERT_TRUE(lease.ok());
    ASSERT_TRUE(registry.Unregister("r").ok());
    // The name is gone at once...
    EXPECT_EQ(registry.Acquire("r").status().code(), absl::StatusCode::kNotFound);
    // ...the memory stays readable and writable, and still counts.
    char* data = lease->Range(0, 4096, 1, "x").value();
    EXPECT_EQ(data[7], 7);
    data[7] = 70;
    EXPECT_EQ(registry.RegisterSystem("s", object.key(), 0, 8).code(),
              absl::StatusCode::kResourceExhausted);
  }
  // The last lease unmapped it.
  EXPECT_TRUE(registry.RegisterSystem("s", object.key(), 0, 8).ok());
  EXPECT_EQ(registry.Acquire("s").value().Range(7, 1, 1, "x").value()[0], 70);
}

// Records what it is asked to pin; refuses regions named in `refuse`.
class PinningBackend final : public ExecutionBackend {
 public:
  std::string name() const override { return "pinning"; }
  void Execute(std::vector<std::unique_ptr<Task>>) override {}
  absl::Status PinHostMemory(void* data, size_t bytes) override {
    if (bytes == refuse_bytes) return absl::InternalError("no");
    pinned.push_back(data);
    return absl::OkStatus();
  }
  void UnpinHostMemory(void* data) override { unpinned.push_back(data); }

  size_t refuse_bytes = 0;
  std::vector<void*> pinned, unpinned;
};

TEST(RegistryTest, RegionsArePinnedWhileMappedAndServeUnpinnedIfPinningFails) {
  ShmObject object(8192);
  PinningBackend backend;
  backend.refuse_bytes = 100;
  Registry registry(RegistryOptions{}, &backend);
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 0, 8192).ok());
  ASSERT_TRUE(registry.RegisterSystem("refused", object.key(), 0, 100).ok());
  ASSERT_EQ(backend.pinned.size(), 1u);
  char* data = registry.Acquire("r").value().Range(0, 8192, 1, "x").value();
  EXPECT_EQ(backend.pinned[0], data);
  EXPECT_TRUE(registry.Acquire("refused").ok());
  {
    absl::StatusOr<Lease> lease = registry.Acquire("r");
    ASSERT_TRUE(registry.Unregister("r").ok());
    EXPECT_TRUE(backend.unpinned.empty()) << "unpinned under a lease";
  }
  EXPECT_EQ(backend.unpinned, std::vector<void*>{data});
  ASSERT_TRUE(registry.Unregister("").ok());
  EXPECT_EQ(backend.unpinned.size(), 1u) << "unpinned what was never pinned";
}

// Opens "IPC handles" as host buffers (the handle's first byte says how
// many bytes the allocation has, in KiB; 0xFF fails to open), and records
// what it opens, closes and copies.
class IpcBackend final : public ExecutionBackend {
 public:
  std::string name() const override { return "ipc"; }
  void Execute(std::vector<std::unique_ptr<Task>>) override {}
  absl::StatusOr<char*> OpenIpcMemory(absl::string_view raw_handle, int device,
                                      uint64_t bytes) override {
    if (static_cast<unsigned char>(raw_handle[0]) == 0xFF) {
      return absl::FailedPreconditionError("cudaIpcOpenMemHandle: invalid device context");
    }
    if (device != 0) return absl::InvalidArgumentError("device_id 1 is not served");
    if (bytes > static_cast<uint64_t>(raw_handle[0]) * 1024) {
      return absl::InvalidArgumentError("byte_size is past the end of the exported allocation");
    }
    memory.emplace_back(new char[bytes]());
    opened.push_back(memory.back().get());
    return memory.back().get();
  }
  void CloseIpcMemory(char* data) override { closed.push_back(data); }
  absl::Status CopyToIpcMemory(char* to, const char* from, size_t bytes) override {
    ++copies;
    std::memcpy(to, from, bytes);
    return absl::OkStatus();
  }

  std::vector<std::unique_ptr<char[]>> memory;
  std::vector<char*> opened, closed;
  int copies = 0;
};

std::string Handle(unsigned char first) {
  std::string handle(kCudaIpcHandleBytes, '\x5a');
  handle[0] = static_cast<char>(first);
  return handle;
}

TEST(RegistryTest, CudaRegionsOpenThroughTheBackendAndCloseAfterTheirLastLease) {
  IpcBackend backend;
  Registry registry(Limits(2, 10000), &backend);
  ASSERT_TRUE(registry.RegisterCuda("g", Handle(8), 0, 8192).ok());
  ASSERT_EQ(backend.opened.size(), 1u);
  absl::StatusOr<std::vector<RegionInfo>> list = registry.List("g");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->front().kind, "cuda");
  EXPECT_EQ(list->front().key, "");
  EXPECT_EQ(list->front().device, 0);
  EXPECT_EQ(list->front().byte_size, 8192u);
  EXPECT_EQ(registry.RegisterCuda("g", Handle(8), 0, 8).code(), absl::StatusCode::kAlreadyExists);
  // The limits count CUDA regions as system ones: 8192 of 10000 bytes taken.
  absl::Status too_big = registry.RegisterCuda("h", Handle(8), 0, 4096);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted) << too_big;
  EXPECT_EQ(backend.opened.size(), 1u) << "opened a handle past the limits";
  {
    absl::StatusOr<Lease> lease = registry.Acquire("g");
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(lease->device(), 0);
    EXPECT_TRUE(lease->CheckObjectSize().ok());
    absl::StatusOr<char*> data = lease->Range(8, 16, 8, "output_location.values");
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(*data, backend.opened[0] + 8);
    EXPECT_EQ(lease->Range(8192, 8, 8, "x").status().code(), absl::StatusCode::kInvalidArgument);
    const char answer[] = "answered";
    ASSERT_TRUE(lease->Write(*data, answer, 8).ok());
    EXPECT_EQ(backend.copies, 1) << "a write into a CUDA region must go through the backend";
    EXPECT_EQ(std::string(backend.opened[0] + 8, 8), "answered");
    ASSERT_TRUE(registry.Unregister("g").ok());
    EXPECT_EQ(registry.Acquire("g").status().code(), absl::StatusCode::kNotFound);
    EXPECT_TRUE(backend.closed.empty()) << "closed under a lease";
  }
  EXPECT_EQ(backend.closed, std::vector<char*>{backend.opened[0]});
  // Its bytes are given back: the next one fits.
  EXPECT_TRUE(registry.RegisterCuda("h", Handle(8), 0, 8192).ok());
}

TEST(RegistryTest, BadCudaRegistrationsAreRefusedWithTheirCodes) {
  IpcBackend backend;
  Registry registry(RegistryOptions{}, &backend);
  EXPECT_EQ(registry.RegisterCuda("", Handle(8), 0, 8).code(), absl::StatusCode::kInvalidArgument);
  absl::Status short_handle = registry.RegisterCuda("g", std::string(63, 'x'), 0, 8);
  EXPECT_EQ(short_handle.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_handle.message(), HasSubstr("raw_handle has 63 bytes"));
  EXPECT_EQ(registry.RegisterCuda("g", std::string(65, 'x'), 0, 8).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterCuda("g", Handle(8), -1, 8).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterCuda("g", Handle(8), 0, 0).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status failed = registry.RegisterCuda("g", Handle(0xFF), 0, 8);
  EXPECT_EQ(failed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(failed.message(), HasSubstr("cudaIpcOpenMemHandle"));
  EXPECT_EQ(registry.RegisterCuda("g", Handle(8), 1, 8).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.RegisterCuda("g", Handle(1), 0, 1025).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry.List("").value().empty()) << "a refused registration left a region";
  // The next good one is taken.
  EXPECT_TRUE(registry.RegisterCuda("g", Handle(1), 0, 1024).ok());
  // Without a GPU backend, every CUDA region is refused.
  PinningBackend plain;
  Registry no_gpu(RegistryOptions{}, &plain);
  absl::Status refused = no_gpu.RegisterCuda("g", Handle(8), 0, 8);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("--backend=cuda"));
  EXPECT_EQ(Registry(RegistryOptions{}).RegisterCuda("g", Handle(8), 0, 8).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RegistryTest, ATruncatedObjectIsRefusedNotTouched) {
  ShmObject object(8192);
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 0, 8192).ok());
  absl::StatusOr<Lease> lease = registry.Acquire("r");
  ASSERT_TRUE(lease.ok());
  object.Resize(100);
  EXPECT_EQ(lease->CheckObjectSize().code(), absl::StatusCode::kFailedPrecondition);
  absl::Status truncated = registry.Acquire("r").status();
  EXPECT_EQ(truncated.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(truncated.message(),
              HasSubstr("region 'r': shared-memory object " + object.key() + " has 100 bytes"));
  object.Resize(8192);
  EXPECT_TRUE(registry.Acquire("r").ok());
}

TEST(RegistryTest, RefusesRangesOutsideTheRegionOrMisaligned) {
  ShmObject object(4096);
  Registry registry(RegistryOptions{});
  ASSERT_TRUE(registry.RegisterSystem("r", object.key(), 0, 1024).ok());
  ASSERT_TRUE(registry.RegisterSystem("odd", object.key(), 2, 1024).ok());
  Lease r = registry.Acquire("r").value();
  EXPECT_TRUE(r.Range(1016, 8, 8, "f").ok());
  EXPECT_TRUE(r.Range(1024, 0, 8, "f").ok());
  const auto code = [](const absl::StatusOr<char*>& s) { return s.status().code(); };
  EXPECT_EQ(code(r.Range(1020, 8, 4, "f")), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(r.Range(1025, 0, 4, "f")), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(r.Range(8, std::numeric_limits<uint64_t>::max() - 4, 4, "f")),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<char*> partial = r.Range(0, 6, 4, "input.shm");
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(partial.status().message(),
              HasSubstr("input.shm.byte_size 6 is not a multiple of the 4-byte element"));
  EXPECT_THAT(r.Range(2, 4, 4, "input.shm").status().message(),
              HasSubstr("input.shm.offset 2 is not aligned to the 4-byte element"));
  // Offset 0 of a region that starts at byte 2 of its object is not 4-byte
  // aligned in memory; offset 2 is.
  Lease odd = registry.Acquire("odd").value();
  EXPECT_EQ(code(odd.Range(0, 4, 4, "f")), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(odd.Range(0, 4, 2, "f").ok());
}

// A region whose client went away without unregistering it is dropped
// after options.idle unused, and reported; one in use (leased) stays until
// its last request ends, and the idle time counts from then.
TEST(RegistryTest, DropsRegionsUnusedForTheIdleTime) {
  ShmObject object(4096);
  absl::Mutex mu;
  std::vector<std::string> dropped;
  RegistryOptions options;
  options.idle = absl::Seconds(1);  // far longer than the steps between the calls below
  options.dropped_idle = [&](const std::string& name) {
    absl::MutexLock lock(&mu);
    dropped.push_back(name);
  };
  Registry registry(options);
  ASSERT_TRUE(registry.RegisterSystem("forgotten", object.key(), 0, 4096).ok());
  ASSERT_TRUE(registry.RegisterSystem("in use", object.key(), 0, 4096).ok());
  std::optional<absl::StatusOr<Lease>> lease(registry.Acquire("in use"));
  ASSERT_TRUE(lease->ok());
  auto dropped_now = [&] {
    absl::MutexLock lock(&mu);
    return dropped;
  };
  // Bounded by the time a loaded machine may take, not by luck: dropping
  // "forgotten" takes 1 s idle plus one 250 ms expiry period.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (dropped_now().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(dropped_now(), std::vector<std::string>{"forgotten"});
  EXPECT_EQ(registry.List("forgotten").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Acquire("forgotten").status().code(), absl::StatusCode::kNotFound);
  // Leased all along, past the idle time: still registered.
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_TRUE(registry.List("in use").ok());
  lease.reset();  // its request ends: the idle time starts
  while (dropped_now().size() < 2 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(dropped_now(), (std::vector<std::string>{"forgotten", "in use"}));
  EXPECT_EQ(registry.List("").value().size(), 0u);
  // The name is free again.
  EXPECT_TRUE(registry.RegisterSystem("forgotten", object.key(), 0, 4096).ok());
}

TEST(RegistryTest, RegionsNeverExpireWithAnInfiniteIdleTime) {
  ShmObject object(4096);
  RegistryOptions options;
  options.idle = absl::InfiniteDuration();
  options.dropped_idle = [](const std::string& name) { ADD_FAILURE() << name << " dropped"; };
  Registry registry(options);
  ASSERT_TRUE(registry.RegisterSystem("kept", object.key(), 0, 4096).ok());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(registry.List("kept").ok());
}

}  // namespace
}  // namespace primserve::shm
