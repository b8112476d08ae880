// Deadline arithmetic on std::chrono that cannot overflow (internal; used by
// ClientContext::set_deadline / set_timeout, and fit for Server::Shutdown(deadline)).
//
// gRPC's API takes a deadline on any clock with any duration type, and programs pass the
// extremes: time_point::max() for "never", a timeout of a few centuries, a deadline in seconds
// whose max() is far beyond what nanoseconds can hold. Plain chrono arithmetic overflows on
// these (undefined behaviour; in practice a deadline in the past, and every call failing
// DEADLINE_EXCEEDED at once). The functions here saturate instead: a value beyond what the
// target type can represent becomes its max() (for a deadline: none), one below becomes its
// min() (already passed). Remaining time is computed on the deadline's own clock, in its own
// units, and compared before anything is converted.
//
// Header-only templates, no state: thread-safe.
#ifndef HOMARPC_RUNTIME_DEADLINE_H_
#define HOMARPC_RUNTIME_DEADLINE_H_

#include <chrono>
#include <cstdint>
#include <limits>
#include <ratio>
#include <type_traits>

namespace homarpc::internal {

// `d` converted to `To` (truncating toward zero, as duration_cast), or To::max() / To::min()
// when it is beyond To's range (NaN counts as beyond: max()). Exact for integer durations
// whose periods differ by an integer factor (every std::chrono duration); other
// representations (floating point, unsigned, odd ratios) are range-checked in long double.
template <typename To, typename Rep, typename Period>
constexpr To SaturatingDurationCast(std::chrono::duration<Rep, Period> d) {
  using ToRep = typename To::rep;
  using Factor = std::ratio_divide<Period, typename To::period>;
  constexpr bool kSignedIntegers = std::is_integral_v<Rep> && std::is_signed_v<Rep> &&
                                   std::is_integral_v<ToRep> && std::is_signed_v<ToRep>;
  if constexpr (kSignedIntegers && (Factor::num == 1 || Factor::den == 1)) {
    using Limits = std::numeric_limits<intmax_t>;
    const intmax_t count = d.count();
    intmax_t scaled;
    if constexpr (Factor::den == 1) {
      if (count > Limits::max() / Factor::num) return To::max();
      if (count < Limits::min() / Factor::num) return To::min();
      scaled = count * Factor::num;
    } else {
      scaled = count / Factor::den;
    }
    if (scaled > intmax_t{std::numeric_limits<ToRep>::max()}) return To::max();
    if (scaled < intmax_t{std::numeric_limits<ToRep>::min()}) return To::min();
    return To(static_cast<ToRep>(scaled));
  } else {
    const long double x = static_cast<long double>(d.count()) *
                          static_cast<long double>(Factor::num) /
                          static_cast<long double>(Factor::den);
    if (!(x < static_cast<long double>(To::max().count()))) return To::max();
    if (x <= static_cast<long double>(To::min().count())) return To::min();
    return To(static_cast<ToRep>(x));
  }
}

// a + b, saturating at the duration's limits (durations of one signed integer type).
template <typename Rep, typename Period>
constexpr std::chrono::duration<Rep, Period> SaturatingAdd(std::chrono::duration<Rep, Period> a,
                                                           std::chrono::duration<Rep, Period> b) {
  using D = std::chrono::duration<Rep, Period>;
  static_assert(std::is_integral_v<Rep> && std::is_signed_v<Rep>);
  if (b.count() > 0 && a.count() > std::numeric_limits<Rep>::max() - b.count()) return D::max();
  if (b.count() < 0 && a.count() < std::numeric_limits<Rep>::min() - b.count()) return D::min();
  return D(a.count() + b.count());
}

// a - b, saturating likewise.
template <typename Rep, typename Period>
constexpr std::chrono::duration<Rep, Period> SaturatingSub(std::chrono::duration<Rep, Period> a,
                                                           std::chrono::duration<Rep, Period> b) {
  using D = std::chrono::duration<Rep, Period>;
  static_assert(std::is_integral_v<Rep> && std::is_signed_v<Rep>);
  if (b.count() < 0 && a.count() > std::numeric_limits<Rep>::max() + b.count()) return D::max();
  if (b.count() > 0 && a.count() < std::numeric_limits<Rep>::min() + b.count()) return D::min();
  return D(a.count() - b.count());
}

// Time left until `deadline`, measured on its own clock now: nanoseconds::max() for a
// deadline too far to count in nanoseconds (time_point::max() included), nanoseconds::min()
// (or any negative value) for one that has passed.
template <typename Clock, typename Duration>
std::chrono::nanoseconds TimeUntil(const std::chrono::time_point<Clock, Duration>& deadline) {
  using Common = std::common_type_t<Duration, typename Clock::duration>;
  using Rep = typename Common::rep;
  const Common until = SaturatingDurationCast<Common>(deadline.time_since_epoch());
  // A deadline at (or beyond) the end of its own type's range is never; at the start, past.
  if (until == Common::max()) return std::chrono::nanoseconds::max();
  if (until == Common::min()) return std::chrono::nanoseconds::min();
  const Common now = SaturatingDurationCast<Common>(Clock::now().time_since_epoch());
  if constexpr (std::is_integral_v<Rep> && std::is_signed_v<Rep>) {
    return SaturatingDurationCast<std::chrono::nanoseconds>(SaturatingSub(until, now));
  } else {
    const long double left =
        static_cast<long double>(until.count()) - static_cast<long double>(now.count());
    return SaturatingDurationCast<std::chrono::nanoseconds>(
        std::chrono::duration<long double, typename Common::period>(left));
  }
}

// system_clock's now + `timeout`: system_clock::time_point::max() (no deadline) when that is
// beyond what system_clock can represent, time_point::min() when before it.
template <typename Rep, typename Period>
std::chrono::system_clock::time_point DeadlineAfter(std::chrono::duration<Rep, Period> timeout) {
  using std::chrono::system_clock;
  const system_clock::duration after = SaturatingDurationCast<system_clock::duration>(timeout);
  if (after == system_clock::duration::max()) return system_clock::time_point::max();
  if (after == system_clock::duration::min()) return system_clock::time_point::min();
  return system_clock::time_point(SaturatingAdd(system_clock::now().time_since_epoch(), after));
}

// `deadline` as a system_clock deadline. A system_clock deadline converts exactly (saturating
// to time_point::max() / min() when its duration type reaches beyond system_clock's); another
// clock's is now + the time left until it on that clock (TimeUntil), saturating likewise.
template <typename Clock, typename Duration>
std::chrono::system_clock::time_point ToSystemDeadline(
    const std::chrono::time_point<Clock, Duration>& deadline) {
  using std::chrono::system_clock;
  if constexpr (std::is_same_v<Clock, system_clock>) {
    return system_clock::time_point(
        SaturatingDurationCast<system_clock::duration>(deadline.time_since_epoch()));
  } else {
    return DeadlineAfter(TimeUntil(deadline));
  }
}

}  // namespace homarpc::internal

#endif  // HOMARPC_RUNTIME_DEADLINE_H_
