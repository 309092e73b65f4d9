#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "sandbox/process_runner.h"
#include "sandbox/providers/bwrap_provider.h"
#include "sandbox/providers/local_provider.h"
#include "tests/support/temp_dir.h"

namespace edge::sandbox {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Whether bwrap can create its namespaces here (the kernel or a container may forbid them).
bool BwrapWorks() {
  if (::access("/usr/bin/bwrap", X_OK) != 0) return false;
  return std::system("/usr/bin/bwrap --unshare-all --ro-bind / / /bin/true >/dev/null 2>&1") == 0;
}

class ProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = base_ + "/ws";
    outside_ = base_ + "/outside";
    fs::create_directories(ws_ + "/sub");
    fs::create_directories(outside_);
  }

  struct Ran {
    ProcessResult result;
    std::string out, err;
  };
  Result<Ran> RunWrapped(const Provider& provider, ProcessSpec spec, WrapOptions options) {
    if (auto st = provider.Wrap(spec, options); !st) return std::unexpected(st.error());
    boost::asio::io_context io;
    ProcessRunner runner(io, SystemClock::Instance(), {});
    Ran ran;
    std::optional<Result<ProcessResult>> res;
    if (spec.timeout.count() == 0) spec.timeout = 30s;
    runner.Run(
        spec, {},
        [&](OutputChunk c, std::function<void()> ack) {
          (c.stream == OutputStream::kStdout ? ran.out : ran.err) += c.data;
          ack();
        },
        [&](Result<ProcessResult> r) { res = std::move(r); });
    io.run();
    if (!res->has_value()) return std::unexpected(res->error());
    ran.result = **res;
    return ran;
  }

  edge::testing::TempDir tmp_{"bwrap"};
  std::string base_ = tmp_.path(), ws_, outside_;
};

TEST_F(ProviderTest, LocalDefaultsCwdToWorkspaceAndRefusesEscapes) {
  LocalProvider local;
  ProcessSpec spec;
  spec.argv = {"/bin/pwd"};
  auto ran = RunWrapped(local, spec, WrapOptions{ws_});
  ASSERT_TRUE(ran.has_value()) << ran.error().ToString();
  EXPECT_EQ(ran->out, ws_ + "\n");

  ProcessSpec out_spec;
  out_spec.argv = {"/bin/pwd"};
  out_spec.cwd = outside_;
  Status st = local.Wrap(out_spec, WrapOptions{ws_});
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kPathOutsideRoot);
  EXPECT_NE(st.error().message.find(outside_), std::string::npos);

  // A symlink inside the workspace that leads out is resolved before the check.
  fs::create_symlink(outside_, ws_ + "/link");
  ProcessSpec link_spec;
  link_spec.argv = {"/bin/pwd"};
  link_spec.cwd = ws_ + "/link";
  st = local.Wrap(link_spec, WrapOptions{ws_});
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kPathOutsideRoot);

  ProcessSpec sub;
  sub.argv = {"/bin/pwd"};
  sub.cwd = ws_ + "/sub";
  EXPECT_TRUE(local.Wrap(sub, WrapOptions{ws_}).has_value());
}

TEST_F(ProviderTest, MakeProviderKnowsLocalAndBwrap) {
  EXPECT_EQ((*MakeProvider("local"))->name(), "local");
  EXPECT_EQ((*MakeProvider("bwrap"))->name(), "bwrap");
  auto bad = MakeProvider("docker");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("docker"), std::string::npos);
}

TEST_F(ProviderTest, BwrapArgsIsolateEverythingButTheWorkspace) {
  BwrapProvider bwrap;
  auto args = bwrap.BwrapArgs(WrapOptions{ws_}, ws_);
  auto has = [&](const std::string& a) {
    return std::find(args.begin(), args.end(), a) != args.end();
  };
  EXPECT_EQ(args[0], "/usr/bin/bwrap");
  EXPECT_TRUE(has("--unshare-all"));
  EXPECT_TRUE(has("--die-with-parent"));
  EXPECT_FALSE(has("--share-net"));
  EXPECT_TRUE(has("--tmpfs"));
  EXPECT_EQ(args.back(), "--");
  // The workspace is the only read-write bind.
  EXPECT_EQ(std::count(args.begin(), args.end(), "--bind"), 1);
  auto net = bwrap.BwrapArgs(WrapOptions{ws_, {}, true}, ws_);
  EXPECT_NE(std::find(net.begin(), net.end(), "--share-net"), net.end());
}

