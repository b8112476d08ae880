// Tests of ClientContext's deadline setters (runtime/client_context.h) and the saturating
// chrono arithmetic beneath them (runtime/deadline.h). Extremes must saturate (beyond
// system_clock's range: no deadline; before it: passed) instead of overflowing, which
// UBSan reports and which used to turn "never" into "already passed". Ordinary deadlines must
// convert exactly, or within the clock reads around them. Single-threaded, no network.
#include "runtime/client_context.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"
#include "runtime/deadline.h"

namespace homarpc {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using std::chrono::system_clock;
using std::chrono::time_point;
using SystemSeconds = time_point<system_clock, seconds>;
using SteadyHours = time_point<steady_clock, hours>;

constexpr hours k300Years{24 * 365 * 300};

TEST(ClientContext_Deadline, NoneByDefault) {
  ClientContext context;
  EXPECT_EQ(context.deadline(), system_clock::time_point::max());
}

TEST(ClientContext_Deadline, BeyondSystemClocksRangeIsNone) {
  const auto none = system_clock::time_point::max();
  {
    ClientContext c;
    c.set_deadline(steady_clock::time_point::max());
    EXPECT_EQ(c.deadline(), none);
  }
  {
    ClientContext c;
    c.set_timeout(milliseconds::max());
    EXPECT_EQ(c.deadline(), none);
  }
  {
    ClientContext c;
    c.set_deadline(SystemSeconds::max());
    EXPECT_EQ(c.deadline(), none);
  }
  {
    ClientContext c;
    c.set_timeout(k300Years);
    EXPECT_EQ(c.deadline(), none);
  }
  {
    ClientContext c;
    c.set_deadline(SteadyHours::max());
    EXPECT_EQ(c.deadline(), none);
  }
  {
    ClientContext c;
    c.set_deadline(std::chrono::time_point_cast<hours>(steady_clock::now()) + k300Years);
    EXPECT_EQ(c.deadline(), none);
  }
  {
    ClientContext c;
    c.set_timeout(std::chrono::duration<double>(1e30));
    EXPECT_EQ(c.deadline(), none);
  }
  {
    ClientContext c;
    c.set_timeout(std::chrono::duration<double>(std::numeric_limits<double>::infinity()));
    EXPECT_EQ(c.deadline(), none);
  }
  {
    ClientContext c;
    c.set_deadline(system_clock::time_point::max());
    EXPECT_EQ(c.deadline(), none);
  }
}

TEST(ClientContext_Deadline, BeforeSystemClocksRangeHasPassed) {
  const auto passed = system_clock::time_point::min();
  {
    ClientContext c;
    c.set_deadline(steady_clock::time_point::min());
    EXPECT_EQ(c.deadline(), passed);
  }
  {
    ClientContext c;
    c.set_timeout(milliseconds::min());
    EXPECT_EQ(c.deadline(), passed);
  }
  {
    ClientContext c;
    c.set_deadline(SystemSeconds::min());
    EXPECT_EQ(c.deadline(), passed);
  }
  {
    ClientContext c;
    c.set_timeout(-std::chrono::duration<double>(1e30));
    EXPECT_EQ(c.deadline(), passed);
  }
  {
    ClientContext c;  // representable: a real deadline, long gone
    c.set_timeout(-k300Years + hours(24 * 365 * 60));
    EXPECT_LT(c.deadline(), system_clock::now());
    EXPECT_GT(c.deadline(), passed);
  }
}

TEST(ClientContext_Deadline, OrdinaryDeadlinesConvertExactly) {
  const system_clock::time_point exact = system_clock::now() + nanoseconds(1'234'567);
  ClientContext a;
  a.set_deadline(exact);
  EXPECT_EQ(a.deadline(), exact);

  const SystemSeconds coarse = std::chrono::floor<seconds>(system_clock::now()) + seconds(5);
  ClientContext b;
  b.set_deadline(coarse);
  EXPECT_EQ(b.deadline(), coarse);

  // Far, but inside the range: kept as it is.
  const system_clock::time_point far = system_clock::time_point::max() - hours(1);
  ClientContext c;
  c.set_deadline(far);
  EXPECT_EQ(c.deadline(), far);
}

TEST(ClientContext_Deadline, OtherClocksAndTimeoutsCountFromNow) {
  {
    ClientContext c;
    const auto before = system_clock::now();
    c.set_deadline(steady_clock::now() + seconds(10));
    const auto after = system_clock::now();
    EXPECT_GE(c.deadline(), before + seconds(10) - milliseconds(1));
    EXPECT_LE(c.deadline(), after + seconds(10) + milliseconds(1));
  }
  {
    ClientContext c;
    const auto before = system_clock::now();
    c.set_timeout(milliseconds(250));
    const auto after = system_clock::now();
    EXPECT_GE(c.deadline(), before + milliseconds(250));
    EXPECT_LE(c.deadline(), after + milliseconds(250));
  }
  {
    ClientContext c;
    const auto before = system_clock::now();
    c.set_timeout(std::chrono::duration<double>(0.5));
    const auto after = system_clock::now();
    EXPECT_GE(c.deadline(), before + milliseconds(499));
    EXPECT_LE(c.deadline(), after + milliseconds(501));
  }
}

// ---- deadline.h's building blocks ------------------------------------------------------------

TEST(Deadline_SaturatingDurationCast, ExactInRangeAndClampedOutside) {
  using internal::SaturatingDurationCast;
  EXPECT_EQ(SaturatingDurationCast<nanoseconds>(hours(2)), hours(2));
  EXPECT_EQ(SaturatingDurationCast<milliseconds>(seconds(-3)), milliseconds(-3000));
  EXPECT_EQ(SaturatingDurationCast<seconds>(milliseconds(-1999)), seconds(-1));  // toward zero
  EXPECT_EQ(SaturatingDurationCast<nanoseconds>(hours::max()), nanoseconds::max());
  EXPECT_EQ(SaturatingDurationCast<nanoseconds>(hours::min()), nanoseconds::min());
  EXPECT_EQ(SaturatingDurationCast<nanoseconds>(milliseconds::max()), nanoseconds::max());
  EXPECT_EQ(SaturatingDurationCast<hours>(nanoseconds::max()),
            std::chrono::duration_cast<hours>(nanoseconds::max()));
  // Narrower representation.
  using Millis32 = std::chrono::duration<int32_t, std::milli>;
  EXPECT_EQ(SaturatingDurationCast<Millis32>(hours(1000)), Millis32::max());
  // Floating point and unsigned go through the long double check.
  EXPECT_EQ(SaturatingDurationCast<nanoseconds>(std::chrono::duration<double>(1.5)),
            milliseconds(1500));
  EXPECT_EQ(SaturatingDurationCast<nanoseconds>(std::chrono::duration<double>(NAN)),
            nanoseconds::max());
  EXPECT_EQ(SaturatingDurationCast<nanoseconds>(std::chrono::duration<uint64_t>(UINT64_MAX)),
            nanoseconds::max());
  EXPECT_EQ(SaturatingDurationCast<nanoseconds>(std::chrono::duration<uint64_t>(7)), seconds(7));
}

TEST(Deadline_SaturatingArithmetic, AddAndSubClamp) {
  using internal::SaturatingAdd;
  using internal::SaturatingSub;
  EXPECT_EQ(SaturatingAdd(nanoseconds(5), nanoseconds(-7)), nanoseconds(-2));
  EXPECT_EQ(SaturatingAdd(nanoseconds::max(), nanoseconds(1)), nanoseconds::max());
  EXPECT_EQ(SaturatingAdd(nanoseconds::min(), nanoseconds(-1)), nanoseconds::min());
  EXPECT_EQ(SaturatingSub(nanoseconds(5), nanoseconds(7)), nanoseconds(-2));
  EXPECT_EQ(SaturatingSub(nanoseconds::min(), nanoseconds(1)), nanoseconds::min());
  EXPECT_EQ(SaturatingSub(nanoseconds::max(), nanoseconds(-1)), nanoseconds::max());
  EXPECT_EQ(SaturatingSub(nanoseconds(0), nanoseconds::min()), nanoseconds::max());
}

TEST(Deadline_TimeUntil, SaturatesAtTheEndsOfTheDeadlinesType) {
  using internal::TimeUntil;
  EXPECT_EQ(TimeUntil(steady_clock::time_point::max()), nanoseconds::max());
  EXPECT_EQ(TimeUntil(steady_clock::time_point::min()), nanoseconds::min());
  EXPECT_EQ(TimeUntil(SteadyHours::max()), nanoseconds::max());
  EXPECT_EQ(TimeUntil(SystemSeconds::min()), nanoseconds::min());
  const nanoseconds left = TimeUntil(steady_clock::now() + seconds(3));
  EXPECT_GT(left, seconds(2));
  EXPECT_LE(left, seconds(3));
  EXPECT_LT(TimeUntil(steady_clock::now() - seconds(3)), nanoseconds::zero());
}

}  // namespace
}  // namespace homarpc
