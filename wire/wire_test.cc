// wire::ReceivedMessage and wire::Frame against protobuf's own parser and
// serializer: every parse, however the bytes are cut into slices, must give
// protobuf's verdict and, once its tokens are resolved, protobuf's fields;
// every framed message must parse (by protobuf) to the message framed, with
// its large payloads sent from the memory that held them.
#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "proto/primserve/v1/echo.pb.h"
#include "proto/primserve/v1/primitives.pb.h"
#include "wire/framing.h"
#include "wire/parallel_copy.h"
#include "wire/received.h"
#include "wire/testing.h"

namespace primserve::wire {
namespace {

using google::protobuf::Message;
using google::protobuf::util::MessageDifferencer;
using namespace std::string_literals;

// --- Building bytes and buffers ---------------------------------------------

void Varint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

std::string Tag(int field, int wire_type) {
  std::string out;
  Varint((static_cast<uint64_t>(field) << 3) | wire_type, &out);
  return out;
}

// A length-delimited field.
std::string Field(int field, absl::string_view bytes) {
  std::string out = Tag(field, 2);
  Varint(bytes.size(), &out);
  out.append(bytes.data(), bytes.size());
  return out;
}

std::string VarintField(int field, uint64_t value) {
  std::string out = Tag(field, 0);
  Varint(value, &out);
  return out;
}

// `n` bytes that differ from each other's and from any other call's.
std::string Bytes(size_t n, uint32_t seed) {
  std::string out(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

v1::Array MakeArray(v1::DType dtype, std::string data) {
  v1::Array array;
  array.set_dtype(dtype);
  array.set_data(std::move(data));
  return array;
}

// A ByteBuffer over copies of `bytes`, cut at `cuts` (ascending positions in
// [0, size]; repeated positions give empty slices).
grpc::ByteBuffer Cut(absl::string_view bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t previous = 0;
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.data() + previous, cut - previous);
    previous = cut;
  }
  slices.emplace_back(bytes.data() + previous, bytes.size() - previous);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer Whole(absl::string_view bytes) { return Cut(bytes, {}); }

// A ByteBuffer of slices over `bytes` itself (no copy; `bytes` must outlive it).
grpc::ByteBuffer StaticCut(absl::string_view bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t previous = 0;
  std::vector<size_t> all = cuts;
  all.push_back(bytes.size());
  for (size_t cut : all) {
    slices.emplace_back(bytes.data() + previous, cut - previous, grpc::Slice::STATIC_SLICE);
    previous = cut;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// --- Comparing with protobuf ------------------------------------------------

struct Parsed {
  bool accepted = false;
  bool tokens = false;
  size_t payloads = 0;
};

// Parses `buffer` (holding `bytes`) as a `prototype`-typed message with
// ReceivedMessage and `bytes` with protobuf, and checks the two agree.
::testing::AssertionResult SameAsProtobuf(const Message& prototype, const std::string& bytes,
                                          const grpc::ByteBuffer& buffer,
                                          Parsed* parsed = nullptr) {
  std::unique_ptr<Message> expected(prototype.New());
  const bool protobuf_ok = expected->ParseFromString(bytes);
  std::unique_ptr<Message> got(prototype.New());
  ReceivedMessage received;
  const absl::Status status = received.Parse(buffer, got.get());
  if (parsed != nullptr) *parsed = Parsed{status.ok(), received.tokens(), received.num_payloads()};
  if (status.ok() != protobuf_ok) {
    return ::testing::AssertionFailure()
           << "protobuf " << (protobuf_ok ? "accepts" : "rejects") << " but wire says "
           << status << " (tokens " << received.tokens() << ")";
  }
  if (!protobuf_ok) {
    if (status.code() != absl::StatusCode::kInvalidArgument) {
      return ::testing::AssertionFailure() << "rejected with " << status;
    }
    return ::testing::AssertionSuccess();
  }
  if (absl::Status resolved = ResolveAll(received, got.get()); !resolved.ok()) {
    return ::testing::AssertionFailure() << resolved;
  }
  MessageDifferencer differencer;
  std::string report;
  differencer.ReportDifferencesToString(&report);
  if (!differencer.Compare(*expected, *got)) {
    return ::testing::AssertionFailure() << "fields differ: " << report;
  }
  // And the documented comparison, for good measure.
  if (!MessageDifferencer::Equals(*expected, *got)) {
    return ::testing::AssertionFailure() << "MessageDifferencer::Equals false";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SameAsProtobuf(const Message& prototype, const std::string& bytes,
                                          Parsed* parsed = nullptr) {
  return SameAsProtobuf(prototype, bytes, Whole(bytes), parsed);
}

// Every cut of `bytes` at one position, and (when `pairs`) at two.
void ExpectSameForEveryCut(const Message& prototype, const std::string& bytes, bool pairs) {
  for (size_t i = 0; i <= bytes.size(); ++i) {
    ASSERT_TRUE(SameAsProtobuf(prototype, bytes, Cut(bytes, {i}))) << "cut at " << i;
    if (!pairs) continue;
    for (size_t j = i; j <= bytes.size(); ++j) {
      ASSERT_TRUE(SameAsProtobuf(prototype, bytes, Cut(bytes, {i, j})))
          << "cuts at " << i << ", " << j;
    }
  }
}

// Random cuts into up to `max_pieces` slices (empty ones included).
void ExpectSameForRandomCuts(const Message& prototype, const std::string& bytes, int rounds,
                             int max_pieces, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int round = 0; round < rounds; ++round) {
    std::vector<size_t> cuts(rng() % max_pieces);
    for (size_t& cut : cuts) cut = rng() % (bytes.size() + 1);
    std::sort(cuts.begin(), cuts.end());
    ASSERT_TRUE(SameAsProtobuf(prototype, bytes, Cut(bytes, cuts))) << "round " << round;
  }
}

size_t NonEmptyArrays(const Message& message) {
  if (auto* array = dynamic_cast<const v1::Array*>(&message)) return array->data().empty() ? 0 : 1;
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  size_t n = 0;
  for (const google::protobuf::FieldDescriptor* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        n += NonEmptyArrays(reflection->GetRepeatedMessage(message, field, i));
      }
    } else {
      n += NonEmptyArrays(reflection->GetMessage(message, field));
    }
  }
  return n;
}

// --- Sample messages ---------------------------------------------------------

v1::OutputLocation Location() {
  v1::OutputLocation location;
  location.mutable_values()->set_region("region-ä");
  location.mutable_values()->set_offset(4096);
  location.mutable_values()->set_byte_size(1 << 20);
  location.mutable_indices()->set_region("other");
  return location;
}

v1::ScanRequest Scan() {
  v1::ScanRequest r;
  *r.mutable_input() = MakeArray(v1::INT32, Bytes(40, 1));
  r.set_op(v1::MAX);
  r.set_exclusive(true);
  for (uint64_t s : {uint64_t{0}, uint64_t{3}, uint64_t{3}, uint64_t{9}, uint64_t{1} << 40}) r.add_segment_offsets(s);
  *r.mutable_output_location() = Location();
  r.set_reproducible(true);
  return r;
}

v1::ReduceRequest Reduce() {
  v1::ReduceRequest r;
  *r.mutable_input() = MakeArray(v1::FLOAT64, Bytes(48, 2));
  r.mutable_input()->mutable_shm()->set_region("in");
  r.set_op(v1::ARGMIN);
  for (uint64_t s : {uint64_t{0}, uint64_t{2}}) r.add_segment_offsets(s);
  r.set_reproducible(true);
  return r;
}

v1::SelectRequest SelectByPredicate() {
  v1::SelectRequest r;
  *r.mutable_input() = MakeArray(v1::INT64, Bytes(64, 3));
  r.mutable_predicate()->set_kind(v1::Predicate::IN_RANGE);
  r.mutable_predicate()->mutable_operand()->set_int_value(-5);
  r.mutable_predicate()->mutable_upper()->set_float_value(2.5);
  r.set_output(v1::SelectRequest::VALUES_AND_INDICES);
  r.set_partition(true);
  *r.mutable_output_location() = Location();
  return r;
}

v1::SelectRequest SelectByFlags() {
  v1::SelectRequest r;
  *r.mutable_input() = MakeArray(v1::UINT32, Bytes(36, 4));
  *r.mutable_flags() = MakeArray(v1::INT32, Bytes(36, 5));
  r.set_output(v1::SelectRequest::COUNT);
  return r;
}

v1::UniqueRequest Unique() {
  v1::UniqueRequest r;
  *r.mutable_input() = MakeArray(v1::FLOAT32, Bytes(28, 6));
  *r.mutable_output_location() = Location();
  return r;
}

v1::RunLengthEncodeRequest RunLengthEncode() {
  v1::RunLengthEncodeRequest r;
  *r.mutable_input() = MakeArray(v1::UINT64, Bytes(24, 7));
  r.mutable_output_buffers()->set_values("runs");
  r.mutable_output_buffers()->set_lengths("run.lengths");
  return r;
}

v1::ReduceByKeyRequest ReduceByKey() {
  v1::ReduceByKeyRequest r;
  // Keys from a resident buffer: a ref, no data, dtype unset.
  r.mutable_keys()->mutable_buffer()->set_name("keys-0");
  r.mutable_keys()->mutable_buffer()->set_offset(3);
  r.mutable_keys()->mutable_buffer()->set_length(8);
  *r.mutable_values() = MakeArray(v1::FLOAT32, Bytes(32, 9));
  r.mutable_output_buffers()->set_keys("out_keys");
  r.set_op(v1::PROD);
  r.set_reproducible(true);
  return r;
}

v1::AggregateByKeyRequest AggregateByKey() {
  v1::AggregateByKeyRequest r;
  *r.mutable_keys() = MakeArray(v1::UINT32, Bytes(20, 10));
  *r.mutable_values() = MakeArray(v1::INT64, Bytes(40, 11));
  r.set_op(v1::MIN);
  r.set_num_keys(1000);
  r.set_reproducible(true);
  return r;
}

v1::SortRequest Sort() {
  v1::SortRequest r;
  *r.mutable_keys() = MakeArray(v1::FLOAT64, Bytes(48, 15));
  *r.mutable_values() = MakeArray(v1::INT32, Bytes(24, 16));
  r.set_descending(true);
  r.set_return_indices(true);
  for (uint64_t start : {0, 2, 2, 5}) r.add_segment_offsets(start);
  return r;
}

v1::EchoRequest Echo() {
  v1::EchoRequest r;
  *r.add_arrays() = MakeArray(v1::INT32, Bytes(30, 12));
  *r.add_arrays() = MakeArray(v1::INT64, "");  // empty: no token
  *r.add_arrays() = MakeArray(v1::UINT64, Bytes(1, 13));
  *r.add_arrays() = MakeArray(v1::FLOAT64, Bytes(100, 14));
  r.set_response_bytes(12345);
  return r;
}

std::vector<v1::MultiplexRequest> Multiplexes() {
  std::vector<v1::MultiplexRequest> out(9);
  for (size_t i = 0; i < out.size(); ++i) out[i].set_id(1000 + i);
  *out[0].mutable_scan() = Scan();
  *out[1].mutable_reduce() = Reduce();
  *out[2].mutable_select() = SelectByPredicate();
  *out[3].mutable_select() = SelectByFlags();
  *out[4].mutable_unique() = Unique();
  *out[5].mutable_run_length_encode() = RunLengthEncode();
  *out[6].mutable_reduce_by_key() = ReduceByKey();
  *out[7].mutable_aggregate_by_key() = AggregateByKey();
  *out[8].mutable_sort() = Sort();
  return out;
}

// Every request message the service parses, populated.
std::vector<std::unique_ptr<Message>> AllRequests() {
  std::vector<std::unique_ptr<Message>> out;
  out.push_back(std::make_unique<v1::ScanRequest>(Scan()));
  out.push_back(std::make_unique<v1::ReduceRequest>(Reduce()));
  out.push_back(std::make_unique<v1::SelectRequest>(SelectByPredicate()));
  out.push_back(std::make_unique<v1::SelectRequest>(SelectByFlags()));
  out.push_back(std::make_unique<v1::UniqueRequest>(Unique()));
  out.push_back(std::make_unique<v1::RunLengthEncodeRequest>(RunLengthEncode()));
  out.push_back(std::make_unique<v1::ReduceByKeyRequest>(ReduceByKey()));
  out.push_back(std::make_unique<v1::AggregateByKeyRequest>(AggregateByKey()));
  out.push_back(std::make_unique<v1::SortRequest>(Sort()));
  out.push_back(std::make_unique<v1::EchoRequest>(Echo()));
  for (v1::MultiplexRequest& m : Multiplexes()) {
    out.push_back(std::make_unique<v1::MultiplexRequest>(std::move(m)));
  }
  return out;
}

// --- ReceivedMessage::Parse --------------------------------------------------

TEST(ParseTest, EveryRequestTypeInOneSlice) {
  for (const auto& request : AllRequests()) {
    SCOPED_TRACE(request->GetTypeName());
    const std::string bytes = request->SerializeAsString();
    Parsed parsed;
    ASSERT_TRUE(SameAsProtobuf(*request, bytes, &parsed));
    EXPECT_TRUE(parsed.tokens);
    EXPECT_EQ(parsed.payloads, NonEmptyArrays(*request));
    EXPECT_GT(parsed.payloads, 0u);
  }
}

TEST(ParseTest, ParsedMessageHoldsTokensNotPayloads) {
  const v1::ReduceByKeyRequest request = ReduceByKey();
  const std::string bytes = request.SerializeAsString();
  ReceivedMessage received;
  v1::ReduceByKeyRequest got;
  ASSERT_TRUE(received.Parse(Whole(bytes), &got).ok());
  ASSERT_TRUE(received.tokens());
  // The keys' buffer ref and output_buffers are small fields: parsed as
  // they are, no token.
  EXPECT_TRUE(got.keys().data().empty());
  EXPECT_EQ(got.keys().buffer().name(), "keys-0");
  EXPECT_EQ(got.keys().buffer().offset(), 3u);
  EXPECT_EQ(got.keys().buffer().length(), 8u);
  EXPECT_EQ(got.output_buffers().keys(), "out_keys");
  EXPECT_EQ(received.num_payloads(), 1u);
  EXPECT_EQ(got.values().data().size(), 8u);
  EXPECT_EQ(got.op(), v1::PROD);
  Payload* values = received.Find(got.values().data());
  ASSERT_NE(values, nullptr);
  EXPECT_EQ(std::string(values->Contiguous()), request.values().data());
}

TEST(ParseTest, EveryRequestTypeCutAnywhere) {
  for (const auto& request : AllRequests()) {
    SCOPED_TRACE(request->GetTypeName());
    const std::string bytes = request->SerializeAsString();
    ExpectSameForEveryCut(*request, bytes, /*pairs=*/false);
    ExpectSameForRandomCuts(*request, bytes, 300, 12, 77);
  }
}

// Two cuts at every pair of positions: splits inside tags, lengths (one- and
// two-byte), nested message headers and payloads, and empty slices between.
TEST(ParseTest, MultiplexCutAtEveryPairOfPositions) {
  v1::MultiplexRequest request;
  request.set_id(300);  // a two-byte varint
  *request.mutable_select() = SelectByFlags();
  // A payload whose length takes two bytes.
  request.mutable_select()->mutable_input()->set_data(Bytes(200, 20));
  const std::string bytes = request.SerializeAsString();
  ExpectSameForEveryCut(request, bytes, /*pairs=*/true);
}

TEST(ParseTest, EchoCutAtEveryPairOfPositions) {
  const v1::EchoRequest request = Echo();
  ExpectSameForEveryCut(request, request.SerializeAsString(), /*pairs=*/true);
}

TEST(ParseTest, PayloadOverManySlicesStaysInThem) {
  // A payload of 4000 bytes cut into many slices (each over 23 bytes, so
  // gRPC references them rather than inlining copies).
  v1::ScanRequest request;
  *request.mutable_input() = MakeArray(v1::INT32, Bytes(4000, 21));
  request.set_op(v1::SUM);
  const std::string bytes = request.SerializeAsString();
  const size_t start = bytes.find(request.input().data());
  ASSERT_NE(start, std::string::npos);
  std::vector<size_t> cuts;
  for (size_t c = start + 101; c < start + 4000; c += 333) cuts.push_back(c);
  // Each piece in memory of its own (gRPC merges static slices that are
  // adjacent in memory).
  std::vector<std::string> pieces;
  size_t previous = 0;
  for (size_t cut : cuts) {
    pieces.push_back(bytes.substr(previous, cut - previous));
    previous = cut;
  }
  pieces.push_back(bytes.substr(previous));
  std::vector<grpc::Slice> slices;
  for (const std::string& piece : pieces) {
    slices.emplace_back(piece.data(), piece.size(), grpc::Slice::STATIC_SLICE);
  }
  const grpc::ByteBuffer buffer(slices.data(), slices.size());
  ReceivedMessage received;
  v1::ScanRequest got;
  ASSERT_TRUE(received.Parse(buffer, &got).ok());
  ASSERT_TRUE(received.tokens());
  Payload* payload = received.Find(got.input().data());
  ASSERT_NE(payload, nullptr);
  ASSERT_EQ(payload->slices().size(), cuts.size() + 1);
  EXPECT_EQ(payload->size(), 4000u);
  // Each piece is a reference into the received memory, not a copy.
  size_t total = 0;
  for (size_t i = 0; i < payload->slices().size(); ++i) {
    const char* expected = i == 0 ? pieces[0].data() + start : pieces[i].data();
    EXPECT_EQ(reinterpret_cast<const char*>(payload->slices()[i].begin()), expected) << i;
    total += payload->slices()[i].size();
  }
  EXPECT_EQ(total, 4000u);
  const absl::string_view contiguous = payload->Contiguous();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(contiguous.data()) % 8, 0u);
  EXPECT_EQ(contiguous, request.input().data());
  // Copied once: the second call gives the same bytes.
  EXPECT_EQ(payload->Contiguous().data(), contiguous.data());
  EXPECT_TRUE(SameAsProtobuf(request, bytes, buffer));
}

// A payload over many slices of odd sizes, made contiguous by a copy pool
// cut into small chunks: the same bytes, copied once.
TEST(ParseTest, PayloadOverManySlicesIsCopiedByThePool) {
  v1::SelectRequest request;
  *request.mutable_input() = MakeArray(v1::INT64, Bytes(3 << 20, 22));
  const std::string bytes = request.SerializeAsString();
  std::vector<std::string> pieces;
  for (size_t at = 0, size = 1; at < bytes.size(); at += size, size = size * 7 % 100003 + 1) {
    pieces.push_back(bytes.substr(at, size));
  }
  std::vector<grpc::Slice> slices;
  for (const std::string& piece : pieces) {
    slices.emplace_back(piece.data(), piece.size(), grpc::Slice::STATIC_SLICE);
  }
  CopyPool pool(4, /*chunk_bytes=*/65537, /*min_parallel_bytes=*/1);
  ReceivedMessage received(nullptr, &pool);
  v1::SelectRequest got;
  ASSERT_TRUE(received.Parse(grpc::ByteBuffer(slices.data(), slices.size()), &got).ok());
  Payload* payload = received.Find(got.input().data());
  ASSERT_NE(payload, nullptr);
  ASSERT_GT(payload->slices().size(), 50u);
  const absl::string_view contiguous = payload->Contiguous();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(contiguous.data()) % 8, 0u);
  EXPECT_EQ(contiguous, request.input().data());
  EXPECT_EQ(payload->Contiguous().data(), contiguous.data());
}

TEST(ParseTest, AlignedPayloadInOneSliceIsNotCopied) {
  v1::ScanRequest request;
  *request.mutable_input() = MakeArray(v1::INT64, Bytes(1024, 22));
  const std::string bytes = request.SerializeAsString();
  const size_t start = bytes.find(request.input().data());
  ASSERT_NE(start, std::string::npos);
  for (size_t misalign = 0; misalign < 16; ++misalign) {
    SCOPED_TRACE(misalign);
    // The message at an address that puts the payload `misalign` bytes past
    // a multiple of 8.
    std::unique_ptr<uint64_t[]> storage(new uint64_t[(bytes.size() + 32) / 8 + 1]);
    char* base = reinterpret_cast<char*>(storage.get());
    const size_t offset = (misalign + 16 - start % 8) % 8 + (misalign >= 8 ? 8 : 0);
    std::memcpy(base + offset, bytes.data(), bytes.size());
    const absl::string_view message(base + offset, bytes.size());
    const char* payload_at = message.data() + start;
    ASSERT_EQ(reinterpret_cast<uintptr_t>(payload_at) % 8, misalign % 8);
    ReceivedMessage received;
    v1::ScanRequest got;
    ASSERT_TRUE(received.Parse(StaticCut(message, {}), &got).ok());
    absl::StatusOr<absl::string_view> resolved = received.Resolve(got.input().data());
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(resolved->data()) % 8, 0u);
    EXPECT_EQ(*resolved, request.input().data());
    if (misalign % 8 == 0) {
      EXPECT_EQ(resolved->data(), payload_at) << "an aligned payload in one slice was copied";
    } else {
      EXPECT_NE(resolved->data(), payload_at);
    }
  }
}

TEST(ParseTest, UnalignedPayloadsOfOddSizes) {
  // Payload sizes around the inlined-slice size and odd sizes, each at
  // every offset modulo 8 (a leading field of varying length shifts it).
  for (size_t size : {1, 7, 8, 9, 23, 24, 25, 63, 1001}) {
    for (uint64_t shift = 0; shift < 8; ++shift) {
      v1::EchoRequest request;
      // response_bytes' varint takes 1..8 bytes after its tag.
      request.set_response_bytes(shift == 0 ? 0 : (uint64_t{1} << (7 * shift)) - 1);
      *request.add_arrays() = MakeArray(v1::INT32, Bytes(size, size * 8 + shift));
      const std::string bytes = request.SerializeAsString();
      for (size_t cut : {size_t{0}, bytes.size() / 2, bytes.size() - 1}) {
        ASSERT_TRUE(SameAsProtobuf(request, bytes, StaticCut(bytes, {cut})))
            << size << " " << shift << " " << cut;
      }
    }
  }
}

TEST(ParseTest, EmptyMessageAndEmptyBuffers) {
  Parsed parsed;
  ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), "", &parsed));
  EXPECT_TRUE(parsed.accepted);
  EXPECT_EQ(parsed.payloads, 0u);
  ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), "", Cut("", {0, 0, 0})));
  // A buffer of no slices at all.
  grpc::ByteBuffer none(static_cast<const grpc::Slice*>(nullptr), 0);
  ReceivedMessage received;
  v1::MultiplexRequest got;
  got.set_id(5);  // cleared by Parse
  EXPECT_TRUE(received.Parse(none, &got).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(got, v1::MultiplexRequest()));
  // An invalid (default) ByteBuffer is an error, not a crash.
  EXPECT_EQ(received.Parse(grpc::ByteBuffer(), &got).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseTest, EmptyDataIsNoToken) {
  // data present on the wire with length 0, and absent.
  const std::string array = VarintField(1, v1::INT64) + Field(2, "");
  for (const std::string& bytes : {Field(1, array), Field(1, VarintField(1, v1::INT64))}) {
    Parsed parsed;
    ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), bytes, &parsed));
    EXPECT_TRUE(parsed.tokens);
    EXPECT_EQ(parsed.payloads, 0u);
  }
  ReceivedMessage received;
  v1::ScanRequest got;
  ASSERT_TRUE(received.Parse(Whole(Field(1, array)), &got).ok());
  EXPECT_TRUE(got.has_input());
  EXPECT_TRUE(got.input().data().empty());
  EXPECT_EQ(received.Find(got.input().data()), nullptr);
  absl::StatusOr<absl::string_view> resolved = received.Resolve(got.input().data());
  ASSERT_TRUE(resolved.ok());
  EXPECT_TRUE(resolved->empty());
}

