#include "server/rpc/call_record.h"

namespace primserve {

CallLabels LabelsOf(const v1::ScanRequest& r) { return {Rpc::kScan, r.op(), r.input().dtype()}; }
CallLabels LabelsOf(const v1::ReduceRequest& r) {
  return {Rpc::kReduce, r.op(), r.input().dtype()};
}
CallLabels LabelsOf(const v1::SelectRequest& r) { return {Rpc::kSelect, 0, r.input().dtype()}; }
CallLabels LabelsOf(const v1::UniqueRequest& r) { return {Rpc::kUnique, 0, r.input().dtype()}; }
CallLabels LabelsOf(const v1::RunLengthEncodeRequest& r) {
  return {Rpc::kRunLengthEncode, 0, r.input().dtype()};
}
CallLabels LabelsOf(const v1::ReduceByKeyRequest& r) {
  return {Rpc::kReduceByKey, r.op(), r.keys().dtype()};
}
CallLabels LabelsOf(const v1::AggregateByKeyRequest& r) {
  return {Rpc::kAggregateByKey, r.op(), r.keys().dtype()};
}
CallLabels LabelsOf(const v1::SortRequest& r) { return {Rpc::kSort, 0, r.keys().dtype()}; }
CallLabels LabelsOf(const v1::GatherRequest& r) { return {Rpc::kGather, 0, r.values().dtype()}; }
CallLabels LabelsOf(const v1::PipelineRequest&) { return {Rpc::kPipeline, 0, 0}; }

CallRecord CallRecord::Start(Metrics* metrics, const CallLabels& labels,
                             const google::protobuf::Message& request) {
  return Start(metrics, labels, metrics != nullptr ? request.ByteSizeLong() : 0);
}

CallRecord CallRecord::Start(Metrics* metrics, const CallLabels& labels, uint64_t bytes_in) {
  CallRecord call{metrics, labels, absl::Now(), bytes_in};
  if (metrics != nullptr) metrics->RequestStarted();
  return call;
}

void CallRecord::Done(const absl::Status& status, const google::protobuf::Message* response,
                      uint64_t elements) const {
  if (metrics == nullptr) return;
  Done(status, response != nullptr ? response->ByteSizeLong() : 0, elements);
}

void CallRecord::Done(const absl::Status& status, uint64_t bytes_out, uint64_t elements) const {
  if (metrics == nullptr) return;
  metrics->RequestDone(labels.rpc, labels.op, labels.dtype, status.code(), absl::Now() - received,
                       bytes_in, status.ok() ? bytes_out : 0, status.ok() ? elements : 0);
  metrics->RequestFinished();
}

void RecordRefusal(Metrics* metrics, const absl::Status& status) {
  if (metrics == nullptr) return;
  if (absl::IsInvalidArgument(status)) metrics->Rejected(RejectReason::kInvalid);
  if (absl::IsResourceExhausted(status)) metrics->Rejected(RejectReason::kTooLarge);
}

}  // namespace primserve
