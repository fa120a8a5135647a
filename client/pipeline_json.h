// A Pipeline request from JSON (protobuf's JSON mapping of PipelineRequest:
// field names as in the .proto or lowerCamelCase, arrays' data base64), and
// its answer described for primctl.
#ifndef PRIMSERVE_CLIENT_PIPELINE_JSON_H_
#define PRIMSERVE_CLIENT_PIPELINE_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

// The request in the file at `path` ("-": standard input); INVALID_ARGUMENT
// saying what is wrong with it.
absl::StatusOr<v1::PipelineRequest> ReadPipelineRequest(const std::string& path);

// The answer as JSON (protobuf's mapping, the .proto's field names), one
// line.
std::string PipelineResponseJson(const v1::PipelineResponse& response);

// One line per returned step: its index, its kind and each array's elements
// (or where it was stored).
std::string PipelineResponseSummary(const v1::PipelineResponse& response);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_PIPELINE_JSON_H_
