#include "server/multiplex.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/call_record.h"
#include "server/service.h"

namespace primserve {

MultiplexReactor::MultiplexReactor(grpc::CallbackServerContext* context, Scheduler* scheduler,
                                   const RequestLimits& limits, Metrics* metrics,
                                   std::string caller, const shm::Registry* shared_memory)
    : context_(context),
      scheduler_(scheduler),
      limits_(limits),
      metrics_(metrics),
      caller_(std::move(caller)),
      shared_memory_(shared_memory) {
  Advance();
}

void MultiplexReactor::OnReadDone(bool ok) {
  std::unique_ptr<v1::MultiplexRequest> request;
  {
    absl::MutexLock lock(&mu_);
    reading_ = false;
    if (!ok) {
      reads_done_ = true;
    } else {
      request = std::move(incoming_);
      ++unanswered_;
    }
  }
  if (request != nullptr) Start(std::move(request));
  Advance();
}

void MultiplexReactor::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    writes_.pop_front();
    --unanswered_;
    if (!ok) {
      // The client is gone: answers still to come are dropped as they arrive.
      broken_ = true;
      unanswered_ -= writes_.size();
      writes_.clear();
    }
  }
  Advance();
}

void MultiplexReactor::Advance() {
  const v1::MultiplexResponse* write = nullptr;
  v1::MultiplexRequest* read = nullptr;
  bool finish = false;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (!writing_ && !writes_.empty()) {
      writing_ = true;
      write = writes_.front().get();
    }
    if (!reading_ && !reads_done_ && !broken_ && unanswered_ < limits_.multiplex_window) {
      reading_ = true;
      incoming_ = std::make_unique<v1::MultiplexRequest>();
      read = incoming_.get();
    }
    if ((reads_done_ || broken_) && !reading_ && !writing_ && unanswered_ == 0) {
      finished_ = true;
      finish = true;
    }
  }
  if (write != nullptr) StartWrite(write);
  if (read != nullptr) StartRead(read);
  if (finish) {
    Finish(context_->IsCancelled() ? grpc::Status::CANCELLED : grpc::Status::OK);
  }
}

void MultiplexReactor::Answer(std::unique_ptr<v1::MultiplexResponse> answer, bool releases_id) {
  {
    absl::MutexLock lock(&mu_);
    if (releases_id) ids_in_flight_.erase(answer->id());
    if (broken_) {
      --unanswered_;
    } else {
      writes_.push_back(std::move(answer));
    }
  }
  Advance();
}

void MultiplexReactor::Refuse(uint64_t id, const absl::Status& status, bool releases_id) {
  auto answer = std::make_unique<v1::MultiplexResponse>();
  answer->set_id(id);
  answer->set_code(static_cast<int32_t>(status.code()));
  answer->set_message(std::string(status.message()));
  Answer(std::move(answer), releases_id);
}

template <typename Request, typename Response>
void MultiplexReactor::Schedule(std::unique_ptr<v1::MultiplexRequest> holder,
                                const Request& request,
                                Response* (v1::MultiplexResponse::*answer_field)()) {
  const uint64_t id = holder->id();
  const CallRecord call = CallRecord::Start(metrics_, LabelsOf(request), request);
  std::unique_ptr<shm::RequestMemory> memory = RequestMemoryOf(shared_memory_);
  absl::StatusOr<Operation> operation = ToOperation(request, limits_, memory.get());
  if (!operation.ok()) {
    RecordRefusal(metrics_, operation.status());
    call.Done(operation.status(), nullptr, 0);
    Refuse(id, operation.status(), /*releases_id=*/true);
    return;
  }
  const uint64_t elements = ItemCount(*operation);
  auto task = std::make_unique<Task>();
  task->operation = *std::move(operation);
  task->deadline = DeadlineOf(*context_);
  task->is_cancelled = [context = context_] { return context->IsCancelled(); };
  task->peer = caller_;
  // The operation views `holder` and the shared memory `memory` leases, which
  // the task keeps until it is answered.
  task->done = [this, holder = std::move(holder), memory = std::move(memory), answer_field, call,
                elements](absl::StatusOr<Result> result) {
    auto answer = std::make_unique<v1::MultiplexResponse>();
    answer->set_id(holder->id());
    Response* response = (answer.get()->*answer_field)();
    const absl::Status status =
        result.ok() ? ToResponse(*std::move(result), response, memory.get()) : result.status();
    call.Done(status, status.ok() ? response : nullptr, elements);
    if (!status.ok()) {
      Refuse(holder->id(), status, /*releases_id=*/true);
      return;
    }
    Answer(std::move(answer), /*releases_id=*/true);
  };
  if (absl::Status scheduled = scheduler_->Schedule(&task); !scheduled.ok()) {
    call.Done(scheduled, nullptr, 0);
    Refuse(id, scheduled, /*releases_id=*/true);
  }
}

void MultiplexReactor::Start(std::unique_ptr<v1::MultiplexRequest> request) {
  const uint64_t id = request->id();
  bool reused;
  {
    absl::MutexLock lock(&mu_);
    reused = !ids_in_flight_.insert(id).second;
  }
  if (reused) {
    Refuse(id,
           absl::InvalidArgumentError(absl::StrCat("id ", id,
                                                   " is already in flight on this stream; reuse "
                                                   "an id only after its answer has arrived")),
           /*releases_id=*/false);
    return;
  }
  using R = v1::MultiplexResponse;
  switch (request->request_case()) {
    case v1::MultiplexRequest::kScan: {
      const auto& r = request->scan();
      return Schedule(std::move(request), r, &R::mutable_scan);
    }
    case v1::MultiplexRequest::kReduce: {
      const auto& r = request->reduce();
      return Schedule(std::move(request), r, &R::mutable_reduce);
    }
    case v1::MultiplexRequest::kSelect: {
      const auto& r = request->select();
      return Schedule(std::move(request), r, &R::mutable_select);
    }
    case v1::MultiplexRequest::kUnique: {
      const auto& r = request->unique();
      return Schedule(std::move(request), r, &R::mutable_unique);
    }
    case v1::MultiplexRequest::kRunLengthEncode: {
      const auto& r = request->run_length_encode();
      return Schedule(std::move(request), r, &R::mutable_run_length_encode);
    }
    case v1::MultiplexRequest::kReduceByKey: {
      const auto& r = request->reduce_by_key();
      return Schedule(std::move(request), r, &R::mutable_reduce_by_key);
    }
    case v1::MultiplexRequest::kAggregateByKey: {
      const auto& r = request->aggregate_by_key();
      return Schedule(std::move(request), r, &R::mutable_aggregate_by_key);
    }
    case v1::MultiplexRequest::REQUEST_NOT_SET:
      break;
  }
  Refuse(id,
         absl::InvalidArgumentError("request is not set: set one of scan, reduce, select, unique, "
                                    "run_length_encode, reduce_by_key or aggregate_by_key"),
         /*releases_id=*/true);
}

}  // namespace primserve
