// What the transport records of each call (unary or multiplexed) into the
// metrics: its labels, read from the request as sent, and its outcome.
#ifndef PRIMSERVE_SERVER_RPC_CALL_RECORD_H_
#define PRIMSERVE_SERVER_RPC_CALL_RECORD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/rpc.h"
#include "google/protobuf/message.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "server/engine/metrics.h"

namespace primserve {

// The metric labels of a call, read from the request as sent (they may be
// invalid; Metrics maps unknown values to "none"). 0 is "no op".
struct CallLabels {
  Rpc rpc;
  int op;
  int dtype;
};
CallLabels LabelsOf(const v1::ScanRequest& r);
CallLabels LabelsOf(const v1::ReduceRequest& r);
CallLabels LabelsOf(const v1::SelectRequest& r);
CallLabels LabelsOf(const v1::UniqueRequest& r);
CallLabels LabelsOf(const v1::RunLengthEncodeRequest& r);
CallLabels LabelsOf(const v1::ReduceByKeyRequest& r);
CallLabels LabelsOf(const v1::AggregateByKeyRequest& r);
CallLabels LabelsOf(const v1::SortRequest& r);
CallLabels LabelsOf(const v1::GatherRequest& r);
CallLabels LabelsOf(const v1::PipelineRequest& r);

// One call from receipt to answer, as the metrics see it. Start() counts it
// in flight; Done() records its outcome and takes it out of flight.
struct CallRecord {
  Metrics* metrics = nullptr;  // null: record nothing
  CallLabels labels{};
  absl::Time received;
  uint64_t bytes_in = 0;

  static CallRecord Start(Metrics* metrics, const CallLabels& labels,
                          const google::protobuf::Message& request);
  // `bytes_in`: the request's size on the wire.
  static CallRecord Start(Metrics* metrics, const CallLabels& labels, uint64_t bytes_in);
  // `response` is null unless `status` is OK; `elements` counts only then.
  void Done(const absl::Status& status, const google::protobuf::Message* response,
            uint64_t elements) const;
  // The same with the response's size on the wire (a framed response).
  void Done(const absl::Status& status, uint64_t bytes_out, uint64_t elements) const;
};

// Counts a request refused at validation by its reason.
void RecordRefusal(Metrics* metrics, const absl::Status& status);

}  // namespace primserve

#endif  // PRIMSERVE_SERVER_RPC_CALL_RECORD_H_