TEST(ParseTest, DataTwiceInOneArrayLastWins) {
  const std::string first = Bytes(40, 30), second = Bytes(24, 31);
  const std::string cases[] = {
      Field(2, first) + VarintField(1, v1::INT32) + Field(2, second),
      Field(2, first) + Field(2, ""),  // the empty one wins
      Field(2, "") + Field(2, second),
      Field(2, first) + Field(2, second) + Field(2, first),
  };
  for (const std::string& array : cases) {
    const std::string bytes = VarintField(2, v1::SUM) + Field(1, array);
    Parsed parsed;
    ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), bytes, &parsed));
    ExpectSameForEveryCut(v1::ScanRequest(), bytes, /*pairs=*/false);
  }
  v1::ScanRequest expected;
  ASSERT_TRUE(expected.ParseFromString(Field(1, cases[0])));
  EXPECT_EQ(expected.input().data(), second);  // the test's premise
  ReceivedMessage received;
  v1::ScanRequest got;
  ASSERT_TRUE(received.Parse(Whole(Field(1, cases[0])), &got).ok());
  // The later replaced the earlier: one payload held, not one per occurrence.
  EXPECT_EQ(received.num_payloads(), 1u);
  EXPECT_EQ(*received.Resolve(got.input().data()), second);
}

// Heap bytes in use now (glibc's count: small blocks and mmapped ones).
size_t HeapInUse() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// A field of /proc/self/status ("VmRSS:", "VmHWM:") in bytes; 0 if absent.
size_t ProcStatusBytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size())) * 1024;
  }
  return 0;
}

