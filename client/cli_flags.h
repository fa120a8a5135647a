// Command-line pieces shared by the client tools (primctl, primload): the
// parsing of the flag values they have in common and how a bad one exits.
#ifndef PRIMSERVE_CLIENT_CLI_FLAGS_H_
#define PRIMSERVE_CLIENT_CLI_FLAGS_H_

#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "core/primitives.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

// The --address flag's help: the tools dial it with PrimitivesClient::Connect.
inline constexpr char kAddressFlagHelp[] =
    "The server, host:port; or several, spread round robin over those that report healthy, "
    "with calls retried on UNAVAILABLE: ipv4:10.0.0.1:50051,10.0.0.2:50051 or a DNS name "
    "with an address per server, dns:///primserve-headless:50051.";

// absl::ParseCommandLine, except that a rejected command line (or --help)
// exits with 2 rather than absl's 1: the tools keep 1 for failed calls.
std::vector<char*> ParseCommandLineOrExitTwo(int argc, char** argv);

// Prints what is wrong with `program`'s command line and where its usage is;
// returns 2, the tools' exit status for a bad command line.
int UsageError(absl::string_view program, const absl::Status& status);

// The value `table` pairs with the --`flag` value `name`; else an error that
// lists the names it takes.
template <typename T>
absl::StatusOr<T> Lookup(absl::string_view flag, absl::string_view name,
                         std::initializer_list<std::pair<absl::string_view, T>> table) {
  std::vector<absl::string_view> names;
  for (const auto& [key, value] : table) {
    if (key == name) return value;
    names.push_back(key);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", name, " is not one of ", absl::StrJoin(names, ", ")));
}

// The element type named by the --`flag` value `name` (int32, ..., float64).
absl::StatusOr<DType> ParseDType(absl::string_view flag, absl::string_view name);

// The --op value `name`: sum, prod, min, max, argmin or argmax.
absl::StatusOr<Op> ParseOp(absl::string_view name);

// The --predicate value `name`: nonzero, eq, ne, lt, le, gt, ge, and
// in_range where the tool takes an upper bound (`with_in_range`).
absl::StatusOr<PredicateKind> ParsePredicate(absl::string_view name, bool with_in_range);

// The --output value `name` of a select: values, indices, values_and_indices
// or count.
absl::StatusOr<v1::SelectRequest::Output> ParseSelectOutput(absl::string_view name);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_CLI_FLAGS_H_
