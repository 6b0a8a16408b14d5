# Consistency models: the workers of clock_guarantees check, over many clocks with
# random per-worker delays, that BSP / SSP(s) / ASP keep their read and clock-gap
# guarantees, and that nobody waits forever for a worker that stops early.
herdps_node_test_app(clock_guarantees clock_guarantees.cc)

function(herdps_clock_test name consistency staleness)
  add_test(NAME integration.clocks_${name}
    COMMAND ${Python3_EXECUTABLE} ${LAUNCH} -n 4 -s 2 --timeout 240
            --env PS_CONSISTENCY=${consistency}
            -- $<TARGET_FILE:clock_guarantees> --staleness ${staleness} ${ARGN})
  set_tests_properties(integration.clocks_${name} PROPERTIES TIMEOUT 300)
endfunction()

herdps_clock_test(bsp_keeps_its_guarantees_over_2000_clocks bsp 0 --clocks 2000)
herdps_clock_test(ssp1_keeps_its_guarantees_over_2000_clocks ssp:1 1 --clocks 2000)
herdps_clock_test(ssp3_keeps_its_guarantees_over_2000_clocks ssp:3 3 --clocks 2000)
herdps_clock_test(asp_never_waits asp -1 --clocks 2000)

# A worker that stops early (finishes its clocks, leaves, exits without Finalize, is
# killed), nodes started by hand: the others end all their clocks.
foreach(how finish finalize exit kill)
  add_test(NAME integration.clocks_bsp_goes_on_when_a_worker_stops_early_${how}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/clock_leave_test.py ${how}
            $<TARGET_FILE:clock_guarantees>)
  set_tests_properties(integration.clocks_bsp_goes_on_when_a_worker_stops_early_${how}
    PROPERTIES TIMEOUT 120)
endforeach()
