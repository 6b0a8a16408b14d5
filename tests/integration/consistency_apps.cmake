# The consistency experiments users run: apps/linear's --clock_every and --straggler
# flags end to end (bsp with a chosen straggler, seeded random stragglers under ssp:1,
# a clock per epoch, bad flags), and a smoke run of tracker/consistency.
if(TARGET linear)
  # The straggler's choices alone (a unit test: listed as unit.LinearStraggler.*).
  include(GoogleTest)
  add_executable(linear_straggler_test
    ${PROJECT_SOURCE_DIR}/tests/unit/linear_straggler_test.cc)
  target_link_libraries(linear_straggler_test PRIVATE herdps_linear_training GTest::gtest_main)
  gtest_discover_tests(linear_straggler_test TEST_PREFIX "unit." DISCOVERY_TIMEOUT 60)

  add_test(NAME integration.linear_clocks_and_stragglers_end_to_end
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/consistency_apps_test.py linear
            ${LAUNCH} $<TARGET_FILE:linear>)
  set_tests_properties(integration.linear_clocks_and_stragglers_end_to_end
    PROPERTIES TIMEOUT 240)
  add_test(NAME integration.tracker_consistency_writes_table_csvs_and_plots
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/consistency_apps_test.py tracker
            ${PROJECT_SOURCE_DIR}/tracker/consistency $<TARGET_FILE:linear>)
  set_tests_properties(integration.tracker_consistency_writes_table_csvs_and_plots
    PROPERTIES TIMEOUT 240)
endif()
