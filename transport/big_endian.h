// Big-endian loads and stores for wire codecs: every multi-byte field homarpc puts on the
// network (Homa packets in wire.cc, RPC envelopes in runtime/envelope.cc) is big-endian.
// Callers check bounds first; these read or write exactly 2, 4 or 8 bytes at `p`.
#ifndef HOMARPC_TRANSPORT_BIG_ENDIAN_H_
#define HOMARPC_TRANSPORT_BIG_ENDIAN_H_

#include <cstdint>

namespace homarpc::transport {

inline uint16_t Load16(const uint8_t* p) {
  return static_cast<uint16_t>((uint16_t{p[0]} << 8) | p[1]);
}
inline uint32_t Load32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
inline uint64_t Load64(const uint8_t* p) { return (uint64_t{Load32(p)} << 32) | Load32(p + 4); }
inline void Store16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void Store32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline void Store64(uint8_t* p, uint64_t v) {
  Store32(p, static_cast<uint32_t>(v >> 32));
  Store32(p + 4, static_cast<uint32_t>(v));
}

}  // namespace homarpc::transport

#endif  // HOMARPC_TRANSPORT_BIG_ENDIAN_H_
