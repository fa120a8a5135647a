#include "server/buffers/registry.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/buffers/request_buffers.h"
#include "server/cpu/cpu_backend.h"

namespace primserve::buffers {
namespace {

Limits SmallLimits() {
  Limits limits;
  limits.max_bytes = 1000;
  limits.max_bytes_per_caller = 600;
  limits.max_buffers_per_caller = 3;
  limits.idle = absl::InfiniteDuration();
  limits.location = "here:1";
  return limits;
}

class RegistryTest : public testing::Test {
 protected:
  CpuBackend backend_;
};

TEST_F(RegistryTest, CreateWriteReadFree) {
  Registry registry(SmallLimits(), &backend_, nullptr);
  absl::StatusOr<Info> info = registry.Create("a", "x", DType::kInt32, 10);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->length, 10u);
  EXPECT_EQ(info->device, -1);
  EXPECT_EQ(info->expires_in_seconds, 0);
  absl::StatusOr<Contents> contents = registry.Get("a", "x");
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->dtype, DType::kInt32);
  // Zeroed, then written and read back.
  std::vector<int32_t> read(10, 7);
  ASSERT_TRUE(contents->storage->Read(0, 40, reinterpret_cast<char*>(read.data())).ok());
  EXPECT_EQ(read, std::vector<int32_t>(10, 0));
  const int32_t values[] = {1, 2, 3};
  ASSERT_TRUE(contents->storage->Write(8, reinterpret_cast<const char*>(values), 12).ok());
  ASSERT_TRUE(contents->storage->Read(0, 40, reinterpret_cast<char*>(read.data())).ok());
  EXPECT_EQ(read, (std::vector<int32_t>{0, 0, 1, 2, 3, 0, 0, 0, 0, 0}));
  EXPECT_EQ(registry.BytesUsed("a"), 40u);
  EXPECT_EQ(registry.Create("a", "x", DType::kInt32, 1).status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry.Free("a", "x").ok());
  EXPECT_EQ(registry.Get("a", "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Free("a", "x").code(), absl::StatusCode::kNotFound);
  // The contents held above outlive the name, and count until let go.
  EXPECT_EQ(registry.BytesUsed("a"), 40u);
  contents->storage.reset();
  EXPECT_EQ(registry.BytesUsed("a"), 0u);
}

TEST_F(RegistryTest, OwnersDoNotSeeEachOther) {
  Registry registry(SmallLimits(), &backend_, nullptr);
  ASSERT_TRUE(registry.Create("a", "x", DType::kFloat64, 2).ok());
  EXPECT_EQ(registry.Get("b", "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Free("b", "x").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.List("b").empty());
  // The same name is free in another namespace.
  ASSERT_TRUE(registry.Create("b", "x", DType::kInt64, 3).ok());
  EXPECT_EQ(registry.Get("a", "x")->dtype, DType::kFloat64);
  EXPECT_EQ(registry.Get("b", "x")->dtype, DType::kInt64);
  ASSERT_EQ(registry.List("a").size(), 1u);
  EXPECT_EQ(registry.List("a")[0].length, 2u);
}

TEST_F(RegistryTest, Names) {
  Registry registry(SmallLimits(), &backend_, nullptr);
  EXPECT_TRUE(registry.Create("a", std::string(128, 'n'), DType::kInt32, 0).ok());
  EXPECT_TRUE(registry.Create("a", "A-z_0.9", DType::kInt32, 0).ok());
  for (const std::string& bad : {std::string(), std::string(129, 'n'), std::string("a/b"),
                                std::string("sp ace"), std::string("caf\xc3\xa9")}) {
    absl::StatusOr<Info> refused = registry.Create("a", bad, DType::kInt32, 1);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("[A-Za-z0-9._-]"), std::string::npos);
  }
}

TEST_F(RegistryTest, EachQuotaRefusesBeforeAllocating) {
  Registry registry(SmallLimits(), &backend_, nullptr);
  // Per caller: 600 bytes.
  ASSERT_TRUE(registry.Create("a", "one", DType::kInt32, 100).ok());  // 400
  absl::StatusOr<Info> over = registry.Create("a", "two", DType::kInt32, 51);  // 204
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("--max_buffer_bytes_per_caller=600"), std::string::npos)
      << over.status();
  EXPECT_EQ(registry.BytesUsed("a"), 400u);
  // All buffers: 1000 bytes.
  ASSERT_TRUE(registry.Create("b", "one", DType::kInt32, 150).ok());  // 600
  over = registry.Create("c", "one", DType::kInt32, 1);  // 1004 in all
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("--max_buffer_bytes=1000"), std::string::npos)
      << over.status();
  EXPECT_EQ(registry.BytesUsed("c"), 0u);
  // Buffers per caller: 3.
  ASSERT_TRUE(registry.Create("a", "e1", DType::kInt32, 0).ok());
  ASSERT_TRUE(registry.Create("a", "e2", DType::kInt32, 0).ok());
  over = registry.Create("a", "e3", DType::kInt32, 0);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("--max_buffers_per_caller=3"), std::string::npos)
      << over.status();
  // Freeing makes room again.
  ASSERT_TRUE(registry.Free("a", "one").ok());
  EXPECT_TRUE(registry.Create("a", "e3", DType::kInt32, 100).ok());
}