// Starts VmHWM (peak resident size) again from the present VmRSS, once the
// heap has handed its free pages back (else a parse could reuse pages an
// earlier one left resident, and its peak would not show them).
bool ResetPeakRss() {
  malloc_trim(0);
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.close();
  return clear_refs.good();
}

// What a parse keeps, per byte received, for every kind of field a sender
// can repeat (issue 27: 20 MB of one-byte Array.data fields kept 1,032 MB,
// a payload and its slice vector per occurrence). Array.data and the
// messages holding it, given again, replace what they gave before; repeated
// integers keep protobuf's 8 bytes per element (RepeatedField, grown by
// doubling), the most per byte received: 4 per 2-byte unpacked element, 8
// per 1-byte packed one, each up to twice that while it grows (the bounds
// add the message itself). The parse's peak, resident, per byte received:
// the header rewritten with a token per payload (10 bytes for a 3-byte
// one-byte data field, in a growing buffer: 9.3x), and protobuf's array
// while it doubles (the old one beside the new: 24x for one-byte packed
// values, the most of any shape).
TEST(ParseTest, WhatAParseKeepsIsBoundedForEveryFieldKind) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers' allocators do not report through mallinfo2 nor trim";
#endif
  constexpr int kTimes = 1 << 20;
  const std::string byte = Field(2, "\x07");
  std::string one_array_data, input_again, multiplex_again, unpacked, packed_values;
  for (int i = 0; i < kTimes; ++i) {
    one_array_data += byte;
    input_again += Field(1, byte);
    multiplex_again += Field(2, Field(1, byte));
    unpacked += VarintField(4, i % 100);
    packed_values += static_cast<char>(i % 100);
  }
  struct Kind {
    const char* name;
    const Message& prototype;
    std::string bytes;
    double bound;       // kept bytes per byte received
    double peak_bound;  // resident bytes at the parse's peak per byte received
  };
  const Kind kinds[] = {
      {"Array.data again", v1::ScanRequest(), Field(1, one_array_data), 0.1, 12},
      {"input again", v1::ScanRequest(), input_again, 0.1, 8},
      {"Multiplex scan again", v1::MultiplexRequest(), multiplex_again, 0.1, 8},
      {"segment_offsets unpacked", v1::ScanRequest(), unpacked, 8.1, 16},
      {"segment_offsets packed", v1::ScanRequest(), Field(4, packed_values), 16.1, 25},
  };
  for (const Kind& kind : kinds) {
    const grpc::ByteBuffer buffer = Whole(kind.bytes);
    const size_t before = HeapInUse();
    std::unique_ptr<Message> message(kind.prototype.New());
    ReceivedMessage received;
    ASSERT_TRUE(ResetPeakRss());
    const size_t rss_before = ProcStatusBytes("VmRSS:");
    ASSERT_TRUE(received.Parse(buffer, message.get()).ok()) << kind.name;
    const size_t peak = ProcStatusBytes("VmHWM:") - rss_before;
    const size_t kept = HeapInUse() - before;
    const double per_byte = static_cast<double>(kept) / kind.bytes.size();
    const double peak_per_byte = static_cast<double>(peak) / kind.bytes.size();
    std::printf(
        "%-26s %8zu bytes received, %10zu kept (%.2fx), %10zu resident at the peak (%.2fx), %zu "
        "payloads\n",
        kind.name, kind.bytes.size(), kept, per_byte, peak, peak_per_byte, received.num_payloads());
    EXPECT_LE(per_byte, kind.bound) << kind.name;
    EXPECT_LE(peak_per_byte, kind.peak_bound) << kind.name;
    EXPECT_LE(received.num_payloads(), 1u) << kind.name;
  }
}

