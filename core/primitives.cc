#include "core/primitives.h"

namespace primserve {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kInt32: return "INT32";
    case DType::kInt64: return "INT64";
    case DType::kUint32: return "UINT32";
    case DType::kUint64: return "UINT64";
    case DType::kFloat32: return "FLOAT32";
    case DType::kFloat64: return "FLOAT64";
  }
  return "UNKNOWN";
}

const char* OpName(Op op) {
  switch (op) {
    case Op::kSum: return "SUM";
    case Op::kProd: return "PROD";
    case Op::kMin: return "MIN";
    case Op::kMax: return "MAX";
    case Op::kArgMin: return "ARGMIN";
    case Op::kArgMax: return "ARGMAX";
  }
  return "UNKNOWN";
}

const char* PredicateKindName(PredicateKind kind) {
  switch (kind) {
    case PredicateKind::kNonzero: return "NONZERO";
    case PredicateKind::kEq: return "EQ";
    case PredicateKind::kNe: return "NE";
    case PredicateKind::kLt: return "LT";
    case PredicateKind::kLe: return "LE";
    case PredicateKind::kGt: return "GT";
    case PredicateKind::kGe: return "GE";
    case PredicateKind::kInRange: return "IN_RANGE";
  }
  return "UNKNOWN";
}

}  // namespace primserve
