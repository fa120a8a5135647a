#include "server/engine/metrics.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"

namespace primserve {
namespace {

constexpr const char* kOpLabels[Metrics::kNumOpLabels] = {"none", "SUM", "PROD", "MIN",
                                                          "MAX",  "ARGMIN", "ARGMAX"};
constexpr const char* kDTypeLabels[Metrics::kNumDTypeLabels] = {
    "none", "INT32", "INT64", "UINT32", "UINT64", "FLOAT32", "FLOAT64"};
constexpr const char* kStageLabels[kNumStages] = {"queue",   "h2d",     "kernel",
                                                  "d2h",     "compute", "total"};
constexpr const char* kRejectLabels[kNumRejectReasons] = {"queue_full", "too_large", "deadline",
                                                          "cancelled", "invalid"};

// 10us * 2^k up to ~10.5 s: kernels take microseconds, big requests seconds.
prometheus::Histogram::BucketBoundaries DurationBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  // Dividing exact microsecond counts keeps the le labels short ("8e-05").
  for (double micros = 10; micros < 11e6; micros *= 2) buckets.push_back(micros / 1e6);
  return buckets;
}

// 1, factor, factor^2, ... up to `max`.
prometheus::Histogram::BucketBoundaries PowerBuckets(double factor, double max) {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double bound = 1; bound <= max; bound *= factor) buckets.push_back(bound);
  return buckets;
}

