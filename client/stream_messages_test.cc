#include "client/stream_messages.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "client/message_arrays.h"
#include "gtest/gtest.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {
namespace {

using google::protobuf::Message;

v1::Array RandomArray(std::mt19937_64& rng, v1::DType dtype, size_t n) {
  const size_t element = dtype == v1::INT32 || dtype == v1::UINT32 || dtype == v1::FLOAT32 ? 4 : 8;
  v1::Array array;
  array.set_dtype(dtype);
  for (size_t i = 0; i < n * element; ++i) {
    array.mutable_data()->push_back(static_cast<char>(rng()));
  }
  return array;
}

// A request of every streamed kind, one array or two (of other element
// sizes), with n elements each and parameters set.
std::vector<std::unique_ptr<Message>> Requests(std::mt19937_64& rng, size_t n) {
  std::vector<std::unique_ptr<Message>> requests;
  auto scan = std::make_unique<v1::ScanRequest>();
  *scan->mutable_input() = RandomArray(rng, v1::INT64, n);
  scan->set_op(v1::MAX);
  scan->set_exclusive(true);
  scan->add_segment_offsets(0);
  scan->add_segment_offsets(n / 2);
  requests.push_back(std::move(scan));
  auto reduce = std::make_unique<v1::ReduceRequest>();
  *reduce->mutable_input() = RandomArray(rng, v1::FLOAT32, n);
  reduce->set_op(v1::SUM);
  reduce->set_reproducible(true);
  requests.push_back(std::move(reduce));
  auto predicate = std::make_unique<v1::SelectRequest>();
  *predicate->mutable_input() = RandomArray(rng, v1::UINT32, n);
  predicate->mutable_predicate()->set_kind(v1::Predicate::GT);
  predicate->set_output(v1::SelectRequest::VALUES_AND_INDICES);
  requests.push_back(std::move(predicate));
  auto flags = std::make_unique<v1::SelectRequest>();
  *flags->mutable_input() = RandomArray(rng, v1::FLOAT64, n);
  *flags->mutable_flags() = RandomArray(rng, v1::INT32, n);
  flags->set_output(v1::SelectRequest::COUNT);
  requests.push_back(std::move(flags));
  auto unique = std::make_unique<v1::UniqueRequest>();
  *unique->mutable_input() = RandomArray(rng, v1::UINT64, n);
  requests.push_back(std::move(unique));
  auto rle = std::make_unique<v1::RunLengthEncodeRequest>();
  *rle->mutable_input() = RandomArray(rng, v1::INT32, n);
  requests.push_back(std::move(rle));
  auto by_key = std::make_unique<v1::ReduceByKeyRequest>();
  *by_key->mutable_keys() = RandomArray(rng, v1::INT32, n);
  *by_key->mutable_values() = RandomArray(rng, v1::FLOAT64, n);
  by_key->set_op(v1::MIN);
  requests.push_back(std::move(by_key));
  auto aggregate = std::make_unique<v1::AggregateByKeyRequest>();
  *aggregate->mutable_keys() = RandomArray(rng, v1::UINT64, n);
  *aggregate->mutable_values() = RandomArray(rng, v1::FLOAT32, n);
  aggregate->set_op(v1::PROD);
  aggregate->set_num_keys(17);
  requests.push_back(std::move(aggregate));
  return requests;
}

// `whole` cut into messages of `piece_elements` each, its arrays' bytes
// read in place or (`take`) taken out of a copy.
std::vector<std::unique_ptr<Message>> CutAll(const Message& whole, uint64_t piece_elements,
                                             bool take = false) {
  std::unique_ptr<Message> copy(whole.New());
  copy->CopyFrom(whole);
  StreamCutter cutter = take ? StreamCutter(copy.get()) : StreamCutter(whole);
  std::vector<std::unique_ptr<Message>> messages;
  while (!cutter.done()) {
    messages.emplace_back(whole.New());
    cutter.Next(piece_elements, messages.back().get());
  }
  return messages;
}

// `message` without its arrays' elements (dtypes kept).
std::string WithoutElements(const Message& message) {
  std::unique_ptr<Message> copy(message.New());
  copy->CopyFrom(message);
  for (const auto* field : SetArrays(*copy)) {
    MutableArray(copy.get(), field)->clear_data();
  }
  return copy->SerializeAsString();
}

TEST(StreamMessagesTest, CutThenJoinedIsTheWhole) {
  std::mt19937_64 rng(1);
  for (const size_t n : {1, 2, 999, 1000}) {
    for (const auto& whole : Requests(rng, n)) {
      for (const uint64_t piece : {1, 3, 10, 1000, 5000}) {
        for (const bool take : {false, true}) {
          std::unique_ptr<Message> joined(whole->New());
          for (const auto& message : CutAll(*whole, piece, take)) {
            AppendAnswer(message.get(), joined.get());
          }
          EXPECT_EQ(joined->SerializeAsString(), whole->SerializeAsString())
              << whole->GetTypeName() << " n=" << n << " piece=" << piece << " take=" << take;
        }
      }
    }
  }
}

TEST(StreamMessagesTest, FirstKeepsEveryParameterLaterOnlyArrays) {
  std::mt19937_64 rng(2);
  for (const auto& whole : Requests(rng, 100)) {
    const std::vector<std::unique_ptr<Message>> messages = CutAll(*whole, 30);
    ASSERT_EQ(messages.size(), 4u) << whole->GetTypeName();
    EXPECT_EQ(WithoutElements(*messages[0]), WithoutElements(*whole)) << whole->GetTypeName();
    for (size_t i = 1; i < messages.size(); ++i) {
      std::unique_ptr<Message> rest(messages[i]->New());
      rest->CopyFrom(*messages[i]);
      EXPECT_EQ(SetArrays(*rest).size(), SetArrays(*whole).size());
      for (const auto* field : SetArrays(*whole)) {
        EXPECT_EQ(ArrayIn(*rest, field).dtype(), ArrayIn(*whole, field).dtype());
        rest->GetReflection()->ClearField(rest.get(), field);
      }
      EXPECT_EQ(rest->ByteSizeLong(), 0u) << whole->GetTypeName() << " message " << i;
    }
  }
}

TEST(StreamMessagesTest, PiecesHonourTheRequestedSize) {
  std::mt19937_64 rng(3);
  v1::ReduceByKeyRequest whole;
  *whole.mutable_keys() = RandomArray(rng, v1::INT32, 50);
  *whole.mutable_values() = RandomArray(rng, v1::FLOAT64, 50);
  StreamCutter cutter(whole);
  EXPECT_EQ(cutter.elements(), 50u);
  EXPECT_EQ(cutter.array_bytes(), 50u * 12);
  // 12 bytes an element, both arrays together; never less than one element.
  EXPECT_EQ(cutter.PieceElements(100), 8u);
  EXPECT_EQ(cutter.PieceElements(96), 8u);
  EXPECT_EQ(cutter.PieceElements(5), 1u);
  std::vector<uint64_t> sizes;
  while (!cutter.done()) {
    const uint64_t start = cutter.cut();
    v1::ReduceByKeyRequest message;
    cutter.Next(cutter.PieceElements(100), &message);
    sizes.push_back(message.keys().data().size() / 4);
    EXPECT_EQ(message.values().data().size(), sizes.back() * 8);
    EXPECT_EQ(message.keys().data(), whole.keys().data().substr(start * 4, sizes.back() * 4));
  }
  EXPECT_EQ(sizes, (std::vector<uint64_t>{8, 8, 8, 8, 8, 8, 2}));
}

TEST(StreamMessagesTest, TakesTheArraysOutOfTheWhole) {
  std::mt19937_64 rng(4);
  v1::ScanRequest whole;
  *whole.mutable_input() = RandomArray(rng, v1::UINT32, 10);
  whole.set_op(v1::SUM);
  const v1::ScanRequest original = whole;
  StreamCutter cutter(&whole);
  EXPECT_EQ(cutter.array_bytes(), 40u);
  EXPECT_TRUE(whole.input().data().empty());
  EXPECT_EQ(whole.input().dtype(), v1::UINT32);
  EXPECT_EQ(whole.op(), v1::SUM);
  v1::ScanRequest message;
  cutter.Next(10, &message);
  EXPECT_EQ(message.SerializeAsString(), original.SerializeAsString());
  EXPECT_TRUE(cutter.done());
}

TEST(StreamMessagesTest, EmptyRequestIsOneMessage) {
  v1::ScanRequest whole;
  whole.mutable_input()->set_dtype(v1::FLOAT32);
  whole.set_op(v1::MIN);
  const std::vector<std::unique_ptr<Message>> messages = CutAll(whole, 4);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0]->SerializeAsString(), whole.SerializeAsString());
}

