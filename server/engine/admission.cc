#include "server/engine/admission.h"

#include <memory>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace primserve {
namespace {

// Charged for every request on top of its bytes: the fixed cost of a call,
// so that floods of empty requests are not free.
constexpr uint64_t kRequestOverheadBytes = 4096;

uint64_t RequestBytes(const Operation& operation) {
  auto offsets = [](absl::Span<const uint64_t> s) { return s.size() * sizeof(uint64_t); };
  return std::visit(
      Overloaded{
          [&](const ScanOperation& o) { return o.input.bytes.size() + offsets(o.segment_offsets); },
          [&](const ReduceOperation& o) {
            return o.input.bytes.size() + offsets(o.segment_offsets);
          },
          [&](const SelectOperation& o) {
            return o.input.bytes.size() + (o.flags ? o.flags->bytes.size() : 0);
          },
          [&](const UniqueOperation& o) { return o.input.bytes.size(); },
          [&](const RunLengthEncodeOperation& o) { return o.input.bytes.size(); },
          [&](const ReduceByKeyOperation& o) {
            return o.keys.bytes.size() + o.values.bytes.size();
          },
          [&](const AggregateByKeyOperation& o) {
            return o.keys.bytes.size() + o.values.bytes.size();
          },
          [&](const SortOperation& o) {
            return o.keys.bytes.size() + (o.values ? o.values->bytes.size() : 0) +
                   offsets(o.segment_offsets);
          },
          [&](const GatherOperation& o) {
            return o.values.bytes.size() + o.indices.bytes.size();
          },
          // Its steps' inputs, the intermediates among them at their largest:
          // memory the pipeline holds while it runs.
          [&](const PipelineOperation& o) {
            uint64_t total = 0;
            for (const PipelineStep& step : o.steps) {
              total = SaturatingAdd(total, RequestBytes(step.operation));
            }
            return total;
          },
      },
      operation);
}

// The reason a waiting task can no longer run, or OK.
absl::Status Dead(const Task& task, absl::Time now) {
  if (task.is_cancelled && task.is_cancelled()) {
    return absl::CancelledError("the caller cancelled the request while it waited its turn");
  }
  if (now >= task.deadline) {
    return absl::DeadlineExceededError("the deadline passed while the request waited its turn");
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t WaitingBytes(const Operation& operation) {
  return SaturatingAdd(RequestBytes(operation), kRequestOverheadBytes);
}

uint64_t AdmissionCost(const Operation& operation) {
  return SaturatingAdd(SaturatingAdd(RequestBytes(operation), MaxAnswerBytes(operation)),
                       kRequestOverheadBytes);
}

std::string PeerKey(const std::string& peer) {
  if (!absl::StartsWith(peer, "ipv4:") && !absl::StartsWith(peer, "ipv6:")) return peer;
  const size_t colon = peer.rfind(':');
  return colon > 4 ? peer.substr(0, colon) : peer;
}

FairAdmission::FairAdmission(const AdmissionOptions& options, Scheduler* next, Metrics* metrics)
    : options_(options), next_(next), metrics_(metrics) {
  sweeper_ = std::thread([this] { SweepLoop(); });
}

FairAdmission::~FairAdmission() { Shutdown(); }

absl::Status FairAdmission::Schedule(std::unique_ptr<Task>* task) {
  return Enter(task, /*may_run=*/false);
}

absl::Status FairAdmission::ScheduleOrRun(std::unique_ptr<Task>* task) {
  return Enter(task, /*may_run=*/true);
}

bool FairAdmission::Fits(const Peer& peer, uint64_t cost) const {
  const bool peer_fits =
      peer.in_flight == 0 || peer.in_flight + cost <= options_.max_peer_in_flight_bytes;
  const bool total_fits = in_flight_ == 0 || in_flight_ + cost <= options_.max_in_flight_bytes;
  return peer_fits && total_fits;
}

namespace {

// The bytes of an answer's arrays held in memory, which wait in the
// transport until the client reads them; an answer written in place (a CUDA
// region) waits nowhere.
uint64_t AnswerBytes(Result& result) {
  uint64_t bytes = 0;
  ForEachArray(result, [&bytes](HostArray& array) { bytes += array.data().size(); });
  return bytes;
}

}  // namespace

std::shared_ptr<absl::AnyInvocable<void(absl::StatusOr<Result>)>> FairAdmission::ReleaseWhenDone(
    Task* task, const std::string& peer, uint64_t cost) {
  // The cost is freed once the answer has been sent, where the caller says
  // when that is (Task::sent), else once it has been handed to the transport.
  auto done =
      std::make_shared<absl::AnyInvocable<void(absl::StatusOr<Result>)>>(std::move(task->done));
  task->done = [this, peer, cost, done, sent = task->sent](absl::StatusOr<Result> result) {
    if (sent != nullptr && result.ok()) {
      HoldUntilSent(peer, cost, AnswerBytes(*result), *sent);
      (*done)(std::move(result));
      return;
    }
    (*done)(std::move(result));
    Release(peer, cost);
  };
  return done;
}

void FairAdmission::HoldUntilSent(const std::string& peer, uint64_t cost, uint64_t answer_bytes,
                                  AnswerSent& sent) {
  {
    absl::MutexLock lock(&mu_);
    peers_[peer].unsent += answer_bytes;
    unsent_ += answer_bytes;
  }
  sent.Then([this, peer, cost, answer_bytes] {
    {
      absl::MutexLock lock(&mu_);
      peers_[peer].unsent -= answer_bytes;
      unsent_ -= answer_bytes;
    }
    Release(peer, cost);
  });
}

absl::Status FairAdmission::UnsentRefusal(const Peer& peer) const {
  // Reaching a bound refuses: one answer as large as the bound, unread, is
  // already all a caller may leave waiting.
  if (peer.unsent > 0 && peer.unsent >= options_.max_peer_unsent_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this caller has ", peer.unsent, " bytes of answers it has not read yet (the bound is ",
        options_.max_peer_unsent_bytes, "); read them, then retry"));
  }
  if (unsent_ > 0 && unsent_ >= options_.max_unsent_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server holds ", unsent_, " bytes of answers its callers have not read yet (the "
        "bound is ", options_.max_unsent_bytes, "); retry later"));
  }
  return absl::OkStatus();
}

absl::Status FairAdmission::QueueRefusal(const Peer& peer, uint64_t bytes) const {
  if (peer.queue.size() >= options_.max_peer_queued_tasks) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this caller already has ", options_.max_peer_queued_tasks,
                     " requests waiting for their turn; retry later"));
  }
  // One request may wait whatever its size, of a caller and of everyone.
  if (!peer.queue.empty() && peer.queued_bytes + bytes > options_.max_peer_queued_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this caller already has ", peer.queued_bytes,
        " bytes of requests waiting for their turn (the bound is ", options_.max_peer_queued_bytes,
        "); retry later"));
  }
  if (queued_bytes_ > 0 && queued_bytes_ + bytes > options_.max_queued_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server already holds ", queued_bytes_,
        " bytes of requests waiting for their turn (the bound is ", options_.max_queued_bytes,
        "); retry later"));
  }
  return absl::OkStatus();
}

