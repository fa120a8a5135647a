#include "client/cli_flags.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "absl/flags/parse.h"

namespace primserve {
namespace {

// absl::ParseCommandLine calls std::exit(1) itself; an atexit hook that sees
// parsing still under way turns that into 2.
bool parsing_flags = false;

void ExitTwoWhileParsingFlags() {
  if (!parsing_flags) return;
  std::fflush(nullptr);
  std::_Exit(2);
}

}  // namespace

std::vector<char*> ParseCommandLineOrExitTwo(int argc, char** argv) {
  parsing_flags = true;
  std::atexit(ExitTwoWhileParsingFlags);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  parsing_flags = false;
  return args;
}

int UsageError(absl::string_view program, const absl::Status& status) {
  std::cerr << program << ": " << status.message() << "\nrun '" << program
            << " --help' for usage\n";
  return 2;
}

absl::StatusOr<DType> ParseDType(absl::string_view flag, absl::string_view name) {
  return Lookup<DType>(flag, name,
                       {{"int32", DType::kInt32},
                        {"int64", DType::kInt64},
                        {"uint32", DType::kUint32},
                        {"uint64", DType::kUint64},
                        {"float32", DType::kFloat32},
                        {"float64", DType::kFloat64}});
}

absl::StatusOr<Op> ParseOp(absl::string_view name) {
  return Lookup<Op>("op", name,
                    {{"sum", Op::kSum},
                     {"prod", Op::kProd},
                     {"min", Op::kMin},
                     {"max", Op::kMax},
                     {"argmin", Op::kArgMin},
                     {"argmax", Op::kArgMax}});
}

absl::StatusOr<PredicateKind> ParsePredicate(absl::string_view name, bool with_in_range) {
  if (with_in_range && name == "in_range") return PredicateKind::kInRange;
  absl::StatusOr<PredicateKind> kind = Lookup<PredicateKind>("predicate", name,
                                                             {{"nonzero", PredicateKind::kNonzero},
                                                              {"eq", PredicateKind::kEq},
                                                              {"ne", PredicateKind::kNe},
                                                              {"lt", PredicateKind::kLt},
                                                              {"le", PredicateKind::kLe},
                                                              {"gt", PredicateKind::kGt},
                                                              {"ge", PredicateKind::kGe}});
  if (kind.ok() || !with_in_range) return kind;
  return absl::InvalidArgumentError(absl::StrCat(kind.status().message(), ", in_range"));
}

absl::StatusOr<v1::SelectRequest::Output> ParseSelectOutput(absl::string_view name) {
  return Lookup<v1::SelectRequest::Output>(
      "output", name,
      {{"values", v1::SelectRequest::VALUES},
       {"indices", v1::SelectRequest::INDICES},
       {"values_and_indices", v1::SelectRequest::VALUES_AND_INDICES},
       {"count", v1::SelectRequest::COUNT}});
}

}  // namespace primserve
