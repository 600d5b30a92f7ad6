#include "crux/core/base/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crux::core {
namespace {

TEST(StatusTest, DefaultIsOkWithEmptyMessage) {
  const Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(Status::Ok(), s);
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  const Status s(StatusCode::kNotFound, "no host 'h9'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no host 'h9'");
}

TEST(StatusTest, ToStringPrefixesCanonicalCodeName) {
  EXPECT_EQ(InvalidArgumentError("jobs[0].compute_time_s: must be > 0").ToString(),
            "INVALID_ARGUMENT: jobs[0].compute_time_s: must be > 0");
  EXPECT_EQ(InternalError("boom").ToString(), "INTERNAL: boom");
}

TEST(StatusTest, OkStatusPrintsOkEvenWithAMessage) {
  EXPECT_EQ(Status(StatusCode::kOk, "ignored").ToString(), "OK");
}

TEST(StatusTest, EveryCodeHasItsCanonicalName) {
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_EQ(StatusCodeName(StatusCode::kInvalidArgument), "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(StatusCode::kNotFound), "NOT_FOUND");
  EXPECT_EQ(StatusCodeName(StatusCode::kAlreadyExists), "ALREADY_EXISTS");
  EXPECT_EQ(StatusCodeName(StatusCode::kFailedPrecondition), "FAILED_PRECONDITION");
  EXPECT_EQ(StatusCodeName(StatusCode::kOutOfRange), "OUT_OF_RANGE");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnavailable), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(StatusCode::kInternal), "INTERNAL");
}

TEST(StatusTest, ErrorHelpersSetTheMatchingCode) {
  const std::vector<std::pair<Status, StatusCode>> cases = {
      {InvalidArgumentError("m"), StatusCode::kInvalidArgument},
      {NotFoundError("m"), StatusCode::kNotFound},
      {AlreadyExistsError("m"), StatusCode::kAlreadyExists},
      {FailedPreconditionError("m"), StatusCode::kFailedPrecondition},
      {OutOfRangeError("m"), StatusCode::kOutOfRange},
      {UnavailableError("m"), StatusCode::kUnavailable},
      {InternalError("m"), StatusCode::kInternal},
  };
  for (const auto& [status, code] : cases) {
    EXPECT_EQ(status.code(), code) << status.ToString();
    EXPECT_EQ(status.message(), "m");
    EXPECT_FALSE(status.ok());
  }
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(NotFoundError("a"), NotFoundError("a"));
  EXPECT_FALSE(NotFoundError("a") == NotFoundError("b"));
  EXPECT_FALSE(NotFoundError("a") == InvalidArgumentError("a"));
  EXPECT_FALSE(Status::Ok() == InternalError(""));
}

TEST(StatusTest, WithContextPrependsContextAndKeepsCode) {
  const Status s = InvalidArgumentError("must be > 0").WithContext("gpus_per_host");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "gpus_per_host: must be > 0");
}

TEST(StatusTest, WithContextChainsOutermostFirst) {
  const Status s = NotFoundError("no path").WithContext("flow a -> b").WithContext("job 'j1'");
  EXPECT_EQ(s.message(), "job 'j1': flow a -> b: no path");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: job 'j1': flow a -> b: no path");
}

TEST(StatusTest, WithContextLeavesOkUntouched) {
  const Status s = Status::Ok().WithContext("job 'x'");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, WithContextDoesNotModifyTheOriginal) {
  const Status original = UnavailableError("peer down");
  const Status copy = original.WithContext("ctx");
  EXPECT_EQ(original.message(), "peer down");
  EXPECT_EQ(copy.message(), "ctx: peer down");
}

TEST(ResultTest, HoldsAValue) {
  Result<int> r(42);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
  *r = 7;
  EXPECT_EQ(r.value(), 7);
}

TEST(ResultTest, HoldsAnError) {
  Result<int> r(NotFoundError("missing"));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "missing");
}

TEST(ResultTest, ArrowReachesMembers) {
  Result<std::string> r(std::string("hello"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 5u);
  r->append("!");
  EXPECT_EQ(*r, "hello!");
  const Result<std::string>& cr = r;
  EXPECT_EQ(cr->front(), 'h');
}

TEST(ResultTest, SupportsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(5));
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
}

#ifdef NDEBUG
TEST(ResultTest, ConstructingFromOkStatusBecomesInternalErrorInReleaseBuilds) {
  Result<int> r{Status::Ok()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}
#else
TEST(ResultDeathTest, ConstructingFromOkStatusAssertsInDebugBuilds) {
  EXPECT_DEATH(
      {
        Result<int> r{Status::Ok()};
        (void)r;
      },
      "OK status");
}
#endif

// Helpers exercising the macros.
Status FailIf(bool fail) { return fail ? FailedPreconditionError("failed") : Status::Ok(); }

Status RunTwo(bool fail_first, bool fail_second, int* steps) {
  CRUX_RETURN_IF_ERROR(FailIf(fail_first));
  ++*steps;
  CRUX_RETURN_IF_ERROR(FailIf(fail_second).WithContext("second"));
  ++*steps;
  return Status::Ok();
}

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  CRUX_ASSIGN_OR_RETURN(int h, Half(x));
  CRUX_ASSIGN_OR_RETURN(const int q, Half(h));  // Two uses on distinct lines must not clash.
  return q;
}

Result<std::unique_ptr<int>> MakeBox(int v) {
  if (v < 0) return OutOfRangeError("negative");
  return std::make_unique<int>(v);
}

Result<int> Unbox(int v) {
  CRUX_ASSIGN_OR_RETURN(std::unique_ptr<int> box, MakeBox(v));
  return *box + 1;
}

TEST(StatusMacrosTest, ReturnIfErrorPassesOkThrough) {
  int steps = 0;
  EXPECT_TRUE(RunTwo(false, false, &steps).ok());
  EXPECT_EQ(steps, 2);
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtFirstError) {
  int steps = 0;
  const Status s = RunTwo(true, false, &steps);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "failed");
  EXPECT_EQ(steps, 0);
}

TEST(StatusMacrosTest, ReturnIfErrorReturnsTheExpressionsStatus) {
  int steps = 0;
  const Status s = RunTwo(false, true, &steps);
  EXPECT_EQ(s.message(), "second: failed");
  EXPECT_EQ(steps, 1);
}

TEST(StatusMacrosTest, AssignOrReturnBindsValues) {
  Result<int> r = Quarter(12);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 3);
}

TEST(StatusMacrosTest, AssignOrReturnPropagatesTheFirstError) {
  Result<int> r = Quarter(6);  // 6 -> 3 -> odd.
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "odd: 3");
  Result<int> r2 = Quarter(5);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().message(), "odd: 5");
}

TEST(StatusMacrosTest, AssignOrReturnMovesMoveOnlyValues) {
  Result<int> ok = Unbox(4);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 5);
  Result<int> err = Unbox(-1);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace crux::core
