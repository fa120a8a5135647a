"""Protobuf and gRPC modules generated from proto/ when the package is built.

primitives_pb2 and primitives_pb2_grpc: the primserve.v1.Primitives API.
health_pb2: the messages of the standard grpc.health.v1.Health service.
"""
