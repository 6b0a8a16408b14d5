# What the scheduler tells about a running job: the stall report names who waits for
# whom (a Clock/Barrier mismatch under the launcher, with PS_STALL_REPORT=3 and with the
# default 30 s; a push waiting on a stopped server, nodes started by hand), SIGUSR1 to
# the launcher prints it on demand, and the metrics endpoint's counters, parsed with
# python3-prometheus-client, match what the workers did. observe_test.py.
herdps_node_test_app(observe_app observe_app.cc)

function(herdps_observe_test behaviour timeout)
  add_test(NAME integration.observe_${behaviour}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/observe_test.py ${behaviour}
            ${LAUNCH} $<TARGET_FILE:observe_app>)
  set_tests_properties(integration.observe_${behaviour} PROPERTIES TIMEOUT ${timeout})
endfunction()

herdps_observe_test(clock_barrier_stall_is_reported 90)
herdps_observe_test(clock_barrier_stall_is_reported_with_the_default_delay 120)
herdps_observe_test(stopped_server_stall_is_reported 90)
herdps_observe_test(metrics_scrape_counts_match 120)
herdps_observe_test(metrics_port_taken_is_a_clear_error 90)
