// The unary Primitives RPCs on gRPC's completion-queue API
// (ServerOptions::rpc_api, --rpc_api=completion_queue): a set of completion
// queues, each drained by one thread of its own, asks gRPC for each method's
// calls, serves each call it gets (ServeUnary, as the callback API does, but
// never running its task on the queue's thread: --run_small_requests_inline
// is the callback API's) and sends its answer from the task's completion, on
// whichever thread completes it. Multiplex and the streams stay callback
// methods.
#ifndef PRIMSERVE_SERVER_RPC_COMPLETION_QUEUE_UNARY_H_
#define PRIMSERVE_SERVER_RPC_COMPLETION_QUEUE_UNARY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/server_builder.h"
#include "server/rpc/service.h"

namespace primserve {

class CompletionQueueUnary {
 public:
  // Calls of each method gRPC may hand each queue before the queue's thread
  // asks for more: a burst of new calls waits for none to be asked.
  static constexpr int kRequestsPerMethod = 8;

  // Adds `queues` (at least 1) completion queues to `builder`, with which
  // `service` (not owned; outlives this) is registered. Before
  // builder->BuildAndStart().
  CompletionQueueUnary(QueuedPrimitivesService* service, grpc::ServerBuilder* builder,
                       int queues);
  CompletionQueueUnary(const CompletionQueueUnary&) = delete;
  CompletionQueueUnary& operator=(const CompletionQueueUnary&) = delete;
  ~CompletionQueueUnary();  // Shutdown()

  // Once the server has started: asks for calls and starts the threads.
  void Start();

  // After the gRPC server's Shutdown, once every task it admitted has
  // completed or will (the scheduler shut down): asks for no more calls,
  // waits until every call gRPC handed over has been answered, then shuts
  // the queues down, drains them (every call's last event frees it) and
  // joins their threads. A second call returns at once.
  void Shutdown();

  // Calls asked for and not yet handed over, and calls handed over and not
  // yet answered.
  int64_t live() const { return live_.load(); }

 private:
  class Call;

  // A call was asked for or handed over (before it is asked for).
  void Hold() { live_.fetch_add(1); }
  // A request came back empty, or a call was answered.
  void Release();
  bool stopping() const { return stopping_.load(); }

  QueuedPrimitivesService* const service_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  std::atomic<int64_t> live_{0};
  std::atomic<bool> stopping_{false};
  // Notified when live_ drops to 0 once stopping_ is set.
  absl::Notification quiet_;
  bool started_ = false;
  bool shut_down_ = false;
};

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_COMPLETION_QUEUE_UNARY_H_