TEST(ParseTest, ArrayFieldRepeatedMerges) {
  const std::string data = Bytes(48, 32), other = Bytes(16, 33);
  const std::string cases[] = {
      // dtype, then data: merged into one Array.
      Field(1, VarintField(1, v1::INT32)) + Field(1, Field(2, data)),
      // data, then a dtype only: the data stays.
      Field(1, Field(2, data) + VarintField(1, v1::INT32)) + Field(1, VarintField(1, v1::INT64)),
      // data, then other data: the later wins.
      Field(1, Field(2, data)) + VarintField(2, v1::MIN) + Field(1, Field(2, other)),
      // data, then an empty Array message, then shm.
      Field(1, Field(2, data)) + Field(1, "") + Field(1, Field(3, Field(1, "r"))),
  };
  for (const std::string& bytes : cases) {
    ASSERT_TRUE(SameAsProtobuf(v1::ReduceRequest(), bytes));
    ExpectSameForEveryCut(v1::ReduceRequest(), bytes, /*pairs=*/false);
  }
  // The same, one level further down, through Multiplex.
  for (const std::string& bytes : cases) {
    const std::string multiplex =
        VarintField(1, 9) + Field(3, bytes) + Field(3, Field(1, VarintField(1, v1::UINT32)));
    ASSERT_TRUE(SameAsProtobuf(v1::MultiplexRequest(), multiplex));
  }
  // Echo's repeated Array: each occurrence is its own element.
  const std::string echo = Field(1, Field(2, data)) + Field(1, "") + Field(1, Field(2, other));
  Parsed parsed;
  ASSERT_TRUE(SameAsProtobuf(v1::EchoRequest(), echo, &parsed));
  EXPECT_EQ(parsed.payloads, 2u);
}

