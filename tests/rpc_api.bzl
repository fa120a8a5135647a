"""Tests run twice: their servers' unary calls on each of gRPC's APIs."""

load("@rules_cc//cc:defs.bzl", "cc_library", "cc_test")

def cc_test_on_both_rpc_apis(name, srcs, deps, **kwargs):
    """`name` on the callback API and `name` less _test plus _cq_test on completion queues.

    The sources compile once (`name`_body); tests/rpc_api.h reads which API
    the environment names.
    """
    body = name + "_body"
    cc_library(
        name = body,
        testonly = True,
        srcs = srcs,
        deps = deps + [":rpc_api"],
        alwayslink = True,
    )
    cc_test(name = name, deps = [":" + body], **kwargs)
    cc_test(
        name = name[:-len("_test")] + "_cq_test",
        deps = [":" + body],
        env = {"PRIMSERVE_TEST_RPC_API": "completion_queue"},
        **kwargs
    )
