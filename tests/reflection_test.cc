// Server reflection follows ServerOptions::reflection, per server: servers
// with it on and off in one process (gRPC's reflection plugin is registered
// process-wide) answer ServerReflectionInfo with the service list or with
// UNIMPLEMENTED. Health is served either way.
//
// Debian ships no reflection stubs, only the library whose generated
// descriptors the messages are built from; the call goes through a generic
// stub.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/message.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "server/cpu/cpu_backend.h"
#include "server/server.h"

namespace primserve {
namespace {

constexpr char kMethod[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

std::unique_ptr<google::protobuf::Message> NewMessage(const std::string& type) {
  const google::protobuf::Descriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
  if (descriptor == nullptr) return nullptr;
  return std::unique_ptr<google::protobuf::Message>(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(descriptor)->New());
}

// The services the server at `port` lists through reflection, or the call's
// error.
absl::StatusOr<std::vector<std::string>> ListServices(int port) {
  std::unique_ptr<google::protobuf::Message> request =
      NewMessage("grpc.reflection.v1alpha.ServerReflectionRequest");
  std::unique_ptr<google::protobuf::Message> response =
      NewMessage("grpc.reflection.v1alpha.ServerReflectionResponse");
  if (request == nullptr || response == nullptr) {
    return absl::InternalError("the reflection messages are not in the generated pool");
  }
  request->GetReflection()->SetString(
      request.get(), request->GetDescriptor()->FindFieldByName("list_services"), "*");
  grpc::ByteBuffer request_bytes;
  bool own_buffer = false;
  if (!grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(
           *request, &request_bytes, &own_buffer)
           .ok()) {
    return absl::InternalError("cannot serialize the request");
  }

  // One request, one answer, then the status. Once the call fails every step
  // reports ok false, and Finish says why.
  grpc::GenericStub stub(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", port)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue queue;
  auto await = [&queue] {
    void* tag = nullptr;
    bool ok = false;
    return queue.Next(&tag, &ok) && ok;
  };
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, kMethod, &queue);
  call->StartCall(nullptr);
  bool answered = await();
  call->WriteLast(request_bytes, grpc::WriteOptions(), nullptr);
  answered &= await();
  grpc::ByteBuffer response_bytes;
  call->Read(&response_bytes, nullptr);
  answered &= await();
  grpc::Status status;
  call->Finish(&status, nullptr);
  await();
  queue.Shutdown();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  if (!answered || !grpc::GenericDeserialize<grpc::ProtoBufferReader, google::protobuf::Message>(
                        &response_bytes, response.get())
                        .ok()) {
    return absl::InternalError("no answer");
  }

  const google::protobuf::Message& list = response->GetReflection()->GetMessage(
      *response, response->GetDescriptor()->FindFieldByName("list_services_response"));
  const google::protobuf::FieldDescriptor* service_field =
      list.GetDescriptor()->FindFieldByName("service");
  std::vector<std::string> names;
  for (int i = 0; i < list.GetReflection()->FieldSize(list, service_field); ++i) {
    const google::protobuf::Message& service =
        list.GetReflection()->GetRepeatedMessage(list, service_field, i);
    names.push_back(service.GetReflection()->GetString(
        service, service.GetDescriptor()->FindFieldByName("name")));
  }
  return names;
}

std::unique_ptr<PrimServer> StartServer(bool reflection) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.reflection = reflection;
  absl::StatusOr<std::unique_ptr<PrimServer>> server =
      PrimServer::Start(options, std::make_unique<CpuBackend>());
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(ReflectionTest, OnListsTheServicesOffIsUnimplementedHealthEitherWay) {
  // Off between two servers with it on: the setting is per server, not
  // whatever the process registered last.
  std::unique_ptr<PrimServer> before = StartServer(true);
  std::unique_ptr<PrimServer> off = StartServer(false);
  std::unique_ptr<PrimServer> after = StartServer(true);
  ASSERT_TRUE(before != nullptr && off != nullptr && after != nullptr);

  for (const PrimServer* on : {before.get(), after.get()}) {
    absl::StatusOr<std::vector<std::string>> services = ListServices(on->port());
    ASSERT_TRUE(services.ok()) << services.status();
    // Echo is served only with ServerOptions::echo (hostile_test).
    EXPECT_THAT(*services, ::testing::Not(::testing::Contains("primserve.v1.Echo")));
    EXPECT_THAT(*services, ::testing::IsSupersetOf({"primserve.v1.Primitives",
                                                    "grpc.reflection.v1alpha.ServerReflection"}));
  }
  EXPECT_EQ(ListServices(off->port()).status().code(), absl::StatusCode::kUnimplemented);

  for (const PrimServer* server : {before.get(), off.get(), after.get()}) {
    PrimitivesClient client(PrimitivesClient::Connect(absl::StrCat("127.0.0.1:", server->port())));
    EXPECT_TRUE(client.IsServing()) << "port " << server->port();
  }
}

}  // namespace
}  // namespace primserve
