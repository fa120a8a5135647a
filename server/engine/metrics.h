// Prometheus metrics of a primserve process, served over HTTP at /metrics on
// their own address (apart from gRPC, so scrapers need no gRPC). A leaf
// library: the transport, the batcher and the backends each record what they
// see through one shared Metrics.
//
// Hot path: every time series a request can touch is found once, on first
// use, and cached in a fixed array indexed by (rpc, op, dtype, code) or
// (rpc, stage), so recording is an array index plus an atomic add; no label
// map is searched per request.
#ifndef PRIMSERVE_SERVER_ENGINE_METRICS_H_
#define PRIMSERVE_SERVER_ENGINE_METRICS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/rpc.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace primserve {

// Where a request's time goes. The CUDA backend reports kH2D, kKernel and
// kD2H; the CPU backend reports kCompute.
enum class Stage { kQueue, kH2D, kKernel, kD2H, kCompute, kTotal };
inline constexpr size_t kNumStages = 6;

// Why a request was refused without running.
enum class RejectReason { kQueueFull, kTooLarge, kDeadline, kCancelled, kInvalid };
inline constexpr size_t kNumRejectReasons = 5;

// One GPU's memory, in bytes.
struct GpuMemory {
  uint64_t pool_in_use = 0;    // handed out by the backend's pool
  uint64_t pool_reserved = 0;  // held by the pool, in use or not
  uint64_t device_total = 0;
  uint64_t device_free = 0;
  uint64_t budget = 0;  // most the backend lets batches hold at once; 0: none
};

// The series of one pool of page-locked host memory
// (server/engine/pinned_payloads.h): bytes handed out, and bytes pinned (handed out
// or free).
struct HostPoolGauges {
  prometheus::Gauge* in_use = nullptr;
  prometheus::Gauge* pinned = nullptr;
};