size_t LabelSlot(int value, size_t slots) {
  return value > 0 && static_cast<size_t>(value) < slots ? static_cast<size_t>(value) : 0;
}

}  // namespace


Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_total_(prometheus::BuildCounter()
                          .Name("primserve_requests_total")
                          .Help("Requests answered, by RPC, op, dtype and gRPC status code.")
                          .Register(*registry_)),
      request_duration_(prometheus::BuildHistogram()
                            .Name("primserve_request_duration_seconds")
                            .Help("Time per request in each stage: queue (waiting in the "
                                  "batcher), h2d, kernel, d2h (CUDA), compute (CPU), total "
                                  "(receipt to answer).")
                            .Register(*registry_)),
      gpu_memory_(prometheus::BuildGauge()
                      .Name("primserve_gpu_memory_bytes")
                      .Help("GPU memory: the backend pool's in-use and reserved bytes, the "
                            "device's total and free bytes, the backend's budget.")
                      .Register(*registry_)),
      pinned_host_(prometheus::BuildGauge()
                       .Name("primserve_pinned_host_bytes")
                       .Help("Page-locked host memory of the request payload and answer "
                             "buffer pools: bytes handed out (in_use) and pinned (in use or "
                             "free).")
                       .Register(*registry_)),
      build_info_(prometheus::BuildGauge()
                      .Name("primserve_build_info")
                      .Help("Always 1; labels name the version, backend and device.")
                      .Register(*registry_)),
      buffer_bytes_(prometheus::BuildGauge()
                        .Name("primserve_buffer_bytes")
                        .Help("Bytes of resident buffer contents by device (-1: host), freed "
                              "or replaced ones still in use included.")
                        .Register(*registry_)),
      buffers_(prometheus::BuildGauge()
                   .Name("primserve_buffers")
                   .Help("Resident buffer contents held, by device (-1: host).")
                   .Register(*registry_)),
      buffer_transfer_(prometheus::BuildCounter()
                           .Name("primserve_buffer_transfer_bytes_total")
                           .Help("Bytes written into (Buffers.Write) and read from "
                                 "(Buffers.Read) resident buffers.")
                           .Register(*registry_)),
      buffer_refusals_(prometheus::BuildCounter()
                           .Name("primserve_buffer_quota_refusals_total")
                           .Help("Buffers refused for a quota, by the flag that sets it.")
                           .Register(*registry_)),
      device_requests_(prometheus::BuildCounter()
                           .Name("primserve_device_requests_total")
                           .Help("Requests run on each CUDA device.")
                           .Register(*registry_)),
      device_bytes_(prometheus::BuildCounter()
                        .Name("primserve_device_bytes_total")
                        .Help("Input bytes of the requests run on each CUDA device.")
                        .Register(*registry_)),
      device_kernel_seconds_(prometheus::BuildCounter()
                                 .Name("primserve_device_kernel_seconds_total")
                                 .Help("Time each CUDA device spent in batches' kernels.")
                                 .Register(*registry_)),
      device_up_(prometheus::BuildGauge()
                     .Name("primserve_device_up")
                     .Help("1 while the CUDA device serves; 0 once a sticky CUDA error took "
                           "it out of service (one ends CUDA in the whole process).")
                     .Register(*registry_)) {
  buffer_idle_drops_ = &prometheus::BuildCounter()
                            .Name("primserve_buffer_idle_drops_total")
                            .Help("Buffers dropped after --buffer_idle_seconds without use.")
                            .Register(*registry_)
                            .Add({});
  shared_memory_idle_drops_ =
      &prometheus::BuildCounter()
           .Name("primserve_shared_memory_idle_drops_total")
           .Help("Shared-memory regions unregistered after --shared_memory_idle_seconds unused "
                 "(their client most likely exited without unregistering them).")
           .Register(*registry_)
           .Add({});
  // Every family has a series from the start, so that dashboards and
  // alerts find each name before the first buffer (device -1: the host).
  SetBufferUsage(-1, 0, 0);
  for (const char* direction : {"written", "read"}) {
    buffer_transfer_.Add({{"direction", direction}});
  }
  for (const char* limit :
       {"max_buffer_bytes", "max_buffer_bytes_per_caller", "max_buffers_per_caller"}) {
    buffer_refusals_.Add({{"limit", limit}});
  }
  auto& payload = prometheus::BuildCounter()
                      .Name("primserve_payload_bytes_total")
                      .Help("Serialized request (in) and response (out) message bytes.")
                      .Register(*registry_);
  payload_in_ = &payload.Add({{"direction", "in"}});
  payload_out_ = &payload.Add({{"direction", "out"}});

  auto& elements = prometheus::BuildCounter()
                       .Name("primserve_elements_total")
                       .Help("Elements of the main input of requests answered OK.")
                       .Register(*registry_);
  for (Rpc rpc : kAllRpcs) elements_[RpcIndex(rpc)] = &elements.Add({{"rpc", RpcName(rpc)}});

  pipeline_steps_ = &prometheus::BuildHistogram()
                         .Name("primserve_pipeline_steps")
                         .Help("Steps per Pipeline run.")
                         .Register(*registry_)
                         .Add({}, PowerBuckets(2, 64));
  auto& step_duration = prometheus::BuildHistogram()
                            .Name("primserve_pipeline_step_duration_seconds")
                            .Help("Time of one step of a Pipeline on the backend, by the step's "
                                  "kind (its RPC's name).")
                            .Register(*registry_);
  for (Rpc rpc : kAllRpcs) {
    pipeline_step_series_[RpcIndex(rpc)] =
        &step_duration.Add({{"step", RpcName(rpc)}}, DurationBuckets());
  }

  batch_requests_ = &prometheus::BuildHistogram()
                         .Name("primserve_batch_size_requests")
                         .Help("Requests per batch handed to the backend.")
                         .Register(*registry_)
                         .Add({}, PowerBuckets(2, 4096));
  batch_elements_ = &prometheus::BuildHistogram()
                         .Name("primserve_batch_size_elements")
                         .Help("Elements per batch handed to the backend.")
                         .Register(*registry_)
                         .Add({}, PowerBuckets(4, 4294967296.0));  // up to 2^32
  batches_ = &prometheus::BuildCounter()
                  .Name("primserve_batches_total")
                  .Help("Batches handed to the backend.")
                  .Register(*registry_)
                  .Add({});
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("primserve_queue_depth")
                      .Help("Requests accepted by the batcher and not yet handed to the backend.")
                      .Register(*registry_)
                      .Add({});
  queue_capacity_ = &prometheus::BuildGauge()
                         .Name("primserve_queue_capacity")
                         .Help("Most requests the batcher queues before refusing more.")
                         .Register(*registry_)
                         .Add({});
  requests_in_flight_ = &prometheus::BuildGauge()
                             .Name("primserve_requests_in_flight")
                             .Help("Requests received and not yet answered.")
                             .Register(*registry_)
                             .Add({});
  auto& rejections = prometheus::BuildCounter()
                         .Name("primserve_rejections_total")
                         .Help("Requests refused without running, by reason.")
                         .Register(*registry_);
  for (size_t reason = 0; reason < kNumRejectReasons; ++reason) {
    rejections_[reason] = &rejections.Add({{"reason", kRejectLabels[reason]}});
  }
}

