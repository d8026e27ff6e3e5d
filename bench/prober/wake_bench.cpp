// System CPU time of one sleep and wake-up of the prober's loop, the kernel work it does besides
// the verbs calls: a timer due (timerfd, as epoll_wait's timeout is), epoll_wait returning, the
// file read. Run in the Soft-RoCE guest and on the host, the ratio of the two is TCG's slowdown
// for these kernel paths (the awk loop of calibrate.sh measures it for user-space code only).
//   bench_prober_wake [CYCLES] [SLEEP_US]
// Prints the thread's CPU time per cycle (getrusage(RUSAGE_THREAD)) and the wall time per cycle.
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {
double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; }

double wall_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  const long cycles = argc > 1 ? std::atol(argv[1]) : 20000;
  const long sleep_us = argc > 2 ? std::atol(argv[2]) : 200;
  if (cycles <= 0 || sleep_us <= 0 || sleep_us >= 1000000) {
    std::fprintf(stderr, "usage: bench_prober_wake [CYCLES > 0] [SLEEP_US 1..999999]\n");
    return 2;
  }
  const int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (tfd < 0 || ep < 0) {
    std::perror("timerfd/epoll");
    return 1;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) != 0) {
    std::perror("epoll_ctl");
    return 1;
  }
  const itimerspec due{{0, 0}, {0, sleep_us * 1000}};
  rusage r0{}, r1{};
  getrusage(RUSAGE_THREAD, &r0);
  const double w0 = wall_now();
  for (long i = 0; i < cycles; ++i) {
    timerfd_settime(tfd, 0, &due, nullptr);
    epoll_event out[4];
    while (epoll_wait(ep, out, 4, -1) <= 0) {
    }
    std::uint64_t expirations;
    [[maybe_unused]] auto n = read(tfd, &expirations, sizeof expirations);
  }
  const double w1 = wall_now();
  getrusage(RUSAGE_THREAD, &r1);
  const double user = seconds(r1.ru_utime) - seconds(r0.ru_utime), sys = seconds(r1.ru_stime) - seconds(r0.ru_stime);
  // The kernel splits a thread's CPU time into user and system by sampling at each tick: the sum
  // is exact, the split only roughly so.
  const double per = 1e6 / static_cast<double>(cycles);
  std::printf("cycles=%ld sleep=%ld us: per wake-up %.2f us of CPU (user %.2f + system %.2f), wall %.1f us\n", cycles,
              sleep_us, (user + sys) * per, user * per, sys * per, (w1 - w0) * per);
  return 0;
}
