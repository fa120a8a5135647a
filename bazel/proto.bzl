"""C++ and gRPC code from a .proto, through Debian's protoc and grpc_cpp_plugin."""

load("@rules_cc//cc:defs.bzl", "cc_library")

def cc_grpc_proto_library(name, src, deps = [], proto_deps = [], grpc = True, visibility = None):
    """One cc_library `name` with the messages (and services) of `src`.

    Args:
      name: the cc_library's name.
      src: the .proto file, in this package.
      deps: cc_grpc_proto_library targets of the protos `src` imports.
      proto_deps: those protos' .proto files (protoc reads them).
      grpc: whether to generate service stubs too.
      visibility: as usual.
    """
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    grpc_flags = "--grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin " if grpc else ""
    native.genrule(
        name = name + "_codegen",
        srcs = [src] + proto_deps,
        outs = outs,
        cmd = "/usr/bin/protoc -I. --cpp_out=$(GENDIR) " + grpc_flags +
              "$(location " + src + ")",
    )
    cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:grpc++", "//third_party:protobuf"],
        visibility = visibility,
    )
