// signal_app [COPIES=200] [S=4M]
// The app's own signals stay the app's: every handler runs on a thread of the
// app's choosing, never on a thread cuxfer started (the trace writer, the
// staging pool's filler, the memcpy workers, CUPTI's). DESIGN: the shim must
// not steal a signal.
//
// The main thread installs SIGALRM, SIGUSR1 and SIGCHLD handlers and makes a
// first round trip with those signals unblocked, so that whatever threads the
// shim starts then would inherit an open mask. It then blocks the three and
// starts one app thread that unblocks them and keeps copying (H2D and D2H of
// S pageable bytes, checked). Meanwhile the main thread runs a 1 ms interval
// timer, sends itself SIGUSR1 and forks children that exit at once. Every
// handler records the thread it ran on: each must be that app thread (the
// only thread of the process with the signals open, unless the shim left its
// own open). Exact traffic is not fixed (the copy thread runs until the
// signals are sent): not for exact reports.
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "common.h"

namespace {

constexpr int kMaxRecords = 1 << 16;
std::atomic<int> g_records{0};
pid_t g_tid[kMaxRecords];
int g_signo[kMaxRecords];

void handler(int signo) {
  const int i = g_records.fetch_add(1, std::memory_order_relaxed);
  if (i < kMaxRecords) {
    g_tid[i] = static_cast<pid_t>(syscall(SYS_gettid));
    g_signo[i] = signo;
  }
}

sigset_t app_signals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGALRM);
  sigaddset(&s, SIGUSR1);
  sigaddset(&s, SIGCHLD);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t copies = testapp::arg_size(argc, argv, 1, 200);
  const size_t s = testapp::arg_size(argc, argv, 2, 4u << 20);
  testapp::require_gpu("signal_app");
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGALRM, SIGUSR1, SIGCHLD}) TA_ASSERT(sigaction(sig, &sa, nullptr) == 0);

  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, s));
  std::vector<unsigned char> src(s), dst(s);
  auto round_trip = [&](uint32_t seed) {
    testapp::fill(src.data(), s, seed);
    TA_CHECK(cudaMemcpy(d, src.data(), s, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpy(dst.data(), d, s, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(dst.data(), s, seed));
  };
  round_trip(1);  // signals open on this thread: the shim's threads start now
  round_trip(2);

  const sigset_t mine = app_signals();
  TA_ASSERT(pthread_sigmask(SIG_BLOCK, &mine, nullptr) == 0);
  std::atomic<bool> stop{false};
  pid_t copier_tid = 0;
  std::atomic<bool> ready{false};
  std::thread copier([&] {
    copier_tid = static_cast<pid_t>(syscall(SYS_gettid));
    TA_ASSERT(pthread_sigmask(SIG_UNBLOCK, &mine, nullptr) == 0);
    ready.store(true);
    for (uint32_t i = 0; !stop.load() || i < copies; ++i) round_trip(100 + i);
  });
  while (!ready.load()) std::this_thread::yield();

  itimerval every_ms{{0, 1000}, {0, 1000}};
  TA_ASSERT(setitimer(ITIMER_REAL, &every_ms, nullptr) == 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 200; ++i) {
    kill(getpid(), SIGUSR1);
    if (i % 10 == 0) {
      pid_t c = fork();
      TA_ASSERT(c >= 0);
      if (c == 0) _exit(0);
      children.push_back(c);
    }
    usleep(1000);
  }
  itimerval off{};
  TA_ASSERT(setitimer(ITIMER_REAL, &off, nullptr) == 0);
  for (pid_t c : children) {
    int status = 0;
    TA_ASSERT(waitpid(c, &status, 0) == c);
  }
  stop.store(true);
  copier.join();
  TA_CHECK(cudaFree(d));

  const int n = std::min(g_records.load(), kMaxRecords);
  int counts[3] = {0, 0, 0}, elsewhere = 0;
  for (int i = 0; i < n; ++i) {
    counts[g_signo[i] == SIGALRM ? 0 : g_signo[i] == SIGUSR1 ? 1 : 2]++;
    if (g_tid[i] != copier_tid) {
      if (elsewhere++ < 5)
        std::printf("signal_app: signal %d ran on thread %d, not the app's thread %d\n", g_signo[i], g_tid[i],
                    copier_tid);
    }
  }
  std::printf("signal_app: %d handler runs (SIGALRM %d, SIGUSR1 %d, SIGCHLD %d), %d on another thread\n", n,
              counts[0], counts[1], counts[2], elsewhere);
  TA_ASSERT(counts[0] > 0 && counts[1] > 0 && counts[2] > 0);
  TA_ASSERT(elsewhere == 0);
  testapp::done("signal_app");
  return 0;
}