TEST_F(RegistryTest, InstallReplacesAndHoldersKeepTheOldContents) {
  Registry registry(SmallLimits(), &backend_, nullptr);
  ASSERT_TRUE(registry.Create("a", "x", DType::kInt32, 4).ok());
  absl::StatusOr<Contents> old = registry.Get("a", "x");
  ASSERT_TRUE(old.ok());
  absl::StatusOr<std::shared_ptr<Storage>> fresh = registry.Allocate("a", 16);
  ASSERT_TRUE(fresh.ok());
  const double values[] = {1.5, 2.5};
  ASSERT_TRUE((*fresh)->Write(0, reinterpret_cast<const char*>(values), 16).ok());
  ASSERT_TRUE(registry.Install("a", "x", Contents{DType::kFloat64, 2, *fresh}).ok());
  absl::StatusOr<Contents> now = registry.Get("a", "x");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->dtype, DType::kFloat64);
  EXPECT_EQ(now->length, 2u);
  EXPECT_NE(now->storage->data(), old->storage->data());
  EXPECT_EQ(old->storage->bytes(), 16u);  // the int32 contents, still held
  EXPECT_EQ(registry.BytesUsed("a"), 32u);
  old->storage.reset();
  EXPECT_EQ(registry.BytesUsed("a"), 16u);
}

TEST_F(RegistryTest, IdleBuffersExpire) {
  Limits limits = SmallLimits();
  limits.idle = absl::Milliseconds(200);
  Registry registry(limits, &backend_, nullptr);
  ASSERT_TRUE(registry.Create("a", "idle", DType::kInt32, 10).ok());
  ASSERT_TRUE(registry.Create("a", "used", DType::kInt32, 10).ok());
  const std::vector<Info> listed = registry.List("a");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_GT(listed[0].expires_in_seconds, 0.1);
  EXPECT_LE(listed[0].expires_in_seconds, 0.2);
  for (int i = 0; i < 6; ++i) {
    absl::SleepFor(absl::Milliseconds(60));
    ASSERT_TRUE(registry.Get("a", "used").ok());  // each use restarts its count
  }
  EXPECT_EQ(registry.Get("a", "idle").status().code(), absl::StatusCode::kNotFound);
  // The expiry thread gives the memory back without a request asking.
  for (int i = 0; i < 100 && registry.BytesUsed("a") != 40u; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(registry.BytesUsed("a"), 40u);
  EXPECT_TRUE(registry.Create("a", "idle", DType::kInt32, 1).ok());
}

TEST_F(RegistryTest, ConcurrentCreatesOfOneNameMakeOne) {
  Registry registry(SmallLimits(), &backend_, nullptr);
  std::atomic<int> made{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      if (registry.Create("a", "race", DType::kInt32, 10).ok()) ++made;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(made.load(), 1);
  EXPECT_EQ(registry.BytesUsed("a"), 40u);
}

// Host memory that says it is on the device asked for (device 2 when none
// is), recording each ask: stands for a backend over several devices.
class DevicesBackend final : public ExecutionBackend {
 public:
  std::string name() const override { return "devices"; }
  void Execute(std::vector<std::unique_ptr<Task>> batch) override {}
  absl::StatusOr<char*> AllocateResident(uint64_t bytes, int* device, bool zeroed) override {
    asked.push_back(*device);
    zeroed_asks.push_back(zeroed);
    int unused;
    absl::StatusOr<char*> data = ExecutionBackend::AllocateResident(bytes, &unused, zeroed);
    *device = asked.back() >= 0 ? asked.back() : 2;
    return data;
  }
  std::vector<int> asked;
  std::vector<bool> zeroed_asks;
};

TEST(RegistryDevicesTest, OutputsAreAskedForBesideTheFirstInput) {
  DevicesBackend backend;
  Registry registry(SmallLimits(), &backend, nullptr);
  // A plain Create asks for no device.
  absl::StatusOr<Info> input = registry.Create("a", "in", DType::kInt32, 10);
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_EQ(input->device, 2);
  EXPECT_EQ(backend.asked, std::vector<int>{-1});

  RequestBuffers request(&registry, "a");
  v1::BufferRef ref;
  ref.set_name("in");
  ASSERT_TRUE(request.Input(ref, v1::INT32, "input").ok());
  ASSERT_TRUE(request.Place(0, "output_buffers.values", "out", DType::kInt32, 10).ok());
  EXPECT_EQ(backend.asked, (std::vector<int>{-1, 2}));

  // With no input buffer, the backend chooses.
  RequestBuffers inline_input(&registry, "a");
  ASSERT_TRUE(inline_input.Place(0, "output_buffers.values", "out2", DType::kInt32, 4).ok());
  EXPECT_EQ(backend.asked, (std::vector<int>{-1, 2, -1}));
  // A created buffer reads zeros; an output's memory is written whole by its
  // request, so nothing is spent zeroing it.
  EXPECT_EQ(backend.zeroed_asks, (std::vector<bool>{true, false, false}));
}

}  // namespace
}  // namespace primserve::buffers
