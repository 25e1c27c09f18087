// The Gloo objects behind a ProcessGroup, for the files that implement its collectives
// (process_group.cpp, ring_shards.cpp). Not for users of the process group.
#pragma once
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <memory>

#include "dist/process_group.h"

namespace cg::dist {

struct ProcessGroup::Impl {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
};

}  // namespace cg::dist