Metrics::~Metrics() = default;

absl::Status Metrics::ServeHttp(const std::string& address) {
  if (exposer_ != nullptr) return absl::FailedPreconditionError("metrics are already served");
  try {
    // civetweb's request timeout counts from the connection's first byte
    // wait, so a trickled request is cut as surely as an idle one; the same
    // bound holds between requests on a kept-alive connection.
    const std::string timeout_ms = absl::StrCat(absl::ToInt64Milliseconds(kHttpRequestTimeout));
    exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", address, "num_threads", absl::StrCat(kHttpThreads),
        "request_timeout_ms", timeout_ms, "keep_alive_timeout_ms", timeout_ms});
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  return absl::OkStatus();
}

int Metrics::http_port() const {
  if (exposer_ == nullptr) return 0;
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void Metrics::SetBuildInfo(const std::string& version, const std::string& backend,
                           const std::string& device) {
  build_info_.Add({{"version", version}, {"backend", backend}, {"device", device}}).Set(1);
}

prometheus::Counter& Metrics::RequestCounter(Rpc rpc, int op, int dtype,
                                             absl::StatusCode code) {
  const size_t op_slot = LabelSlot(op, kNumOpLabels);
  const size_t dtype_slot = LabelSlot(dtype, kNumDTypeLabels);
  const int code_value = static_cast<int>(code);
  const size_t code_slot = code_value >= 0 && static_cast<size_t>(code_value) < kNumCodeLabels
                               ? static_cast<size_t>(code_value)
                               : static_cast<size_t>(absl::StatusCode::kUnknown);
  std::atomic<prometheus::Counter*>& slot =
      request_series_[((RpcIndex(rpc) * kNumOpLabels + op_slot) * kNumDTypeLabels + dtype_slot) *
                          kNumCodeLabels +
                      code_slot];
  prometheus::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    // Family::Add returns the existing series when two threads race here.
    counter = &requests_total_.Add(
        {{"rpc", RpcName(rpc)},
         {"op", kOpLabels[op_slot]},
         {"dtype", kDTypeLabels[dtype_slot]},
         {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code_slot))}});
    slot.store(counter, std::memory_order_release);
  }
  return *counter;
}

prometheus::Histogram& Metrics::StageHistogram(Rpc rpc, Stage stage) {
  const size_t stage_index = static_cast<size_t>(stage);
  std::atomic<prometheus::Histogram*>& slot = stage_series_[RpcIndex(rpc) * kNumStages + stage_index];
  prometheus::Histogram* histogram = slot.load(std::memory_order_acquire);
  if (histogram == nullptr) {
    histogram = &request_duration_.Add(
        {{"rpc", RpcName(rpc)}, {"stage", kStageLabels[stage_index]}}, DurationBuckets());
    slot.store(histogram, std::memory_order_release);
  }
  return *histogram;
}

