// One request of each RPC over each dtype, for tests that send the same
// requests another way (shared memory, resident buffers) and compare the
// answers with the inline ones.
#ifndef PRIMSERVE_TESTS_EVERY_RPC_H_
#define PRIMSERVE_TESTS_EVERY_RPC_H_

#include <cstdint>
#include <random>
#include <vector>

#include "client/client.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

// The request inside a MultiplexRequest.
inline google::protobuf::Message* Inner(v1::MultiplexRequest* m) {
  const auto* oneof = m->GetDescriptor()->FindOneofByName("request");
  const auto* field = m->GetReflection()->GetOneofFieldDescriptor(*m, oneof);
  return m->GetReflection()->MutableMessage(m, field);
}

template <typename T>
v1::Array Values(std::mt19937& rng, size_t n, int range) {
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(static_cast<int>(rng() % range) - range / 3);
  return PackArray<T>(v);
}

// One request of each RPC (two of Scan, Reduce and Select) over elements of T.
template <typename T>
std::vector<v1::MultiplexRequest> EveryRpc(std::mt19937& rng, uint64_t first_id) {
  constexpr size_t n = 1000;
  std::vector<v1::MultiplexRequest> requests;
  auto add = [&] {
    requests.emplace_back();
    requests.back().set_id(first_id + requests.size());
    return &requests.back();
  };
  {
    auto* r = add()->mutable_scan();
    *r->mutable_input() = Values<T>(rng, n, 100);
    r->set_op(v1::SUM);
  }
  {
    auto* r = add()->mutable_scan();
    *r->mutable_input() = Values<T>(rng, n, 100);
    r->set_op(v1::MAX);
    r->set_exclusive(true);
    for (uint64_t o : {0, 10, 10, 400}) r->add_segment_offsets(o);
  }
  {
    auto* r = add()->mutable_reduce();
    *r->mutable_input() = Values<T>(rng, n, 100);
    r->set_op(v1::SUM);
    for (uint64_t o : {0, 3, 500, 1000}) r->add_segment_offsets(o);
  }
  {
    auto* r = add()->mutable_reduce();
    *r->mutable_input() = Values<T>(rng, n, 100);
    r->set_op(v1::ARGMIN);
  }
  {
    auto* r = add()->mutable_select();
    *r->mutable_input() = Values<T>(rng, n, 100);
    r->mutable_predicate()->set_kind(v1::Predicate::GT);
    r->mutable_predicate()->mutable_operand()->set_int_value(10);
    r->set_output(v1::SelectRequest::VALUES_AND_INDICES);
  }
  {
    auto* r = add()->mutable_select();
    *r->mutable_input() = Values<T>(rng, n, 100);
    *r->mutable_flags() = Values<int32_t>(rng, n, 3);
    r->set_partition(true);
  }
  *add()->mutable_unique()->mutable_input() = Values<T>(rng, n, 3);
  *add()->mutable_run_length_encode()->mutable_input() = Values<T>(rng, n, 3);
  {
    auto* r = add()->mutable_reduce_by_key();
    *r->mutable_keys() = Values<T>(rng, n, 3);
    *r->mutable_values() = Values<T>(rng, n, 100);
    r->set_op(v1::PROD);
  }
  {
    auto* r = add()->mutable_aggregate_by_key();
    std::vector<int64_t> keys(n);
    for (int64_t& k : keys) k = static_cast<int64_t>(rng() % 20);
    *r->mutable_keys() = PackArray<int64_t>(keys);
    *r->mutable_values() = Values<T>(rng, n, 100);
    r->set_op(v1::MIN);
    r->set_num_keys(25);
  }
  return requests;
}

inline std::vector<v1::MultiplexRequest> EveryRpcAndDtype() {
  std::mt19937 rng(12);
  std::vector<v1::MultiplexRequest> all;
  for (auto requests : {EveryRpc<int32_t>(rng, 0), EveryRpc<int64_t>(rng, 100),
                        EveryRpc<uint32_t>(rng, 200), EveryRpc<uint64_t>(rng, 300),
                        EveryRpc<float>(rng, 400), EveryRpc<double>(rng, 500)}) {
    all.insert(all.end(), requests.begin(), requests.end());
  }
  return all;
}

}  // namespace primserve

#endif  // PRIMSERVE_TESTS_EVERY_RPC_H_