TEST(StreamMessagesTest, PiecesPastAnArraysEndAreEmpty) {
  std::mt19937_64 rng(6);
  v1::ReduceByKeyRequest whole;
  *whole.mutable_keys() = RandomArray(rng, v1::INT32, 3);
  *whole.mutable_values() = RandomArray(rng, v1::INT32, 5);
  StreamCutter cutter(whole);
  v1::ReduceByKeyRequest first, second;
  cutter.Next(4, &first);
  cutter.Next(4, &second);
  EXPECT_EQ(first.keys().data().size(), 3u * 4);
  EXPECT_EQ(second.keys().data().size(), 0u);
  EXPECT_EQ(second.values().data().size(), 1u * 4);
}

TEST(StreamMessagesTest, JoinedOtherFieldsComeFromTheLastAnswer) {
  std::mt19937_64 rng(7);
  std::vector<v1::SelectResponse> answers(3);
  std::string values, indices;
  uint64_t count = 0;
  for (v1::SelectResponse& answer : answers) {
    *answer.mutable_values() = RandomArray(rng, v1::FLOAT32, 2 + rng() % 5);
    *answer.mutable_indices() = RandomArray(rng, v1::INT64, answer.values().data().size() / 4);
    values += answer.values().data();
    indices += answer.indices().data();
    count += answer.values().data().size() / 4;
    answer.set_count(count);
  }
  v1::SelectResponse joined;
  for (v1::SelectResponse answer : answers) {
    AppendAnswer(&answer, &joined);
    EXPECT_FALSE(answer.has_values());
    EXPECT_FALSE(answer.has_indices());
  }
  EXPECT_EQ(joined.values().dtype(), v1::FLOAT32);
  EXPECT_EQ(joined.values().data(), values);
  EXPECT_EQ(joined.indices().dtype(), v1::INT64);
  EXPECT_EQ(joined.indices().data(), indices);
  EXPECT_EQ(joined.count(), answers.back().count());
}

}  // namespace
}  // namespace primserve
