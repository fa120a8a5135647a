// The primserve.v1.Array fields of any request or response, found by
// protobuf reflection: what code generic over every RPC (stream cutting,
// shared-memory placement) works on.
#ifndef PRIMSERVE_CLIENT_MESSAGE_ARRAYS_H_
#define PRIMSERVE_CLIENT_MESSAGE_ARRAYS_H_

#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "proto/primserve/v1/primitives.pb.h"

namespace primserve {

// The singular primserve.v1.Array fields `message` sets, in field order.
std::vector<const google::protobuf::FieldDescriptor*> SetArrays(
    const google::protobuf::Message& message);

// `message`'s primserve.v1.Array in `field`.
const v1::Array& ArrayIn(const google::protobuf::Message& message,
                         const google::protobuf::FieldDescriptor* field);
v1::Array* MutableArray(google::protobuf::Message* message,
                        const google::protobuf::FieldDescriptor* field);

}  // namespace primserve

#endif  // PRIMSERVE_CLIENT_MESSAGE_ARRAYS_H_
