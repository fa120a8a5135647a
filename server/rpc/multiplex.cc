#include "server/rpc/multiplex.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/rpc/call_context.h"
#include "server/rpc/call_record.h"
#include "wire/framing.h"

namespace primserve {

MultiplexReactor::MultiplexReactor(grpc::CallbackServerContext* context, Scheduler* scheduler,
                                   const RequestLimits& limits, Metrics* metrics,
                                   std::string caller, const shm::Registry* shared_memory,
                                   wire::PayloadAllocator payload_allocator,
                                   wire::CopyPool* payload_copies,
                                   AnswerAllocator answer_allocator, buffers::Registry* buffers,
                                   std::string buffer_owner)
    : context_(context),
      scheduler_(scheduler),
      limits_(limits),
      metrics_(metrics),
      caller_(std::move(caller)),
      shared_memory_(shared_memory),
      buffers_(buffers),
      buffer_owner_(std::move(buffer_owner)),
      payload_allocator_(std::move(payload_allocator)),
      payload_copies_(payload_copies),
      answer_allocator_(std::move(answer_allocator)) {
  Advance();
}

void MultiplexReactor::OnReadDone(bool ok) {
  // Parsed before the next read may start, so that nothing is read after a
  // message that is no request.
  std::unique_ptr<Received> received;
  if (ok) received = Parse();
  {
    absl::MutexLock lock(&mu_);
    reading_ = false;
    if (!ok) reads_done_ = true;
  }
  if (received != nullptr) Start(std::move(received));
  Advance();
}

std::unique_ptr<MultiplexReactor::Received> MultiplexReactor::Parse() {
  grpc::ByteBuffer raw;
  uint64_t seq;
  {
    absl::MutexLock lock(&mu_);
    raw.Swap(&incoming_);
    seq = messages_read_++;
  }
  auto received = std::make_unique<Received>(payload_allocator_, payload_copies_);
  received->bytes_in = raw.Length();
  absl::Status parsed = received->payloads.Parse(raw, &received->request);
  if (parsed.ok()) {
    absl::MutexLock lock(&mu_);
    ++unanswered_;
    unanswered_bytes_ += received->bytes_in;
    return received;
  }
  RecordRefusal(metrics_, parsed);
  absl::MutexLock lock(&mu_);
  error_ = absl::Status(parsed.code(),
                        absl::StrCat("Multiplex message ", seq, ": ", parsed.message()));
  return nullptr;
}

void MultiplexReactor::OnWriteDone(bool ok) {
  // Signalled after the lock is let go: what waits may answer on this stream.
  std::vector<std::shared_ptr<AnswerSent>> sent;
  auto take = [&sent](Write& write) {
    if (write.sent != nullptr) sent.push_back(std::move(write.sent));
  };
  Advance([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writing_ = false;
    take(writes_.front());
    unanswered_bytes_ -= writes_.front().bytes_in;
    writes_.pop_front();
    --unanswered_;
    if (!ok) {
      // The client is gone: answers still to come are dropped as they arrive.
      broken_ = true;
      unanswered_ -= writes_.size();
      for (Write& write : writes_) {
        take(write);
        unanswered_bytes_ -= write.bytes_in;
      }
      writes_.clear();
    }
  });
  for (const auto& s : sent) s->Signal();
}

void MultiplexReactor::Advance(absl::FunctionRef<void()> update) {
  const grpc::ByteBuffer* write = nullptr;
  bool more_writes = false;
  grpc::ByteBuffer* read = nullptr;
  std::optional<grpc::Status> finish;
  {
    absl::MutexLock lock(&mu_);
    update();
    if (finished_) return;
    if (!writing_ && !writes_.empty()) {
      writing_ = true;
      write = &writes_.front().framed;
      more_writes = writes_.size() > 1;
    }
    if (!reading_ && !reads_done_ && !broken_ && error_.ok() &&
        unanswered_ < limits_.multiplex_window &&
        unanswered_bytes_ < limits_.multiplex_window_bytes) {
      reading_ = true;
      incoming_.Clear();
      read = &incoming_;
    }
    if ((reads_done_ || broken_ || !error_.ok()) && !reading_ && !writing_ && unanswered_ == 0) {
      finished_ = true;
      finish = context_->IsCancelled() ? grpc::Status::CANCELLED : ToGrpc(error_);
    }
  }
  // With more answers queued behind it, an answer may wait in gRPC's buffer
  // for the next: several go out in one write to the socket. The last one
  // queued goes without the hint, and flushes them.
  if (write != nullptr) {
    StartWrite(write, more_writes ? grpc::WriteOptions().set_buffer_hint() : grpc::WriteOptions());
  }
  if (read != nullptr) StartRead(read);
  if (finish) Finish(*finish);
}

void MultiplexReactor::Answer(uint64_t id, uint64_t bytes_in, grpc::ByteBuffer framed,
                              bool releases_id, std::shared_ptr<AnswerSent> sent) {
  // The answer is queued in the same critical section that decides what
  // follows: once the lock is let go, another thread may write this answer
  // and finish the stream, deleting the reactor.
  std::shared_ptr<AnswerSent> dropped;
  Advance([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (releases_id) ids_in_flight_.erase(id);
    if (broken_) {
      --unanswered_;
      unanswered_bytes_ -= bytes_in;
      dropped = std::move(sent);
    } else {
      writes_.push_back(Write{std::move(framed), std::move(sent), bytes_in});
    }
  });
  if (dropped != nullptr) dropped->Signal();
}

void MultiplexReactor::Refuse(uint64_t id, uint64_t bytes_in, const absl::Status& status,
                              bool releases_id) {
  auto answer = std::make_unique<v1::MultiplexResponse>();
  answer->set_id(id);
  answer->set_code(static_cast<int32_t>(status.code()));
  answer->set_message(std::string(status.message()));
  Answer(id, bytes_in, wire::Frame(answer.get()), releases_id);
}

template <typename Request, typename Response>
void MultiplexReactor::Schedule(std::unique_ptr<Received> holder, const Request& request,
                                Response* (v1::MultiplexResponse::*answer_field)()) {
  const uint64_t id = holder->request.id();
  const uint64_t bytes_in = holder->bytes_in;
  const CallRecord call = CallRecord::Start(metrics_, LabelsOf(request), holder->bytes_in);
  std::unique_ptr<shm::RequestMemory> memory =
      RequestMemoryOf(shared_memory_, buffers_, buffer_owner_);
  absl::StatusOr<Operation> operation =
      ToOperation(request, limits_, memory.get(), &holder->payloads);
  if (!operation.ok()) {
    RecordRefusal(metrics_, operation.status());
    call.Done(operation.status(), nullptr, 0);
    Refuse(id, bytes_in, operation.status(), /*releases_id=*/true);
    return;
  }
  const uint64_t elements = ItemCount(*operation);
  auto task = std::make_unique<Task>();
  task->operation = *std::move(operation);
  task->deadline = DeadlineOf(*context_);
  task->is_cancelled = [context = context_] { return context->IsCancelled(); };
  task->peer = caller_;
  task->answers = answer_allocator_;
  task->sent = std::make_shared<AnswerSent>();
  // The operation views `holder` (its payloads) and the shared memory
  // `memory` leases, which the task keeps until it is answered.
  task->done = [this, id, bytes_in, holder = std::move(holder), memory = std::move(memory),
                answer_field, call, elements, sent = task->sent](absl::StatusOr<Result> result) {
    v1::MultiplexResponse answer;
    answer.set_id(id);
    Response* response = (answer.*answer_field)();
    absl::StatusOr<grpc::ByteBuffer> framed =
        result.ok() ? FrameResponse(*std::move(result), response, memory.get(), &answer)
                    : absl::StatusOr<grpc::ByteBuffer>(result.status());
    call.Done(framed.status(), framed.ok() ? framed->Length() : 0, elements);
    if (!framed.ok()) {
      Refuse(id, bytes_in, framed.status(), /*releases_id=*/true);
      return;
    }
    Answer(id, bytes_in, *std::move(framed), /*releases_id=*/true, sent);
  };
  if (absl::Status scheduled = scheduler_->Schedule(&task); !scheduled.ok()) {
    call.Done(scheduled, nullptr, 0);
    Refuse(id, bytes_in, scheduled, /*releases_id=*/true);
  }
}

void MultiplexReactor::Start(std::unique_ptr<Received> received) {
  const uint64_t id = received->request.id();
  const uint64_t bytes_in = received->bytes_in;
  bool reused;
  {
    absl::MutexLock lock(&mu_);
    reused = !ids_in_flight_.insert(id).second;
  }
  if (reused) {
    Refuse(id, bytes_in,
           absl::InvalidArgumentError(absl::StrCat("id ", id,
                                                   " is already in flight on this stream; reuse "
                                                   "an id only after its answer has arrived")),
           /*releases_id=*/false);
    return;
  }
  using R = v1::MultiplexResponse;
  const v1::MultiplexRequest& request = received->request;
  switch (request.request_case()) {
    case v1::MultiplexRequest::kScan: {
      const auto& r = request.scan();
      return Schedule(std::move(received), r, &R::mutable_scan);
    }
    case v1::MultiplexRequest::kReduce: {
      const auto& r = request.reduce();
      return Schedule(std::move(received), r, &R::mutable_reduce);
    }
    case v1::MultiplexRequest::kSelect: {
      const auto& r = request.select();
      return Schedule(std::move(received), r, &R::mutable_select);
    }
    case v1::MultiplexRequest::kUnique: {
      const auto& r = request.unique();
      return Schedule(std::move(received), r, &R::mutable_unique);
    }
    case v1::MultiplexRequest::kRunLengthEncode: {
      const auto& r = request.run_length_encode();
      return Schedule(std::move(received), r, &R::mutable_run_length_encode);
    }
    case v1::MultiplexRequest::kReduceByKey: {
      const auto& r = request.reduce_by_key();
      return Schedule(std::move(received), r, &R::mutable_reduce_by_key);
    }
    case v1::MultiplexRequest::kAggregateByKey: {
      const auto& r = request.aggregate_by_key();
      return Schedule(std::move(received), r, &R::mutable_aggregate_by_key);
    }
    case v1::MultiplexRequest::kSort: {
      const auto& r = request.sort();
      return Schedule(std::move(received), r, &R::mutable_sort);
    }
    case v1::MultiplexRequest::kGather: {
      const auto& r = request.gather();
      return Schedule(std::move(received), r, &R::mutable_gather);
    }
    case v1::MultiplexRequest::kPipeline: {
      const auto& r = request.pipeline();
      return Schedule(std::move(received), r, &R::mutable_pipeline);
    }
    case v1::MultiplexRequest::REQUEST_NOT_SET:
      break;
  }
  Refuse(id, bytes_in,
         absl::InvalidArgumentError("request is not set: set one of scan, reduce, select, unique, "
                                    "run_length_encode, reduce_by_key, aggregate_by_key, sort, "
                                    "gather or pipeline"),
         /*releases_id=*/true);
}

}  // namespace primserve
