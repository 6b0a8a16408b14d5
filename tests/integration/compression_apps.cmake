# The gradient-compression experiment (tracker/compression, docs/linear.md "Gradient
# compression"): a smoke run on the bundled data with two codecs, one seed, two epochs
# and both optimizers, a tau sweep, and bad options.
if(TARGET linear)
  add_test(NAME integration.tracker_compression_writes_table_csvs_and_plots
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/compression_apps_test.py
            ${PROJECT_SOURCE_DIR}/tracker/compression $<TARGET_FILE:linear>)
  set_tests_properties(integration.tracker_compression_writes_table_csvs_and_plots
    PROPERTIES TIMEOUT 150)
endif()