absl::Status FairAdmission::Enter(std::unique_ptr<Task>* task, bool may_run) {
  const uint64_t cost = AdmissionCost((*task)->operation);
  std::vector<Handoff> admitted;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    Peer& peer = peers_[(*task)->peer];
    if (absl::Status unsent = UnsentRefusal(peer); !unsent.ok()) {
      ForgetIfIdle((*task)->peer);
      if (metrics_ != nullptr) metrics_->Rejected(RejectReason::kQueueFull);
      return unsent;
    }
    // Nothing of this caller waits and the task fits: admitted at once, as a
    // pass over the turns would admit it, without a queue or a hand-off.
    if (peer.queue.empty() && Fits(peer, cost)) {
      // Only the one request in the server may run on its caller's thread:
      // under load the batch threads share the work with gRPC's threads.
      may_run = may_run && in_flight_ == 0;
      peer.in_flight += cost;
      in_flight_ += cost;
    } else {
      const uint64_t bytes = WaitingBytes((*task)->operation);
      if (absl::Status full = QueueRefusal(peer, bytes); !full.ok()) {
        ForgetIfIdle((*task)->peer);
        if (metrics_ != nullptr) metrics_->Rejected(RejectReason::kQueueFull);
        return full;
      }
      if (peer.queue.empty()) turns_.push_back((*task)->peer);
      peer.queue.push_back({std::move(*task), cost, bytes});
      peer.queued_bytes += bytes;
      queued_bytes_ += bytes;
      ++queued_;
      admitted = TakeAdmitted();
    }
  }
  if (*task != nullptr) {
    const std::string peer = (*task)->peer;
    auto done = ReleaseWhenDone(task->get(), peer, cost);
    absl::Status scheduled = may_run ? next_->ScheduleOrRun(task) : next_->Schedule(task);
    if (scheduled.ok()) return absl::OkStatus();
    // Answered as a task refused after waiting is (`next` recorded its own
    // refusal).
    (*done)(scheduled);
    {
      absl::MutexLock lock(&mu_);
      Free(peer, cost);
      admitted = TakeAdmitted();
    }
    HandOn(std::move(admitted));
    return absl::OkStatus();
  }
  HandOn(std::move(admitted));
  return absl::OkStatus();
}

