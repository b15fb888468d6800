#include "tools/review/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dk::review {
namespace {

volatile sig_atomic_t g_interrupts = 0;  // SIGINT / SIGTERM received so far

void OnInterrupt(int) { g_interrupts = g_interrupts + 1; }

}  // namespace

void InstallInterruptHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;  // no SA_RESTART: poll() returns early
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool Interrupted() { return g_interrupts != 0; }

absl::StatusOr<ProcessResult> Run(const std::vector<std::string>& argv, const std::string& cwd,
                                  const std::vector<std::string>& unset_env) {
  if (argv.empty() || argv[0].empty()) return absl::InvalidArgumentError("empty command");
  const std::string what = absl::StrJoin(argv, " ");
  const sig_atomic_t interrupts_before = g_interrupts;  // earlier ones are not this command's
  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0 || pipe(exec_pipe) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  fcntl(exec_pipe[1], F_SETFD, FD_CLOEXEC);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], exec_pipe[0], exec_pipe[1]}) close(fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);  // its own process group, which an interrupt is forwarded to
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    close(exec_pipe[0]);
    int fail = 0;
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) {
      fail = errno;
    } else {
      for (const std::string& v : unset_env) unsetenv(v.c_str());
      execvp(args[0], args.data());
      fail = errno;
    }
    // Tell the parent why the command did not start.
    if (write(exec_pipe[1], &fail, sizeof(fail)) < 0) {
    }
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(exec_pipe[1]);
  ProcessResult result;
  // Read until the child exits, not until the pipes close: bazel's client starts a
  // server that inherits them and outlives the command.
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  char buf[65536];
  auto drain = [&](int i) {
    while (fds[i].fd >= 0) {
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        if (n == 0) fds[i].fd = -1;  // EOF; poll() ignores negative fds
        return;                      // EOF or EAGAIN (nothing more for now)
      }
    }
  };
  setpgid(pid, pid);  // also here, so the group exists before kill() below
  int status = 0;
  bool exited = false;
  bool forwarded = false;
  while (!exited) {
    if (g_interrupts != interrupts_before && !forwarded) {
      kill(-pid, SIGINT);  // bazel cancels its build and exits
      forwarded = true;
    }
    if (fds[0].fd < 0 && fds[1].fd < 0) {
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    if (poll(fds, 2, 100) < 0 && errno != EINTR) break;
    drain(0);
    drain(1);
    const pid_t w = waitpid(pid, &status, WNOHANG);
    exited = w == pid || (w < 0 && errno != EINTR);
  }
  drain(0);
  drain(1);
  close(out_pipe[0]);
  close(err_pipe[0]);
  int start_errno = 0;
  const bool start_failed = read(exec_pipe[0], &start_errno, sizeof(start_errno)) == sizeof(start_errno);
  close(exec_pipe[0]);
  if (start_failed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot run ", what, cwd.empty() ? "" : absl::StrCat(" in ", cwd), ": ", std::strerror(start_errno)));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string Tail(const std::string& text, int n) {
  size_t pos = text.size();
  while (pos > 0 && text[pos - 1] == '\n') --pos;
  const size_t end = pos;
  for (int i = 0; i < n && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  if (pos > 0) ++pos;
  return text.substr(pos, end - pos);
}

}  // namespace dk::review