TEST(ParseTest, OneofSwitchesInSelect) {
  const std::string flags = Field(3, VarintField(1, v1::INT32) + Field(2, Bytes(32, 34)));
  const std::string flags2 = Field(3, Field(2, Bytes(40, 35)));
  const std::string predicate =
      Field(2, VarintField(1, v1::Predicate::GT) + Field(2, Tag(3, 1) + std::string(8, '\x01')));
  const std::string input = Field(1, VarintField(1, v1::INT32) + Field(2, Bytes(32, 36)));
  const std::string cases[] = {
      input + flags + predicate + flags2,  // flags, predicate, flags
      input + flags + predicate,           // ends on the predicate
      predicate + input + flags,           // ends on the flags
      input + flags + flags2,              // flags merged
      flags + predicate + input + flags2 + predicate,
  };
  for (const std::string& bytes : cases) {
    ASSERT_TRUE(SameAsProtobuf(v1::SelectRequest(), bytes));
    ExpectSameForEveryCut(v1::SelectRequest(), bytes, /*pairs=*/false);
  }
  // The final criterion is the one protobuf picks.
  ReceivedMessage received;
  v1::SelectRequest got;
  ASSERT_TRUE(received.Parse(Whole(cases[0]), &got).ok());
  ASSERT_TRUE(got.has_flags());
  EXPECT_EQ(*received.Resolve(got.flags().data()), Bytes(40, 35));
  ASSERT_TRUE(received.Parse(Whole(cases[1]), &got).ok());
  EXPECT_TRUE(got.has_predicate());
  // Multiplex's oneof: scan, then reduce.
  const std::string multiplex = Field(2, Field(1, Field(2, Bytes(24, 37)))) +
                                Field(3, Field(1, Field(2, Bytes(24, 38)))) + VarintField(1, 7);
  ASSERT_TRUE(SameAsProtobuf(v1::MultiplexRequest(), multiplex));
  v1::MultiplexRequest switched;
  ASSERT_TRUE(received.Parse(Whole(multiplex), &switched).ok());
  ASSERT_TRUE(switched.has_reduce());
  EXPECT_EQ(switched.id(), 7u);
  EXPECT_EQ(*received.Resolve(switched.reduce().input().data()), Bytes(24, 38));
}

TEST(ParseTest, UnknownFieldsAreKept) {
  const std::string array = Field(2, Bytes(32, 40));
  const std::string unknown = VarintField(100, 12345) + Tag(1000000, 5) + "abcd" +
                              Tag(536870911, 1) + "abcdefgh" + Field(77, "xyz") +
                              Field(78, Field(2, Bytes(32, 41)));  // looks like an Array
  const std::string cases[] = {
      unknown + Field(1, array),                    // top level
      Field(1, array + unknown),                    // inside the Array
      Field(1, array + Field(3, unknown)),          // inside shm
      Field(15, unknown) + Field(1, array),         // inside output_location
      Tag(1, 0) + "\x05" + Field(1, array),         // a known field with the wrong wire type
      Field(1, array) + Tag(2, 2) + "\x02\x08\x01",  // op as length-delimited
  };
  for (const std::string& bytes : cases) {
    Parsed parsed;
    ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), bytes, &parsed));
    EXPECT_TRUE(parsed.tokens);
    EXPECT_EQ(parsed.payloads, 1u);
    ExpectSameForEveryCut(v1::ScanRequest(), bytes, /*pairs=*/false);
  }
  // Two levels down, in Multiplex.
  for (const std::string& bytes : cases) {
    const std::string multiplex = Field(2, bytes) + unknown;
    ASSERT_TRUE(SameAsProtobuf(v1::MultiplexRequest(), multiplex));
  }
  // The test's premise: protobuf keeps them (so MessageDifferencer sees them).
  v1::ScanRequest scan;
  ASSERT_TRUE(scan.ParseFromString(cases[0]));
  EXPECT_EQ(scan.GetReflection()->GetUnknownFields(scan).field_count(), 5);
}

// Groups are not followed: protobuf parses those messages whole.
TEST(ParseTest, GroupsAreHandedToProtobuf) {
  const std::string group = Tag(50, 3) + VarintField(1, 7) + Field(2, "in group") + Tag(50, 4);
  const std::string array = Field(2, Bytes(32, 42));
  const std::string accepted[] = {
      group + Field(1, array),
      Field(1, array + group),
      Field(1, array) + Tag(51, 3) + group + Tag(51, 4),  // nested groups
      Tag(60, 3) + Tag(60, 4),                            // an empty group
  };
  for (const std::string& bytes : accepted) {
    Parsed parsed;
    ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), bytes, &parsed));
    EXPECT_TRUE(parsed.accepted);
    EXPECT_FALSE(parsed.tokens);
    EXPECT_EQ(parsed.payloads, 0u);
    ExpectSameForEveryCut(v1::ScanRequest(), bytes, /*pairs=*/false);
    ASSERT_TRUE(SameAsProtobuf(v1::MultiplexRequest(), Field(2, bytes), &parsed));
    EXPECT_TRUE(parsed.accepted);
  }
  // Unparsed data stays in the message: Resolve gives it as it is.
  ReceivedMessage received;
  v1::ScanRequest got;
  ASSERT_TRUE(received.Parse(Whole(accepted[0]), &got).ok());
  EXPECT_EQ(received.Find(got.input().data()), nullptr);
  EXPECT_EQ(*received.Resolve(got.input().data()), Bytes(32, 42));
  const std::string rejected[] = {
      Tag(50, 3) + VarintField(1, 7),               // never ended
      Tag(50, 3) + VarintField(1, 7) + Tag(51, 4),  // ended by another number
      Field(1, array + Tag(50, 3)),                 // ended by the Array's end
      Field(1, array + Tag(50, 4)),                 // an end without a start
  };
  for (const std::string& bytes : rejected) {
    Parsed parsed;
    ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), bytes, &parsed));
    EXPECT_FALSE(parsed.accepted);
    ExpectSameForEveryCut(v1::ScanRequest(), bytes, /*pairs=*/false);
    ASSERT_TRUE(SameAsProtobuf(v1::MultiplexRequest(), Field(2, bytes), &parsed));
    EXPECT_FALSE(parsed.accepted);
  }
  // An end-group tag at the top level: whatever protobuf says.
  ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), Field(1, array) + Tag(50, 4)));
  ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), Field(1, array) + Tag(50, 4) + VarintField(2, 1)));
}

