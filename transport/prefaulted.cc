#include "transport/prefaulted.h"

#include <sys/mman.h>
#include <unistd.h>

namespace homarpc::transport::prefaulted_internal {
namespace {

size_t RoundUpToPages(size_t bytes) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* MapPopulated(size_t bytes) {
  void* p = mmap(nullptr, RoundUpToPages(bytes), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void Unmap(void* p, size_t bytes) { munmap(p, RoundUpToPages(bytes)); }

}  // namespace homarpc::transport::prefaulted_internal
