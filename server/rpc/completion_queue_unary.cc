#include "server/rpc/completion_queue_unary.h"

#include <memory>
#include <utility>

#include "grpcpp/support/async_unary_call.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "server/engine/answer_sent.h"
#include "server/rpc/unary_handling.h"

namespace primserve {
namespace {

using Responder = grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>;

// How one unary method's calls are asked for and served.
struct UnaryMethod {
  void (*request)(QueuedPrimitivesService* service, grpc::ServerContext* context,
                  grpc::ByteBuffer* request, Responder* responder,
                  grpc::ServerCompletionQueue* queue, void* tag);
  void (*serve)(const PrimitivesEnvironment& environment, UnaryCall* call,
                const grpc::ByteBuffer& request, std::shared_ptr<AnswerSent> sent,
                bool may_run_here);
};

// The call is handed over, and its events come, on the queue that asked.
#define PRIMSERVE_QUEUED_UNARY(Rpc)                                                         \
  UnaryMethod {                                                                             \
    [](QueuedPrimitivesService* service, grpc::ServerContext* context,                      \
       grpc::ByteBuffer* request, Responder* responder, grpc::ServerCompletionQueue* queue, \
       void* tag) { service->Request##Rpc(context, request, responder, queue, queue, tag); }, \
        &ServeUnary<v1::Rpc##Request, v1::Rpc##Response>                                   \
  }

constexpr UnaryMethod kUnaryMethods[] = {
    PRIMSERVE_QUEUED_UNARY(Scan),        PRIMSERVE_QUEUED_UNARY(Reduce),
    PRIMSERVE_QUEUED_UNARY(Select),      PRIMSERVE_QUEUED_UNARY(Unique),
    PRIMSERVE_QUEUED_UNARY(RunLengthEncode), PRIMSERVE_QUEUED_UNARY(ReduceByKey),
    PRIMSERVE_QUEUED_UNARY(AggregateByKey),  PRIMSERVE_QUEUED_UNARY(Sort),
    PRIMSERVE_QUEUED_UNARY(Gather),      PRIMSERVE_QUEUED_UNARY(Pipeline),
};

#undef PRIMSERVE_QUEUED_UNARY

}  // namespace

// One call of one method, from the moment it is asked for until its last
// event. Its events all come on its queue's thread, one at a time; only
// Answer and IsCancelled run on other threads.
class CompletionQueueUnary::Call final : public UnaryCall {
 public:
  // Asks gRPC for the next call of `method` on `queue`.
  static void Ask(CompletionQueueUnary* owner, grpc::ServerCompletionQueue* queue,
                  const UnaryMethod* method) {
    auto* call = new Call(owner, queue, method);
    owner->Hold();
    // Comes once the call has ended, only for a call handed over.
    call->context_.AsyncNotifyWhenDone(&call->ended_);
    method->request(owner->service_, &call->context_, &call->request_, &call->responder_, queue,
                    &call->handed_over_);
  }

  // What gRPC gets as a tag: the event and its call.
  class Event {
   public:
    Event(Call* call, void (Call::*on)(bool ok)) : call_(call), on_(on) {}
    void Fire(bool ok) { (call_->*on_)(ok); }

   private:
    Call* const call_;
    void (Call::*const on_)(bool ok);
  };

  const grpc::ServerContextBase& context() const override { return context_; }
  bool IsCancelled() const override { return cancelled_.load(std::memory_order_relaxed); }

  void Answer(grpc::ByteBuffer answer, const grpc::Status& status) override {
    CompletionQueueUnary* const owner = owner_;
    if (status.ok()) {
      responder_.Finish(answer, status, &answered_);
    } else {
      responder_.FinishWithError(status, &answered_);
    }
    // The queue's thread may have freed the call by now.
    owner->Release();
  }

 private:
  Call(CompletionQueueUnary* owner, grpc::ServerCompletionQueue* queue, const UnaryMethod* method)
      : owner_(owner), queue_(queue), method_(method) {}

  void OnHandedOver(bool ok) {
    if (!ok) {  // the server shut down before a call came: no other event
      owner_->Release();
      delete this;
      return;
    }
    if (!owner_->stopping()) Ask(owner_, queue_, method_);
    events_left_ = 2;  // ended_ and answered_
    // A task run here would hold every other call of this queue until it
    // ended (and, on a GPU, this thread waiting for the device): the
    // engine's threads run it.
    method_->serve(owner_->service_->environment(), this, request_, sent_,
                   /*may_run_here=*/false);
  }

  // Before Answer, only a cancelled call ends (IsCancelled is safe from now
  // on); the engine stops working on it.
  void OnEnded(bool /*ok*/) {
    if (context_.IsCancelled()) cancelled_.store(true, std::memory_order_relaxed);
    Left();
  }

  // The answer and status went, or the call had ended without them.
  void OnAnswered(bool /*ok*/) { Left(); }

  void Left() {
    if (--events_left_ > 0) return;
    sent_->Signal();
    delete this;
  }

  CompletionQueueUnary* const owner_;
  grpc::ServerCompletionQueue* const queue_;
  const UnaryMethod* const method_;
  grpc::ServerContext context_;
  grpc::ByteBuffer request_;
  Responder responder_{&context_};
  const std::shared_ptr<AnswerSent> sent_ = std::make_shared<AnswerSent>();
  std::atomic<bool> cancelled_{false};
  int events_left_ = 0;  // on the queue's thread only
  Event handed_over_{this, &Call::OnHandedOver};
  Event ended_{this, &Call::OnEnded};
  Event answered_{this, &Call::OnAnswered};
};

CompletionQueueUnary::CompletionQueueUnary(QueuedPrimitivesService* service,
                                           grpc::ServerBuilder* builder, int queues)
    : service_(service) {
  for (int i = 0; i < queues; ++i) queues_.push_back(builder->AddCompletionQueue());
}

CompletionQueueUnary::~CompletionQueueUnary() { Shutdown(); }

void CompletionQueueUnary::Start() {
  started_ = true;
  for (const std::unique_ptr<grpc::ServerCompletionQueue>& queue : queues_) {
    for (const UnaryMethod& method : kUnaryMethods) {
      for (int i = 0; i < kRequestsPerMethod; ++i) Call::Ask(this, queue.get(), &method);
    }
    threads_.emplace_back([queue = queue.get()] {
      void* tag = nullptr;
      bool ok = false;
      while (queue->Next(&tag, &ok)) static_cast<Call::Event*>(tag)->Fire(ok);
    });
  }
}

void CompletionQueueUnary::Release() {
  if (live_.fetch_sub(1) == 1 && stopping_.load()) quiet_.Notify();
}

void CompletionQueueUnary::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  stopping_.store(true);
  if (live_.load() != 0) quiet_.WaitForNotification();
  // Nothing more is asked or answered: what the queues still hold are the
  // ended and answered events of the last calls.
  for (const std::unique_ptr<grpc::ServerCompletionQueue>& queue : queues_) queue->Shutdown();
  if (started_) {
    for (std::thread& thread : threads_) thread.join();
  } else {
    for (const std::unique_ptr<grpc::ServerCompletionQueue>& queue : queues_) {
      void* tag = nullptr;
      bool ok = false;
      while (queue->Next(&tag, &ok)) {
      }
    }
  }
}

}  // namespace primserve