TEST_F(ProviderTest, MissingBwrapIsAClearError) {
  BwrapProvider bwrap(base_ + "/no-bwrap");
  ProcessSpec spec;
  spec.argv = {"/bin/true"};
  Status st = bwrap.Wrap(spec, WrapOptions{ws_});
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(st.error().message.find("no-bwrap"), std::string::npos);
  EXPECT_NE(st.error().message.find("bubblewrap"), std::string::npos);
}

TEST_F(ProviderTest, BwrapWorkspaceIsTheOnlyWritablePath) {
  if (!BwrapWorks()) GTEST_SKIP() << "bwrap is missing or cannot create namespaces here";
  BwrapProvider bwrap;
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "echo inside > sub/made && echo ok1; "
               "echo x > " +
                   outside_ +
                   "/escaped 2>/dev/null && echo escaped1; "
                   "echo x > /usr/escaped 2>/dev/null && echo escaped2; "
                   "echo x > /etc/escaped 2>/dev/null && echo escaped3; "
                   "echo x > /tmp/private && echo ok2; pwd"};
  spec.cwd = ws_;
  auto ran = RunWrapped(bwrap, spec, WrapOptions{ws_});
  ASSERT_TRUE(ran.has_value()) << ran.error().ToString();
  EXPECT_EQ(ran->out, "ok1\nok2\n" + ws_ + "\n") << ran->err;
  EXPECT_EQ(ran->result.exit_code, 0);
  std::ifstream made(ws_ + "/sub/made");
  std::string line;
  std::getline(made, line);
  EXPECT_EQ(line, "inside");
  EXPECT_FALSE(fs::exists(outside_ + "/escaped"));
  EXPECT_FALSE(fs::exists("/usr/escaped"));
  EXPECT_FALSE(fs::exists("/etc/escaped"));
}

TEST_F(ProviderTest, BwrapHasOwnPidNamespaceAndNoNetworkByDefault) {
  if (!BwrapWorks()) GTEST_SKIP() << "bwrap is missing or cannot create namespaces here";
  BwrapProvider bwrap;
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "ls /proc | grep -c '^[0-9]'; ls /sys/class/net 2>/dev/null | "
               "grep -v '^lo$' | wc -l; cat /proc/net/dev | grep -c ':'"};
  auto ran = RunWrapped(bwrap, spec, WrapOptions{ws_});
  ASSERT_TRUE(ran.has_value()) << ran.error().ToString();
  std::istringstream in(ran->out);
  int pids = 0, ignored = 0, ifaces = 0;
  in >> pids >> ignored >> ifaces;
  EXPECT_LE(pids, 5) << "a new pid namespace shows only the sandbox's processes";
  EXPECT_EQ(ifaces, 1) << "only lo without network: " << ran->out;

  spec.argv = {"/bin/sh", "-c", "cat /proc/net/dev | grep -c ':'"};
  auto net = RunWrapped(bwrap, spec, WrapOptions{ws_, {}, true});
  ASSERT_TRUE(net.has_value());
  int host_ifaces = std::stoi(net->out);
  if (fs::exists("/sys/class/net/eth0")) {
    EXPECT_GT(host_ifaces, 1);
  }
}

TEST_F(ProviderTest, BwrapDeadlineStopsTheSandbox) {
  if (!BwrapWorks()) GTEST_SKIP() << "bwrap is missing or cannot create namespaces here";
  BwrapProvider bwrap;
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "trap '' TERM; sleep 30"};
  spec.timeout = 300ms;
  spec.kill_grace = 300ms;
  auto ran = RunWrapped(bwrap, spec, WrapOptions{ws_});
  ASSERT_TRUE(ran.has_value());
  EXPECT_TRUE(ran->result.timed_out);
  EXPECT_LT(ran->result.wall_time, 10s);
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
}

}  // namespace
}  // namespace edge::sandbox
