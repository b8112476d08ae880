# homarpc_add_proto_library(): filled in by the codegen work.
