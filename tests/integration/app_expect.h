// EXPECT(cond, printf-style message...) for the integration test apps: a failed check
// prints "FAILED <cond>: <message>" on stderr and adds one to `failures`, an int the
// including file defines (before the first EXPECT) and turns into its exit status.
// Checks go on after a failure, so one run reports every wrong value.
#ifndef HERDPS_TESTS_INTEGRATION_APP_EXPECT_H_
#define HERDPS_TESTS_INTEGRATION_APP_EXPECT_H_

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

#endif  // HERDPS_TESTS_INTEGRATION_APP_EXPECT_H_
