// primload's output: the header line that says what the run sends, and the
// table of a row per target and level (and, with --mode=both, their ratio).
#ifndef PRIMSERVE_CLIENT_LOADGEN_REPORT_H_
#define PRIMSERVE_CLIENT_LOADGEN_REPORT_H_

#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

#include "client/loadgen/options.h"
#include "client/loadgen/stats.h"
#include "client/loadgen/workload.h"

namespace primserve {

// Prints what the run sends: the request, its sizes, how its arrays travel,
// the channels and the times.
void PrintHeader(const Options& options, const Workload& workload);

// The table's column names.
std::vector<std::string> Columns(const Options& options);

// The row of `target` at `level`.
std::vector<std::string> MeasuredRow(const std::string& target, const std::string& level,
                                     const LevelStats& stats, const Summary& s);

// Primitive over echo, column by column.
std::vector<std::string> RatioRow(const std::string& target, const std::string& level,
                                  const Summary& primitive, const Summary& echo);

// Prints rows aligned under the column names, and to a CSV file if given.
class Table {
 public:
  // Prints the column names; the first column is at least `first_width` wide.
  Table(std::vector<std::string> columns, size_t first_width, std::ofstream csv);

  void Print(const std::vector<std::string>& row);

 private:
  std::vector<size_t> widths_;
  std::ofstream csv_;
};

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_LOADGEN_REPORT_H_