TEST(ParseTest, MalformedBytesGetProtobufsVerdict) {
  const std::string array = Field(2, Bytes(32, 43));
  const std::string payload = Bytes(32, 44);
  std::vector<std::string> cases = {
      Tag(1, 6) + "x",                        // wire type 6
      Tag(1, 7) + "x",                        // wire type 7
      "\x00\x01"s,                            // field number 0
      "\x02\x01x"s,                           // field 0, length-delimited
      "\x08"s,                                // a varint cut off
      "\x08\x80\x80"s,                        // a varint cut off mid-way
      "\x08"s + std::string(10, '\x80') + "\x01",  // 11 bytes
      "\x08"s + std::string(9, '\xff') + "\x01",   // 10 bytes, top bit 1
      "\x08"s + std::string(9, '\xff') + "\x02",   // 10 bytes, past 64 bits
      "\x08"s + std::string(9, '\xff') + "\x7f",   // 10 bytes, far past 64 bits
      "\x10"s + std::string(9, '\xff') + "\x03",   // the same in an enum (int32)
      "\x0a\x05\x10\x01"s,                    // a length past the end
      "\x0a\xff\xff\xff\xff\x0f"s,            // a length of 4 GiB
      "\x0a\xff\xff\xff\xff\x07"s,            // a length of 2 GiB - 1
      "\x0a\x80\x80\x80\x80\x80\x00"s,        // a six-byte length of 0
      Tag(1, 2) + "\x82\x80\x80\x80\x80\x00"s + Field(2, ""),  // a six-byte length
      Tag(1, 2) + "\xa2\x80\x80\x80\x00"s + Field(2, payload),  // a five-byte length
      "\x8a\x80\x80\x80\x80\x00\x00"s,        // a six-byte tag of field 1
      "\x8a\x80\x80\x80\x00\x00"s,            // a five-byte tag of field 1
      "\x8a\x00\x00"s,                        // a two-byte tag of field 1
      "\xfa\xff\xff\xff\x0f\x00"s,            // field 2^29 - 1
      "\xfa\xff\xff\xff\x1f\x00"s,            // a tag past 32 bits
      "\xfa\xff\xff\xff\xff\x00"s,            // five bytes, all continuing
      Field(1, "\x12\x10"s + payload),        // the payload overruns the Array
      Field(1, array) + "\x0a",               // a tag with no length
      Field(1, array) + "\x0a\x05\x12\x03"s + "ab",  // a nested payload overruns
      Field(1, Field(2, payload) + "\x08"),   // a varint cut off by the Array's end
      Field(1, Field(3, Field(1, "\xc3\x28"))),  // invalid UTF-8 in a proto3 string
      Field(15, Field(1, Field(1, "\xff"))),  // the same outside the Arrays
      Field(1, Tag(2, 2) + "\x85\x80\x80\x80\x80\x00"s + "abcde"),  // six-byte data length
      Field(1, Tag(2, 2) + "\x85\x80\x00"s + "abcde"),  // three-byte data length
      Field(1, "\x80\x80\x80\x80\x80\x00"s + array),  // a six-byte tag 0
      Field(1, "\x92\x80\x80\x80\x80\x00"s + array.substr(1)),  // six-byte data tag
  };
  // Non-canonical encodings of a tag or a length of every byte count.
  for (int bytes = 1; bytes <= 11; ++bytes) {
    std::string tag(1, '\x0a'), length(1, static_cast<char>(payload.size() + 2));
    for (int i = 1; i < bytes; ++i) {
      tag.back() |= '\x80';
      tag.push_back('\0');
      length.back() |= '\x80';
      length.push_back('\0');
    }
    cases.push_back(tag + Field(1, array).substr(1));
    cases.push_back(Tag(1, 2) + length + Field(2, payload));
    cases.push_back(Field(2, Tag(1, 2) + length + Field(2, payload)));  // in Multiplex
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), cases[i]));
    ASSERT_TRUE(SameAsProtobuf(v1::MultiplexRequest(), cases[i]));
    ASSERT_TRUE(SameAsProtobuf(v1::EchoRequest(), cases[i]));
    ExpectSameForEveryCut(v1::ScanRequest(), cases[i], /*pairs=*/false);
  }
}

// Fields passed through as they are, large enough (over 4 KiB) to be
// referenced in the received slices rather than copied, cut anywhere.
TEST(ParseTest, LargePassThroughFieldsCutAnywhere) {
  std::string offsets;
  for (uint64_t i = 0; i < 900; ++i) Varint(uint64_t{1} << 35 | i, &offsets);  // 5400 bytes
  const std::string region(5000, 'r');
  std::string bad_region = region;
  bad_region[4000] = '\xff';  // invalid UTF-8 in a proto3 string
  const std::string payload = Bytes(40, 70);
  const std::string array = VarintField(1, v1::INT32) + Field(2, payload);
  const std::string big_unknown = Field(900, Bytes(6000, 71));
  struct Case {
    std::string bytes;
    bool accepted;
  };
  const Case cases[] = {
      {Field(1, array) + Field(4, offsets) + VarintField(16, 1), true},
      {Field(4, offsets) + Field(1, array) + Field(4, offsets), true},  // packed pieces append
      {Field(1, array + big_unknown) + big_unknown + VarintField(2, v1::SUM), true},
      {Field(1, array + Field(3, Field(1, region))) + Field(15, Field(1, Field(1, region))), true},
      {Field(1, array) + Field(15, Field(1, Field(1, bad_region))), false},
      {Field(1, array + Field(3, Field(1, bad_region))), false},
      // A large field whose length runs past the end.
      {Field(1, array) + Tag(4, 2) + (Field(4, offsets).substr(1, 2)) + offsets.substr(100), false},
  };
  for (const Case& c : cases) {
    Parsed parsed;
    ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), c.bytes, &parsed));
    EXPECT_EQ(parsed.accepted, c.accepted);
    if (c.accepted) {
      EXPECT_TRUE(parsed.tokens);
      EXPECT_EQ(parsed.payloads, 1u);
    }
    ExpectSameForRandomCuts(v1::ScanRequest(), c.bytes, 200, 8, 72);
    // Cuts at every position of the first and last 64 bytes and every
    // 97th in between.
    for (size_t at = 0; at <= c.bytes.size();
         at += (at < 64 || at + 64 > c.bytes.size()) ? 1 : 97) {
      ASSERT_TRUE(SameAsProtobuf(v1::ScanRequest(), c.bytes, Cut(c.bytes, {at}))) << at;
    }
    // Two levels down, in a Multiplex.
    ASSERT_TRUE(SameAsProtobuf(v1::MultiplexRequest(), VarintField(1, 4) + Field(2, c.bytes),
                               &parsed));
    EXPECT_EQ(parsed.accepted, c.accepted);
  }
  // The referenced field after parsing is the one sent.
  ReceivedMessage received;
  v1::ScanRequest got;
  ASSERT_TRUE(received.Parse(Whole(cases[0].bytes), &got).ok());
  ASSERT_EQ(got.segment_offsets_size(), 900);
  EXPECT_EQ(got.segment_offsets(899), uint64_t{1} << 35 | 899);
  EXPECT_TRUE(got.reproducible());
}

TEST(ParseTest, TruncatedMessagesGetProtobufsVerdict) {
  int rejected = 0;
  for (const auto& request : AllRequests()) {
    SCOPED_TRACE(request->GetTypeName());
    const std::string bytes = request->SerializeAsString();
    for (size_t n = 0; n < bytes.size(); ++n) {
      const std::string prefix = bytes.substr(0, n);
      Parsed parsed;
      ASSERT_TRUE(SameAsProtobuf(*request, prefix, Cut(prefix, {n / 3, n / 2}), &parsed)) << n;
      if (!parsed.accepted) ++rejected;
    }
  }
  EXPECT_GT(rejected, 100);  // most prefixes cut a field
}

// Every byte of a Multiplex and an Echo request replaced by a few values,
// and random multi-byte mutations: the verdicts and fields always match.
TEST(ParseTest, MutatedBytesGetProtobufsVerdict) {
  std::vector<std::unique_ptr<Message>> requests;
  requests.push_back(std::make_unique<v1::MultiplexRequest>(Multiplexes()[3]));
  requests.push_back(std::make_unique<v1::MultiplexRequest>(Multiplexes()[0]));
  requests.push_back(std::make_unique<v1::EchoRequest>(Echo()));
  std::mt19937 rng(99);
  int accepted = 0, rejected = 0;
  for (const auto& request : requests) {
    const std::string bytes = request->SerializeAsString();
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (int value : {0x00, 0x01, 0x7f, 0x80, 0xff, 0x0b, 0x0c, 0x0d}) {
        std::string mutated = bytes;
        mutated[i] = static_cast<char>(value);
        Parsed parsed;
        ASSERT_TRUE(SameAsProtobuf(*request, mutated, Cut(mutated, {rng() % (bytes.size() + 1)}),
                                   &parsed))
            << i << " " << value;
        ++(parsed.accepted ? accepted : rejected);
      }
    }
    for (int round = 0; round < 3000; ++round) {
      std::string mutated = bytes;
      for (int k = 1 + rng() % 4; k > 0; --k) {
        switch (rng() % 3) {
          case 0: mutated[rng() % mutated.size()] = static_cast<char>(rng()); break;
          case 1: mutated.insert(rng() % mutated.size(), 1, static_cast<char>(rng())); break;
          default: mutated.erase(rng() % mutated.size(), 1); break;
        }
        if (mutated.empty()) mutated = "\x08";
      }
      std::vector<size_t> cuts(rng() % 4);
      for (size_t& cut : cuts) cut = rng() % (mutated.size() + 1);
      std::sort(cuts.begin(), cuts.end());
      Parsed parsed;
      ASSERT_TRUE(SameAsProtobuf(*request, mutated, Cut(mutated, cuts), &parsed)) << round;
      ++(parsed.accepted ? accepted : rejected);
    }
  }
  // Both verdicts were exercised.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}