void Metrics::RequestDone(Rpc rpc, int op, int dtype, absl::StatusCode code,
                          absl::Duration total, uint64_t bytes_in, uint64_t bytes_out,
                          uint64_t elements) {
  RequestCounter(rpc, op, dtype, code).Increment();
  StageHistogram(rpc, Stage::kTotal).Observe(absl::ToDoubleSeconds(total));
  payload_in_->Increment(static_cast<double>(bytes_in));
  payload_out_->Increment(static_cast<double>(bytes_out));
  elements_[RpcIndex(rpc)]->Increment(static_cast<double>(elements));
}

void Metrics::ObserveStage(Rpc rpc, Stage stage, absl::Duration duration) {
  StageHistogram(rpc, stage).Observe(absl::ToDoubleSeconds(duration));
}

void Metrics::BatchLaunched(uint64_t requests, uint64_t elements) {
  batch_requests_->Observe(static_cast<double>(requests));
  batch_elements_->Observe(static_cast<double>(elements));
  batches_->Increment();
}

void Metrics::Rejected(RejectReason reason) {
  rejections_[static_cast<size_t>(reason)]->Increment();
}

void Metrics::SetGpuMemory(int device, const GpuMemory& memory) {
  absl::MutexLock lock(&gpu_mu_);
  auto [it, inserted] = gpu_series_.try_emplace(device);
  if (inserted) {
    const std::string device_label = absl::StrCat(device);
    const char* kinds[] = {"pool_in_use", "pool_reserved", "device_total", "device_free",
                           "budget"};
    for (size_t i = 0; i < it->second.size(); ++i) {
      it->second[i] = &gpu_memory_.Add({{"device", device_label}, {"kind", kinds[i]}});
    }
  }
  const uint64_t values[] = {memory.pool_in_use, memory.pool_reserved, memory.device_total,
                             memory.device_free, memory.budget};
  for (size_t i = 0; i < it->second.size(); ++i) {
    it->second[i]->Set(static_cast<double>(values[i]));
  }
}

void Metrics::DeviceBatchDone(int device, uint64_t requests, uint64_t bytes,
                              absl::Duration kernel) {
  const prometheus::Labels labels = {{"device", absl::StrCat(device)}};
  device_requests_.Add(labels).Increment(static_cast<double>(requests));
  device_bytes_.Add(labels).Increment(static_cast<double>(bytes));
  device_kernel_seconds_.Add(labels).Increment(absl::ToDoubleSeconds(kernel));
}

void Metrics::SetDeviceUp(int device, bool up) {
  const prometheus::Labels labels = {{"device", absl::StrCat(device)}};
  device_up_.Add(labels).Set(up ? 1 : 0);
  // A device's counters exist from its first report, so rate() over them
  // starts at zero rather than at the first batch.
  device_requests_.Add(labels);
  device_bytes_.Add(labels);
  device_kernel_seconds_.Add(labels);
}

void Metrics::SetBufferUsage(int device, uint64_t bytes, uint64_t count) {
  // Add returns the existing series for labels already seen.
  const std::string label = absl::StrCat(device);
  buffer_bytes_.Add({{"device", label}}).Set(static_cast<double>(bytes));
  buffers_.Add({{"device", label}}).Set(static_cast<double>(count));
}

void Metrics::BufferBytesMoved(absl::string_view direction, uint64_t bytes) {
  buffer_transfer_.Add({{"direction", std::string(direction)}}).Increment(static_cast<double>(bytes));
}

void Metrics::BufferQuotaRefused(absl::string_view limit) {
  buffer_refusals_.Add({{"limit", std::string(limit)}}).Increment();
}

HostPoolGauges Metrics::PinnedHostPool(const std::string& pool) {
  return HostPoolGauges{&pinned_host_.Add({{"pool", pool}, {"kind", "in_use"}}),
                        &pinned_host_.Add({{"pool", pool}, {"kind", "pinned"}})};
}

}  // namespace primserve
