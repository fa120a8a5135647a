#include "client/cli_flags.h"

#include <cstdio>
#include <cstdlib>

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

}  // namespace primserve
