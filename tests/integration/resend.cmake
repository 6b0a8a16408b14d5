# Reliable delivery (PS_RESEND=1) under injected loss (PS_DROP_RATE) on every node:
# push/pull stays exact, per-key FIFO holds, the receiver's reorder memory stays within
# its window and every sent message is acknowledged in the end. resend_test.py runs the
# jobs and reads each node's ps::NodeStats from the apps' "stats:" lines.
set(RESEND_TEST ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/resend_test.py ${LAUNCH})

foreach(rate 0.01 0.05 0.1 0.2)
  set(name integration.resend_push_pull_is_exact_in_20_of_20_runs_at_drop_rate_${rate})
  add_test(NAME ${name}
    COMMAND ${RESEND_TEST} $<TARGET_FILE:kv_correctness> exact --rate ${rate} --runs 20
            --keys 1000 --jobs 4 --job-timeout 40)
  # 5 rounds of 4 jobs, each bounded by 40 s (a run takes 0.2-11 s) plus 20 s of grace.
  set_tests_properties(${name} PROPERTIES TIMEOUT 330)
endforeach()

# Every setting but PS_RESEND and the drop rate at its default (PS_RESEND_TIMEOUT 1 s,
# heartbeats every 1 s, dead after 10 s): each run takes 19-74 s (80 runs by hand, median
# 36 s), mostly waiting for resends; the job must end with exit 0 (the scheduler stays
# until every node left, so a closing barrier's release that is lost a few times still
# arrives). With resends backing off up to 16 timeouts, one run in several hundred
# passed the 120 s bound: a message lost 8-9 times in a row waited 79-95 s.
add_test(NAME integration.resend_push_pull_is_exact_with_default_timeouts_in_8_of_8_runs_at_drop_rate_0.2
  COMMAND ${RESEND_TEST} $<TARGET_FILE:kv_correctness> exact --rate 0.2 --runs 8 --keys 100
          --jobs 4 --resend-timeout-ms 0 --job-timeout 120)
set_tests_properties(
  integration.resend_push_pull_is_exact_with_default_timeouts_in_8_of_8_runs_at_drop_rate_0.2
  PROPERTIES TIMEOUT 400)

add_test(NAME integration.resend_fifo_has_no_inversions_at_drop_rate_0.1
  COMMAND ${RESEND_TEST} $<TARGET_FILE:fifo_order> fifo --rate 0.1 --pushes 20000)
set_tests_properties(integration.resend_fifo_has_no_inversions_at_drop_rate_0.1
  PROPERTIES TIMEOUT 150)

add_test(NAME integration.resend_reorder_memory_stays_bounded_over_100000_pushes_at_drop_rate_0.1
  COMMAND ${RESEND_TEST} $<TARGET_FILE:fifo_order> memory --rate 0.1 --pushes 100000
          --job-timeout 150)
set_tests_properties(
  integration.resend_reorder_memory_stays_bounded_over_100000_pushes_at_drop_rate_0.1
  PROPERTIES TIMEOUT 200)

# Resend on, nothing dropped: 100,000 asynchronous pushes complete. ACKs and resends once
# queued behind a data send blocked on a full peer, on both sides, and the job deadlocked
# (at PS_RESEND_TIMEOUT=200 in 3 runs of 3, at the default 1000 in 3 of 4).
add_test(NAME integration.resend_100000_async_pushes_complete_without_drops
  COMMAND ${RESEND_TEST} $<TARGET_FILE:fifo_order> fifo --rate 0 --pushes 100000
          --resend-timeout-ms 200 --job-timeout 60)
set_tests_properties(integration.resend_100000_async_pushes_complete_without_drops
  PROPERTIES TIMEOUT 120)
