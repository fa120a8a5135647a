#include "client/pipeline_json.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/primitives.h"
#include "google/protobuf/util/json_util.h"

namespace primserve {
namespace {

// "7 INT32", "buffer sums (1024 FLOAT32)", "shm r [0, +4096)".
std::string DescribeArray(const v1::Array& array) {
  const std::string dtype = v1::DType_Name(array.dtype());
  if (array.has_buffer()) {
    return absl::StrCat("buffer ", array.buffer().name(), " (", array.buffer().length(), " ",
                        dtype, ")");
  }
  if (array.has_shm()) {
    return absl::StrCat("shm ", array.shm().region(), " [", array.shm().offset(), ", +",
                        array.shm().byte_size(), ")");
  }
  const bool known = array.dtype() >= v1::INT32 && array.dtype() <= v1::FLOAT64;
  const size_t size = known ? DTypeSize(static_cast<DType>(array.dtype())) : 1;
  return absl::StrCat(array.data().size() / size, " ", dtype);
}

}  // namespace

absl::StatusOr<v1::PipelineRequest> ReadPipelineRequest(const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError("pipeline takes --request: a JSON PipelineRequest file, or -");
  }
  std::string json;
  if (path == "-") {
    json.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::InvalidArgumentError(absl::StrCat("--request: cannot read ", path));
    json.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  v1::PipelineRequest request;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &request);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--request ", path, " is not a PipelineRequest in protobuf's JSON mapping: ",
        std::string(parsed.message())));
  }
  return request;
}

std::string PipelineResponseJson(const v1::PipelineResponse& response) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  // A message of this process's own types always prints.
  (void)google::protobuf::util::MessageToJsonString(response, &json, options);
  return json;
}

std::string PipelineResponseSummary(const v1::PipelineResponse& response) {
  std::string out;
  for (const v1::PipelineResult& result : response.results()) {
    const auto* reflection = result.GetReflection();
    const auto* field = reflection->GetOneofFieldDescriptor(
        result, result.GetDescriptor()->FindOneofByName("response"));
    absl::StrAppend(&out, "step ", result.step(), " ", field != nullptr ? field->name() : "?");
    if (field != nullptr) {
      const google::protobuf::Message& answer = reflection->GetMessage(result, field);
      std::vector<const google::protobuf::FieldDescriptor*> fields;
      answer.GetReflection()->ListFields(answer, &fields);
      for (const auto* f : fields) {
        if (f->message_type() == v1::Array::descriptor()) {
          const auto& array =
              static_cast<const v1::Array&>(answer.GetReflection()->GetMessage(answer, f));
          absl::StrAppend(&out, " ", f->name(), ": ", DescribeArray(array));
        } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64) {
          absl::StrAppend(&out, " ", f->name(), ": ", answer.GetReflection()->GetUInt64(answer, f));
        }
      }
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace primserve
