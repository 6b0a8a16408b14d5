# The scheduler's plugin seat: a test plugin on its own thread, SimpleApp clients,
# membership callbacks.
herdps_node_test_app(plugin_seat_app plugin_seat_app.cc)
herdps_launch_test(integration.plugin_seat_serves_requests_and_a_slow_plugin_delays_no_barrier
  3 1 plugin_seat_app --rounds 4)
# The job lost a node, so it ends with status 1 (every survivor says why), after the
# plugin and the two other workers completed every round.
add_test(NAME integration.plugin_seat_completes_rounds_without_a_worker_that_died
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/expect_output.py --exit 1
          --line "worker 0: round 4 sum [0-9]+ OK" --line "worker 1: round 4 sum [0-9]+ OK"
          --line "the job lost worker 2 \\(node 13\\) \\(declared dead\\)"
          --timeout 80
          -- ${Python3_EXECUTABLE} ${LAUNCH} -n 3 -s 1 --timeout 60
          --env PS_HEARTBEAT_INTERVAL=0.2 --env PS_HEARTBEAT_TIMEOUT=1
          -- $<TARGET_FILE:plugin_seat_app> --rounds 5 --leaver 2 --slow_ms 500)
set_tests_properties(integration.plugin_seat_completes_rounds_without_a_worker_that_died
  PROPERTIES TIMEOUT 90)
