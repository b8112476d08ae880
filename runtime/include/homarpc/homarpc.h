// homarpc: gRPC's programming model over Homa. The one header applications include, as gRPC
// programs include <grpcpp/grpcpp.h>; generated *.homarpc.pb.h files include it too.
#ifndef HOMARPC_HOMARPC_H_
#define HOMARPC_HOMARPC_H_

#include "runtime/channel.h"
#include "runtime/client_context.h"
#include "runtime/server.h"
#include "runtime/server_builder.h"
#include "runtime/server_context.h"
#include "runtime/service.h"
#include "runtime/status.h"

#endif  // HOMARPC_HOMARPC_H_