class Metrics final {
 public:
  Metrics();
  ~Metrics();

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Serves /metrics over HTTP on `address` (host:port; port 0 picks a free
  // one, see http_port()). At most once. kHttpThreads threads serve it, and a
  // connection that has not sent a whole request within kHttpRequestTimeout
  // is closed: idle or trickling clients cannot hold every thread for long.
  // civetweb gives each connection a thread while it waits for its request,
  // so the threads outnumber the idle connections a scrape must get past
  // (issue 27: 60 of them failed every scrape against 8 threads); each costs
  // its stack's address space, little resident memory.
  absl::Status ServeHttp(const std::string& address);
  static constexpr int kHttpThreads = 128;
  static constexpr absl::Duration kHttpRequestTimeout = absl::Seconds(2);
  // The port /metrics is served on; 0 before ServeHttp.
  int http_port() const;

  // primserve_build_info{version,backend,device} 1.
  void SetBuildInfo(const std::string& version, const std::string& backend,
                    const std::string& device);

  // A request answered with `code` after `total` (from receipt to answer).
  // `op` and `dtype` are the request's proto enum values: anything outside
  // Op's and DType's counts as "none" ("none" too for RPCs without an op).
  // `elements` counts the main input of a request answered OK, else 0.
  void RequestDone(Rpc rpc, int op, int dtype, absl::StatusCode code, absl::Duration total,
                   uint64_t bytes_in, uint64_t bytes_out, uint64_t elements);
  void ObserveStage(Rpc rpc, Stage stage, absl::Duration duration);

  // A Pipeline run of `steps` steps (primserve_pipeline_steps), and the time
  // of one of its steps, by the step's kind
  // (primserve_pipeline_step_duration_seconds{step}).
  void PipelineRan(size_t steps) { pipeline_steps_->Observe(static_cast<double>(steps)); }
  void ObservePipelineStep(Rpc step, absl::Duration duration) {
    pipeline_step_series_[RpcIndex(step)]->Observe(absl::ToDoubleSeconds(duration));
  }

  // Requests received and not yet answered.
  void RequestStarted() { requests_in_flight_->Increment(); }
  void RequestFinished() { requests_in_flight_->Decrement(); }

  void BatchLaunched(uint64_t requests, uint64_t elements);
  void SetQueueDepth(uint64_t requests) { queue_depth_->Set(static_cast<double>(requests)); }
  // Most requests the queue holds (the batcher's max_enqueued_tasks).
  void SetQueueCapacity(uint64_t requests) {
    queue_capacity_->Set(static_cast<double>(requests));
  }
  void Rejected(RejectReason reason);

  void SetGpuMemory(int device, const GpuMemory& memory);
  // Per CUDA device: a batch of `requests` with `bytes` of inputs ran its
  // kernels for `kernel` (primserve_device_requests_total,
  // primserve_device_bytes_total, primserve_device_kernel_seconds_total);
  // whether the device is in service (primserve_device_up: 1, or 0 once a
  // sticky error took it out). Batches are counted per batch, not per
  // request: one lookup of the device's series each.
  void DeviceBatchDone(int device, uint64_t requests, uint64_t bytes, absl::Duration kernel);
  void SetDeviceUp(int device, bool up);

  // primserve_pinned_host_bytes{pool, kind="in_use"|"pinned"} of the pool
  // named `pool` ("payloads", "answers"), which sets them.
  HostPoolGauges PinnedHostPool(const std::string& pool);

  // Resident buffers (server/buffers/): the bytes and number of buffer
  // contents held on `device` (-1: host memory), freed ones still in use
  // included; bytes moved by their Write ("written") and Read ("read")
  // RPCs; buffers dropped for idleness; Creates and outputs refused by the
  // quota named by its flag ("max_buffer_bytes", ...).
  void SetBufferUsage(int device, uint64_t bytes, uint64_t count);
  void BufferBytesMoved(absl::string_view direction, uint64_t bytes);
  void BuffersDroppedIdle(uint64_t count) { buffer_idle_drops_->Increment(count); }
  void BufferQuotaRefused(absl::string_view limit);
  // Shared-memory regions unregistered after --shared_memory_idle_seconds
  // unused (server/shm/registry.h).
  void SharedMemoryDroppedIdle() { shared_memory_idle_drops_->Increment(); }

  // Op label slots: 0 "none", then Op's values 1..6; DType likewise.
  static constexpr size_t kNumOpLabels = 7;
  static constexpr size_t kNumDTypeLabels = 7;
  // absl::StatusCode 0..16 (the gRPC codes).
  static constexpr size_t kNumCodeLabels = 17;

 private:
  static constexpr size_t kNumRequestSeries =
      kNumRpcs * kNumOpLabels * kNumDTypeLabels * kNumCodeLabels;

  prometheus::Counter& RequestCounter(Rpc rpc, int op, int dtype, absl::StatusCode code);
  prometheus::Histogram& StageHistogram(Rpc rpc, Stage stage);

  // Shared with the exposer, which holds a weak reference.
  const std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Counter>& requests_total_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Gauge>& gpu_memory_;
  prometheus::Family<prometheus::Gauge>& pinned_host_;
  prometheus::Family<prometheus::Gauge>& build_info_;
  prometheus::Family<prometheus::Gauge>& buffer_bytes_;
  prometheus::Family<prometheus::Gauge>& buffers_;
  prometheus::Family<prometheus::Counter>& buffer_transfer_;
  prometheus::Family<prometheus::Counter>& buffer_refusals_;
  prometheus::Family<prometheus::Counter>& device_requests_;
  prometheus::Family<prometheus::Counter>& device_bytes_;
  prometheus::Family<prometheus::Counter>& device_kernel_seconds_;
  prometheus::Family<prometheus::Gauge>& device_up_;

  // Series created on first use; null until then.
  std::array<std::atomic<prometheus::Counter*>, kNumRequestSeries> request_series_{};
  std::array<std::atomic<prometheus::Histogram*>, kNumRpcs * kNumStages> stage_series_{};

  // Series created up front.
  prometheus::Counter* payload_in_;
  prometheus::Counter* payload_out_;
  std::array<prometheus::Counter*, kNumRpcs> elements_{};
  prometheus::Histogram* pipeline_steps_;
  std::array<prometheus::Histogram*, kNumRpcs> pipeline_step_series_{};
  prometheus::Histogram* batch_requests_;
  prometheus::Histogram* batch_elements_;
  prometheus::Counter* batches_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* queue_capacity_;
  prometheus::Gauge* requests_in_flight_;
  std::array<prometheus::Counter*, kNumRejectReasons> rejections_{};
  prometheus::Counter* buffer_idle_drops_;
  prometheus::Counter* shared_memory_idle_drops_;

  absl::Mutex gpu_mu_;
  // Per device: pool_in_use, pool_reserved, device_total, device_free, budget.
  absl::flat_hash_map<int, std::array<prometheus::Gauge*, 5>> gpu_series_
      ABSL_GUARDED_BY(gpu_mu_);

  // Declared last: destroyed first, so no scrape runs while members die.
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_ENGINE_METRICS_H_
