// The binding's log function (py/binding/stderr_log.h): what a LogCapture keeps of the lines
// ExecuTorch logs, which executorch_trt.runtime's exceptions then carry.
#include "py/binding/stderr_log.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include <executorch/runtime/platform/log.h>
#include <executorch/runtime/platform/platform.h>
#include <executorch/runtime/platform/runtime.h>

namespace executorch_trt::python {
namespace {

class StderrLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    executorch::runtime::runtime_init();
    UseStderrLog();
  }
};

TEST_F(StderrLogTest, KeepsErrorLinesOfItsThreadInOrder) {
  LogCapture capture;
  ET_LOG(Info, "an info line says what went right");
  ET_LOG(Error, "input %d dimension %d is %d but dynamic size '%s' is %d", 1, 0, 4, "T", 3);
  ET_LOG(Error, "CALL_DELEGATE execute failed at instruction 0: 0x%x", 0x12);
  EXPECT_EQ(capture.Lines(),
            "  input 1 dimension 0 is 4 but dynamic size 'T' is 3\n"
            "  CALL_DELEGATE execute failed at instruction 0: 0x12");
}

TEST_F(StderrLogTest, NothingLoggedIsEmptyAndNothingIsKeptWithoutACapture) {
  ET_LOG(Error, "before any capture");
  LogCapture capture;
  EXPECT_EQ(capture.Lines(), "");
  ET_LOG(Info, "info only");
  EXPECT_EQ(capture.Lines(), "");
}

TEST_F(StderrLogTest, AnotherThreadsLinesAreNotKept) {
  LogCapture capture;
  std::thread other([] { ET_LOG(Error, "from another thread"); });
  other.join();
  ET_LOG(Error, "from this thread");
  EXPECT_EQ(capture.Lines(), "  from this thread");
}

TEST_F(StderrLogTest, NestedCapturesTakeTheLinesUntilTheyEnd) {
  LogCapture outer;
  ET_LOG(Error, "outer 1");
  {
    LogCapture inner;
    ET_LOG(Error, "inner");
    EXPECT_EQ(inner.Lines(), "  inner");
  }
  ET_LOG(Error, "outer 2");
  EXPECT_EQ(outer.Lines(), "  outer 1\n  outer 2");
}

TEST_F(StderrLogTest, IsBoundedAndCountsWhatDidNotFit) {
  LogCapture capture;
  const std::string line(100, 'x');  // ExecuTorch cuts a message at 256 bytes
  constexpr int kLines = 200;        // 20000 bytes logged
  for (int i = 0; i < kLines; ++i) {
    ET_LOG(Error, "%s", line.c_str());
  }
  const std::string lines = capture.Lines();
  const std::string kept_line = "  " + line + "\n";
  const size_t whole = LogCapture::kMaxBytes / kept_line.size();  // lines kept whole
  ASSERT_EQ(lines.substr(0, kept_line.size()), kept_line);
  const size_t cut = LogCapture::kMaxBytes - whole * kept_line.size() - 3;  // the cut line's part
  const size_t dropped = kLines * line.size() - whole * line.size() - cut;
  const std::string tail =
      "  (" + std::to_string(dropped) + " more bytes of log messages on stderr)";
  ASSERT_GE(lines.size(), tail.size());
  EXPECT_EQ(lines.substr(lines.size() - tail.size()), tail);
  EXPECT_LE(lines.size(), LogCapture::kMaxBytes + tail.size());
  // The kept text is the start of the log: whole lines, then one cut line.
  EXPECT_EQ(lines.size(), whole * kept_line.size() + 2 + cut + 1 + tail.size());
}

TEST_F(StderrLogTest, AddTrimsTrailingNewlines) {
  LogCapture capture;
  capture.Add("a line\n", 7);
  capture.Add("another\r\n", 9);
  EXPECT_EQ(capture.Lines(), "  a line\n  another");
}

TEST_F(StderrLogTest, WritesOnlyErrorLinesUnlessVerbose) {
  ASSERT_FALSE(LogVerbose());  // the default
  LogCapture capture;
  testing::internal::CaptureStderr();
  ET_LOG(Info, "quiet info line");
  ET_LOG(Error, "quiet error line");
  std::string written = testing::internal::GetCapturedStderr();
  EXPECT_EQ(written.find("quiet info line"), std::string::npos) << written;
  EXPECT_NE(written.find("quiet error line"), std::string::npos) << written;

  SetLogVerbose(true);
  testing::internal::CaptureStderr();
  ET_LOG(Info, "verbose info line");
  ET_LOG(Error, "verbose error line");
  written = testing::internal::GetCapturedStderr();
  SetLogVerbose(false);
  EXPECT_NE(written.find("I "), std::string::npos) << written;
  EXPECT_NE(written.find("executorch:stderr_log_test.cpp:"), std::string::npos) << written;
  EXPECT_NE(written.find("verbose info line"), std::string::npos) << written;
  EXPECT_NE(written.find("verbose error line"), std::string::npos) << written;
  // What is kept for an exception does not depend on the verbosity.
  EXPECT_EQ(capture.Lines(), "  quiet error line\n  verbose error line");
}

int g_other_lines = 0;

void OtherLog(et_timestamp_t, et_pal_log_level_t, const char*, const char*, size_t, const char*,
              size_t) {
  ++g_other_lines;
}

TEST_F(StderrLogTest, TakingOverAnotherLogFunctionLogsNothing) {
  // Another library (ExecuTorch's Python runtime, at its import) registers its log function.
  executorch::runtime::register_pal(executorch::runtime::PalImpl::create(&OtherLog, __FILE__));
  g_other_lines = 0;
  testing::internal::CaptureStderr();
  UseStderrLog();
  ET_LOG(Error, "after taking over");
  const std::string written = testing::internal::GetCapturedStderr();
  // register_pal would have logged "register_pal() called multiple times" through OtherLog.
  EXPECT_EQ(g_other_lines, 0);
  EXPECT_EQ(written.find("register_pal"), std::string::npos) << written;
  EXPECT_NE(written.find("after taking over"), std::string::npos) << written;
}

}  // namespace
}  // namespace executorch_trt::python