std::vector<FairAdmission::Handoff> FairAdmission::TakeAdmitted() {
  std::vector<Handoff> admitted;
  // One pass over the turns without a task admitted means none fits now.
  for (size_t refused = 0; !turns_.empty() && refused < turns_.size();) {
    std::string name = std::move(turns_.front());
    turns_.pop_front();
    Peer& peer = peers_[name];
    const uint64_t cost = peer.queue.front().cost;
    if (!Fits(peer, cost)) {
      turns_.push_back(std::move(name));
      ++refused;
      continue;
    }
    refused = 0;
    peer.in_flight += cost;
    in_flight_ += cost;
    --queued_;
    peer.queued_bytes -= peer.queue.front().bytes;
    queued_bytes_ -= peer.queue.front().bytes;
    admitted.push_back({name, std::move(peer.queue.front())});
    peer.queue.pop_front();
    if (!peer.queue.empty()) turns_.push_back(std::move(name));
  }
  return admitted;
}

void FairAdmission::HandOn(std::vector<Handoff> admitted) {
  // Tasks answered here (dead, or refused by `next`) free their cost, which
  // may admit more: a loop, not recursion, however many that is.
  while (!admitted.empty()) {
    std::vector<std::pair<std::string, uint64_t>> freed;
    const absl::Time now = absl::Now();
    for (Handoff& handoff : admitted) {
      std::unique_ptr<Task>& task = handoff.waiting.task;
      const uint64_t cost = handoff.waiting.cost;
      if (absl::Status dead = Dead(*task, now); !dead.ok()) {
        if (metrics_ != nullptr) {
          metrics_->Rejected(absl::IsCancelled(dead) ? RejectReason::kCancelled
                                                     : RejectReason::kDeadline);
        }
        task->done(dead);
        freed.emplace_back(std::move(handoff.peer), cost);
        continue;
      }
      auto done = ReleaseWhenDone(task.get(), handoff.peer, cost);
      if (absl::Status scheduled = next_->Schedule(&task); !scheduled.ok()) {
        (*done)(scheduled);  // `next` recorded its own refusal
        freed.emplace_back(std::move(handoff.peer), cost);
      }
    }
    absl::MutexLock lock(&mu_);
    for (const auto& [peer, cost] : freed) Free(peer, cost);
    admitted = TakeAdmitted();
  }
}

void FairAdmission::Release(const std::string& peer, uint64_t cost) {
  std::vector<Handoff> admitted;
  {
    absl::MutexLock lock(&mu_);
    Free(peer, cost);
    admitted = TakeAdmitted();
  }
  HandOn(std::move(admitted));
}

void FairAdmission::Free(const std::string& peer, uint64_t cost) {
  peers_[peer].in_flight -= cost;
  in_flight_ -= cost;
  ForgetIfIdle(peer);
}

void FairAdmission::ForgetIfIdle(const std::string& peer) {
  auto it = peers_.find(peer);
  if (it != peers_.end() && it->second.queue.empty() && it->second.in_flight == 0) {
    peers_.erase(it);
  }
}

void FairAdmission::SweepLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](FairAdmission* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return self->stopping_ || self->queued_ > 0;
        },
        this));
    if (stopping_) return;
    std::vector<std::pair<std::unique_ptr<Task>, absl::Status>> dead;
    const absl::Time now = absl::Now();
    for (auto turn = turns_.begin(); turn != turns_.end();) {
      Peer& peer = peers_[*turn];
      for (auto it = peer.queue.begin(); it != peer.queue.end();) {
        if (absl::Status why = Dead(*it->task, now); !why.ok()) {
          dead.emplace_back(std::move(it->task), why);
          peer.queued_bytes -= it->bytes;
          queued_bytes_ -= it->bytes;
          it = peer.queue.erase(it);
          --queued_;
        } else {
          ++it;
        }
      }
      if (peer.queue.empty()) {
        ForgetIfIdle(*turn);
        turn = turns_.erase(turn);
      } else {
        ++turn;
      }
    }
    if (!dead.empty()) {
      mu_.Unlock();
      for (auto& [task, why] : dead) {
        if (metrics_ != nullptr) {
          metrics_->Rejected(absl::IsCancelled(why) ? RejectReason::kCancelled
                                                    : RejectReason::kDeadline);
        }
        task->done(why);
      }
      mu_.Lock();
    }
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.sweep_interval);
  }
}

void FairAdmission::Shutdown() {
  std::vector<std::unique_ptr<Task>> waiting;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (const std::string& name : turns_) {
      for (Waiting& w : peers_[name].queue) waiting.push_back(std::move(w.task));
      peers_[name].queue.clear();
      peers_[name].queued_bytes = 0;
      ForgetIfIdle(name);
    }
    turns_.clear();
    queued_ = 0;
    queued_bytes_ = 0;
  }
  sweeper_.join();
  for (std::unique_ptr<Task>& task : waiting) {
    task->done(absl::UnavailableError("the server is shutting down"));
  }
}

uint64_t FairAdmission::queued() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

uint64_t FairAdmission::queued_bytes() const {
  absl::MutexLock lock(&mu_);
  return queued_bytes_;
}

uint64_t FairAdmission::in_flight_bytes() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

uint64_t FairAdmission::unsent_bytes() const {
  absl::MutexLock lock(&mu_);
  return unsent_;
}

}  // namespace primserve
