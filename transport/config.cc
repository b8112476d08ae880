#include "transport/config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "transport/wire.h"

namespace homarpc::transport {

absl::Status Config::Validate() const {
  auto bad = [](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("transport config: ", field, " ", why));
  };
  if (mtu < 576 || mtu > 65000) return bad("mtu", "must be in [576, 65000]");
  if (max_path_mtu < 576 || max_path_mtu > 65000) {
    return bad("max_path_mtu", "must be in [576, 65000]");
  }
  if (max_message_length > wire::kMaxWireMessageLength) {
    return bad("max_message_length", absl::StrCat("must be at most ", wire::kMaxWireMessageLength));
  }
  if (max_incoming_message_length > wire::kMaxWireMessageLength) {
    return bad("max_incoming_message_length",
               absl::StrCat("must be at most ", wire::kMaxWireMessageLength));
  }
  if (num_priorities < 1 || num_priorities > 8) return bad("num_priorities", "must be in [1, 8]");
  for (size_t i = 1; i < unsched_cutoffs.size(); ++i) {
    if (unsched_cutoffs[i] > unsched_cutoffs[i - 1] && unsched_cutoffs[i - 1] != 0) {
      return bad("unsched_cutoffs", "must be non-increasing where non-zero");
    }
  }
  if (max_overcommit < 1 || max_overcommit > 8) return bad("max_overcommit", "must be in [1, 8]");
  if (unsched_bytes < 1) return bad("unsched_bytes", "must be at least 1");
  if (request_ack_ticks < 1) return bad("request_ack_ticks", "must be at least 1");
  if (need_ack_give_up_ticks <= request_ack_ticks) {
    return bad("need_ack_give_up_ticks", "must exceed request_ack_ticks");
  }
  if (max_incoming < std::max(mtu, use_path_mtu ? max_path_mtu : 0u)) {
    return bad("max_incoming", "must be at least one packet");
  }
  if (grant_fifo_fraction > 500) return bad("grant_fifo_fraction", "must be at most 500");
  if (pacer_fifo_fraction > 500) return bad("pacer_fifo_fraction", "must be at most 500");
  if (pacer_refill_percent > 100) return bad("pacer_refill_percent", "must be at most 100");
  if (tick_usecs == 0) return bad("tick_usecs", "must be positive");
  if (resend_ticks == 0 || resend_interval == 0) return bad("resend_ticks", "must be positive");
  if (timeout_ticks <= resend_ticks) return bad("timeout_ticks", "must exceed resend_ticks");
  if (max_rpcs_per_peer == 0 || max_peers == 0) return bad("max_peers", "must be positive");
  return absl::OkStatus();
}

uint32_t Config::PayloadPerPacketAt(uint32_t mtu, bool ipv6) {
  const uint32_t ip_and_udp = ipv6 ? 40 + 8 : 20 + 8;
  return mtu - ip_and_udp - static_cast<uint32_t>(wire::kDataHeaderSize);
}

uint32_t Config::MtuForPath(uint32_t path_mtu) const {
  if (!use_path_mtu || path_mtu == 0) return mtu;
  return std::clamp(path_mtu, 576u, max_path_mtu);
}

void Config::FitToLink() {
  if (link_mbps == 0 || tick_usecs == 0) return;
  // Bits / (Mbit/s) = microseconds.
  const uint64_t drain_usecs = kSlowLinkQueueBytes * 8 / link_mbps;
  const uint64_t ticks = (drain_usecs + tick_usecs - 1) / tick_usecs;
  if (ticks > resend_ticks) {
    resend_ticks = static_cast<uint32_t>(std::min<uint64_t>(ticks, 1u << 20));
    resend_interval = std::max(resend_interval, resend_ticks);
    timeout_ticks = std::max(timeout_ticks, 10 * resend_ticks);
  }
  // (Mbit/s) * microseconds / 8 = bytes.
  const uint64_t window = uint64_t{link_mbps} * kLinkWindowUsecs / 8;
  // Four packets of Config::mtu, and never less than the largest packet a peer may send
  // (Validate()'s rule).
  const uint64_t incoming = std::max<uint64_t>(
      {window, 4 * uint64_t{mtu}, use_path_mtu ? uint64_t{max_path_mtu} : 0});
  max_incoming = static_cast<uint32_t>(std::min<uint64_t>(max_incoming, incoming));
  // At least one packet's payload (IPv6's, the smaller: never two packets unscheduled).
  const uint32_t packet = PayloadPerPacketAt(mtu, /*ipv6=*/true);
  unsched_bytes =
      static_cast<uint32_t>(std::min<uint64_t>(unsched_bytes, std::max<uint64_t>(window, packet)));
  fifo_grant_increment = std::min(fifo_grant_increment, std::max(max_incoming / 2, packet));
}

}  // namespace homarpc::transport
