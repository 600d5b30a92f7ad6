#include "crux/core/base/backoff.h"

#include <gtest/gtest.h>

namespace crux::core {
namespace {

TEST(BackoffTest, DoublesUpToTheMaximumAndResets) {
  ExponentialBackoff b({.initial = Duration::Millis(100), .max = Duration::Millis(1000)});
  EXPECT_EQ(b.Next(), Duration::Millis(100));
  EXPECT_EQ(b.Next(), Duration::Millis(200));
  EXPECT_EQ(b.Next(), Duration::Millis(400));
  EXPECT_EQ(b.Next(), Duration::Millis(800));
  EXPECT_EQ(b.Next(), Duration::Millis(1000));
  EXPECT_EQ(b.Next(), Duration::Millis(1000));
  EXPECT_EQ(b.attempts(), 6);
  b.Reset();
  EXPECT_EQ(b.Next(), Duration::Millis(100));
}

TEST(BackoffTest, ManyAttemptsStayAtTheMaximumWithoutOverflow) {
  ExponentialBackoff b({.initial = Duration::Millis(1), .max = Duration::Millis(5000)});
  Duration last;
  for (int i = 0; i < 5000; ++i) last = b.Next();
  EXPECT_EQ(last, Duration::Millis(5000));
}

TEST(BackoffTest, MaxAttemptsExhausts) {
  ExponentialBackoff b(
      {.initial = Duration::Millis(10), .max = Duration::Millis(10), .max_attempts = 3});
  EXPECT_FALSE(b.Exhausted());
  b.Next();
  b.Next();
  EXPECT_FALSE(b.Exhausted());
  b.Next();
  EXPECT_TRUE(b.Exhausted());
  b.Reset();
  EXPECT_FALSE(b.Exhausted());
}

TEST(BackoffTest, JitterStaysWithinItsBandAndIsReproducible) {
  BackoffOptions o{
      .initial = Duration::Millis(1000), .max = Duration::Millis(1000), .jitter = 0.5, .seed = 7};
  ExponentialBackoff a(o), b(o);
  bool varied = false;
  Duration first = Duration::Zero();
  for (int i = 0; i < 100; ++i) {
    const Duration d = a.Next();
    EXPECT_EQ(d, b.Next());
    EXPECT_GE(d, Duration::Millis(500));
    EXPECT_LE(d, Duration::Millis(1000));
    if (i == 0) first = d;
    if (d != first) varied = true;
  }
  EXPECT_TRUE(varied);
}

TEST(BackoffTest, ValidationNamesTheField) {
  EXPECT_NE(ValidateBackoffOptions({.initial = Duration::Zero()}).message().find("backoff.initial"),
            std::string::npos);
  EXPECT_NE(ValidateBackoffOptions({.initial = Duration::Millis(10), .max = Duration::Millis(1)})
                .message()
                .find("backoff.max"),
            std::string::npos);
  EXPECT_NE(ValidateBackoffOptions({.multiplier = 0.5}).message().find("multiplier"),
            std::string::npos);
  EXPECT_NE(ValidateBackoffOptions({.jitter = 1}).message().find("jitter"), std::string::npos);
  EXPECT_TRUE(ValidateBackoffOptions({}).ok());
}

}  // namespace
}  // namespace crux::core