TEST(ParseTest, ParseAgainStartsOver) {
  ReceivedMessage received;
  v1::AggregateByKeyRequest got;
  const v1::AggregateByKeyRequest first = AggregateByKey();
  ASSERT_TRUE(received.Parse(Whole(first.SerializeAsString()), &got).ok());
  EXPECT_EQ(received.num_payloads(), 2u);
  const std::string old_token = got.keys().data();
  // A rejected parse leaves no payloads behind.
  EXPECT_FALSE(received.Parse(Whole("\x0a\x05"), &got).ok());
  EXPECT_EQ(received.num_payloads(), 0u);
  EXPECT_EQ(received.Find(old_token), nullptr);
  // A handed-over parse neither.
  ASSERT_TRUE(received.Parse(Whole(Tag(50, 3) + Tag(50, 4)), &got).ok());
  EXPECT_FALSE(received.tokens());
  EXPECT_EQ(received.num_payloads(), 0u);
  // A second message: only its fields, its own payloads.
  v1::AggregateByKeyRequest second;
  *second.mutable_values() = MakeArray(v1::INT32, Bytes(12, 50));
  ASSERT_TRUE(received.Parse(Whole(second.SerializeAsString()), &got).ok());
  EXPECT_FALSE(got.has_keys());
  EXPECT_EQ(got.num_keys(), 0u);
  EXPECT_EQ(received.num_payloads(), 1u);
  EXPECT_EQ(*received.Resolve(got.values().data()), second.values().data());
}

// Payloads made contiguous go where the ReceivedMessage's allocator says
// (null from it: the heap), and only those that need a copy.
TEST(ParseTest, PayloadsAreCopiedIntoTheAllocatorsMemory) {
  int allocations = 0, frees = 0;
  bool refuse = false;
  std::vector<std::pair<const char*, size_t>> given;
  ReceivedMessage received([&](size_t bytes) -> PayloadBuffer {
    if (refuse) return nullptr;
    ++allocations;
    char* p = static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    given.emplace_back(p, bytes);
    return PayloadBuffer(p, [&frees](char* q) {
      ++frees;
      std::free(q);
    });
  });
  v1::ReduceByKeyRequest request;
  *request.mutable_keys() = MakeArray(v1::INT32, Bytes(1000, 80));
  *request.mutable_values() = MakeArray(v1::INT64, Bytes(2000, 81));
  const std::string bytes = request.SerializeAsString();
  const size_t keys_at = bytes.find(request.keys().data());
  // keys in two slices (copied); values alone in one aligned slice (not).
  const size_t values_at = bytes.find(request.values().data());
  std::unique_ptr<uint64_t[]> storage(new uint64_t[bytes.size() / 8 + 4]);
  char* base = reinterpret_cast<char*>(storage.get()) + (8 - values_at % 8) % 8;
  std::memcpy(base, bytes.data(), bytes.size());
  const std::string keys_tail = bytes.substr(keys_at + 500, values_at - keys_at - 500);
  std::vector<grpc::Slice> slices;
  slices.emplace_back(base, keys_at + 500, grpc::Slice::STATIC_SLICE);
  slices.emplace_back(keys_tail.data(), keys_tail.size(), grpc::Slice::STATIC_SLICE);
  slices.emplace_back(base + values_at, bytes.size() - values_at, grpc::Slice::STATIC_SLICE);
  v1::ReduceByKeyRequest got;
  ASSERT_TRUE(received.Parse(grpc::ByteBuffer(slices.data(), slices.size()), &got).ok());
  absl::StatusOr<absl::string_view> keys = received.Resolve(got.keys().data());
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, request.keys().data());
  ASSERT_EQ(allocations, 1);
  EXPECT_EQ(keys->data(), given[0].first);
  EXPECT_GE(given[0].second, request.keys().data().size());
  absl::StatusOr<absl::string_view> values = received.Resolve(got.values().data());
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(values->data(), base + values_at);  // in place, no copy
  EXPECT_EQ(allocations, 1);
  // Resolved again: the same copy.
  EXPECT_EQ(received.Resolve(got.keys().data())->data(), keys->data());
  EXPECT_EQ(allocations, 1);
  // The next parse frees the copy with the allocator's deleter.
  EXPECT_EQ(frees, 0);
  refuse = true;  // and now the allocator gives nothing: the heap instead
  ASSERT_TRUE(received.Parse(grpc::ByteBuffer(slices.data(), slices.size()), &got).ok());
  EXPECT_EQ(frees, 1);
  keys = received.Resolve(got.keys().data());
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, request.keys().data());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(keys->data()) % 8, 0u);
  EXPECT_EQ(allocations, 1);
}

