// EXPECT(cond, printf-style message...) for the integration test apps: a failed check
// prints "FAILED <cond>: <message>" on stderr and adds one to `failures`, an int the
// including file defines (before the first EXPECT) and turns into its exit status.
// Checks go on after a failure, so one run reports every wrong value.
// Say(printf-style...) prints a line on stdout and flushes it at once, so that a test
// driver reading the app's output sees it while the app runs.
#ifndef HERDPS_TESTS_INTEGRATION_APP_EXPECT_H_
#define HERDPS_TESTS_INTEGRATION_APP_EXPECT_H_

#include <cstdarg>
#include <cstdio>

#define EXPECT(cond, ...)                         \
  do {                                            \
    if (!(cond)) {                                \
      std::fprintf(stderr, "FAILED %s: ", #cond); \
      std::fprintf(stderr, __VA_ARGS__);          \
      std::fprintf(stderr, "\n");                 \
      ++failures;                                 \
    }                                             \
  } while (0)

inline void Say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void Say(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stdout, fmt, args);
  va_end(args);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

#endif  // HERDPS_TESTS_INTEGRATION_APP_EXPECT_H_