TEST(ParseTest, ResolveRefusesDataThatIsNoToken) {
  ReceivedMessage received;
  v1::ScanRequest got;
  ASSERT_TRUE(received.Parse(Whole(Scan().SerializeAsString()), &got).ok());
  ASSERT_TRUE(received.tokens());
  EXPECT_EQ(received.Resolve("not a token").status().code(), absl::StatusCode::kInternal);
  const uint64_t past_end = 7;
  const std::string bad(reinterpret_cast<const char*>(&past_end), sizeof(past_end));
  EXPECT_EQ(received.Find(bad), nullptr);
  EXPECT_EQ(received.Resolve(bad).status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(received.Resolve("").ok());
}

// --- Frame --------------------------------------------------------------------

// Frames a copy of `message` and checks that protobuf parses the framed
// bytes to `message`; returns the buffer's slices.
// `expected` (default: `message`) is what the framed bytes must parse to.
std::vector<grpc::Slice> ExpectRoundTrip(const Message& message, Message* framed,
                                         const ExternalPayload& external = nullptr,
                                         const Message* expected = nullptr) {
  if (expected == nullptr) expected = &message;
  framed->CopyFrom(message);
  const grpc::ByteBuffer buffer = Frame(framed, external);
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  const std::string bytes = Flatten(buffer);
  std::unique_ptr<Message> parsed(message.New());
  EXPECT_TRUE(parsed->ParseFromString(bytes));
  EXPECT_TRUE(MessageDifferencer::Equals(*parsed, *expected));
  if (!external) {
    EXPECT_EQ(bytes.size(), message.ByteSizeLong());  // fields reordered only
  }
  // And the wire parser reads it back to the same.
  EXPECT_TRUE(SameAsProtobuf(message, bytes, buffer));
  return slices;
}

const grpc::Slice* SliceAt(const std::vector<grpc::Slice>& slices, const void* at) {
  for (const grpc::Slice& s : slices) {
    if (s.begin() == at) return &s;
  }
  return nullptr;
}

TEST(FrameTest, EveryRequestTypeRoundTripsWithSmallPayloads) {
  for (const auto& request : AllRequests()) {
    SCOPED_TRACE(request->GetTypeName());
    std::unique_ptr<Message> framed(request->New());
    const std::vector<grpc::Slice> slices = ExpectRoundTrip(*request, framed.get());
    // Nothing was large enough for a slice of its own: all in one piece.
    EXPECT_EQ(slices.size(), 1u);
  }
}

TEST(FrameTest, LargePayloadsGoAsTheStringsThatHeldThem) {
  for (size_t size : {kMinSlicePayload - 1, kMinSlicePayload, kMinSlicePayload + 1,
                      size_t{3} << 20}) {
    SCOPED_TRACE(size);
    v1::ReduceByKeyRequest request;
    *request.mutable_keys() = MakeArray(v1::INT32, Bytes(size, 60));
    *request.mutable_values() = MakeArray(v1::INT64, Bytes(100, 61));  // small
    request.set_op(v1::SUM);
    request.set_reproducible(true);
    v1::ReduceByKeyRequest framed = request;
    const char* keys_at = framed.keys().data().data();
    const grpc::ByteBuffer buffer = Frame(&framed);
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(buffer.Dump(&slices).ok());
    const grpc::Slice* keys = SliceAt(slices, keys_at);
    if (size >= kMinSlicePayload) {
      ASSERT_NE(keys, nullptr) << "the payload was copied";
      EXPECT_EQ(keys->size(), size);
      EXPECT_EQ(slices.size(), 3u);  // before, the payload, the small values after
    } else {
      EXPECT_EQ(slices.size(), 1u);  // copied into the framing bytes
    }
    v1::ReduceByKeyRequest parsed;
    ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
    EXPECT_TRUE(MessageDifferencer::Equals(parsed, request));
    // The message may go away before the buffer: the buffer owns the bytes.
    framed = v1::ReduceByKeyRequest();
    ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
    EXPECT_TRUE(MessageDifferencer::Equals(parsed, request));
  }
}

TEST(FrameTest, NestedAndRepeatedArraysRoundTrip) {
  const std::string large = Bytes(kMinSlicePayload * 2 + 3, 62);
  std::vector<std::unique_ptr<Message>> messages;
  for (v1::MultiplexRequest& m : Multiplexes()) {
    auto nested = std::make_unique<v1::MultiplexRequest>(m);
    messages.push_back(std::make_unique<v1::MultiplexRequest>(std::move(m)));
    // The first Array of each, large.
    google::protobuf::Message* inner = nested->GetReflection()->MutableMessage(
        nested.get(), nested->GetDescriptor()->FindFieldByNumber(nested->request_case()));
    const google::protobuf::FieldDescriptor* first = inner->GetDescriptor()->field(0);
    static_cast<v1::Array*>(inner->GetReflection()->MutableMessage(inner, first))
        ->set_data(large);
    messages.push_back(std::move(nested));
  }
  v1::EchoRequest echo = Echo();
  *echo.add_arrays() = MakeArray(v1::INT32, large);
  echo.add_arrays();  // an Array with nothing set: presence must survive
  *echo.add_arrays() = MakeArray(v1::INT32, large.substr(1));
  messages.push_back(std::make_unique<v1::EchoRequest>(echo));
  v1::SelectRequest select = SelectByFlags();
  select.mutable_flags()->set_data(large);
  select.mutable_input()->set_data(large.substr(5));
  messages.push_back(std::make_unique<v1::SelectRequest>(select));
  v1::ScanRequest empty_input;
  empty_input.mutable_input();  // present, empty
  empty_input.set_op(v1::SUM);
  messages.push_back(std::make_unique<v1::ScanRequest>(empty_input));
  for (const auto& message : messages) {
    SCOPED_TRACE(message->GetTypeName());
    std::unique_ptr<Message> framed(message->New());
    ExpectRoundTrip(*message, framed.get());
  }
}

TEST(FrameTest, UnknownFieldsRoundTrip) {
  v1::MultiplexRequest request;
  const std::string unknown = VarintField(100, 5) + Field(101, "abc");
  const std::string bytes =
      unknown + Field(2, Field(1, Field(2, Bytes(kMinSlicePayload, 63)) + unknown) + unknown);
  ASSERT_TRUE(request.ParseFromString(bytes));
  v1::MultiplexRequest framed;
  ExpectRoundTrip(request, &framed);
}

TEST(FrameTest, ExternalPayloadsGoFromTheCallersMemory) {
  // The caller's message holds names of payloads; the bytes are elsewhere.
  const std::string small = Bytes(100, 64), large = Bytes(kMinSlicePayload + 100, 65);
  v1::AggregateByKeyRequest request;
  *request.mutable_keys() = MakeArray(v1::INT32, "small-token");
  *request.mutable_values() = MakeArray(v1::INT32, "large-token");
  request.set_num_keys(3);
  int calls = 0;
  const ExternalPayload external = [&](absl::string_view data, absl::string_view* bytes) {
    ++calls;
    if (data == "small-token") {
      *bytes = small;
    } else if (data == "large-token") {
      *bytes = large;
    } else {
      return false;
    }
    return true;
  };
  const grpc::ByteBuffer buffer = Frame(&request, external);
  EXPECT_EQ(calls, 2);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  // Both went as slices over the caller's memory, whatever their size.
  const grpc::Slice* s = SliceAt(slices, small.data());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->size(), small.size());
  s = SliceAt(slices, large.data());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->size(), large.size());
  v1::AggregateByKeyRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
  EXPECT_EQ(parsed.keys().data(), small);
  EXPECT_EQ(parsed.values().data(), large);
  EXPECT_EQ(parsed.keys().dtype(), v1::INT32);
  EXPECT_EQ(parsed.num_keys(), 3u);

  // Data the callback declines goes as it is (copied when small, moved when
  // large); empty data is not offered to it.
  v1::EchoRequest echo;
  *echo.add_arrays() = MakeArray(v1::INT32, "unknown-token");
  *echo.add_arrays() = MakeArray(v1::INT32, "");
  *echo.add_arrays() = MakeArray(v1::INT32, large);
  *echo.add_arrays() = MakeArray(v1::INT32, "small-token");
  v1::EchoRequest expected = echo;
  expected.mutable_arrays(3)->set_data(small);
  calls = 0;
  v1::EchoRequest framed;
  const std::vector<grpc::Slice> echo_slices = ExpectRoundTrip(
      echo, &framed,
      [&](absl::string_view d, absl::string_view* b) {
        EXPECT_FALSE(d.empty());
        if (d != "small-token") return false;
        *b = small;
        ++calls;
        return true;
      },
      &expected);
  EXPECT_EQ(calls, 1);
  EXPECT_NE(SliceAt(echo_slices, small.data()), nullptr);
}

TEST(FrameTest, FramedPayloadsAreReceivedWithoutACopy) {
  // End to end in one process: a payload framed (moved into a slice) and
  // parsed from that buffer resolves to the very bytes the sender held.
  v1::MultiplexRequest request;
  request.set_id(1);
  *request.mutable_scan()->mutable_input() = MakeArray(v1::INT64, Bytes(1 << 16, 66));
  v1::MultiplexRequest framed = request;
  const char* at = framed.scan().input().data().data();
  ASSERT_EQ(reinterpret_cast<uintptr_t>(at) % 8, 0u);  // operator new's alignment
  const grpc::ByteBuffer buffer = Frame(&framed);
  ReceivedMessage received;
  v1::MultiplexRequest got;
  ASSERT_TRUE(received.Parse(buffer, &got).ok());
  ASSERT_TRUE(received.tokens());
  absl::StatusOr<absl::string_view> bytes = received.Resolve(got.scan().input().data());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->data(), at);
  EXPECT_EQ(*bytes, request.scan().input().data());
}

}  // namespace
}  // namespace primserve::wire
