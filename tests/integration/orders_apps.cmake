# Example orders in apps/linear (--order, docs/linear.md) and the CD-GraB experiment
# (tracker/orders, docs/orders.md): 4 workers train with cdgrab end to end; a worker that
# leaves or is killed after epoch 1 does not hold up the others (nodes started by hand);
# a smoke run of tracker/orders.
if(TARGET linear AND TARGET linear_newton_reference)
  set(ORDERS_APPS_TEST ${CMAKE_CURRENT_SOURCE_DIR}/orders_apps_test.py)
  add_test(NAME integration.linear_cdgrab_4_workers_change_orders_and_learn
    COMMAND ${Python3_EXECUTABLE} ${ORDERS_APPS_TEST} cdgrab ${LAUNCH} $<TARGET_FILE:linear>)
  foreach(how leave kill)
    add_test(NAME integration.linear_cdgrab_goes_on_when_a_worker_stops_early_${how}
      COMMAND ${Python3_EXECUTABLE} ${ORDERS_APPS_TEST} ${how} $<TARGET_FILE:linear>)
  endforeach()
  add_test(NAME integration.tracker_orders_writes_table_csvs_and_plot
    COMMAND ${Python3_EXECUTABLE} ${ORDERS_APPS_TEST} tracker
            ${PROJECT_SOURCE_DIR}/tracker/orders $<TARGET_FILE:linear>
            $<TARGET_FILE:linear_newton_reference>)
  set_tests_properties(
    integration.linear_cdgrab_4_workers_change_orders_and_learn
    integration.linear_cdgrab_goes_on_when_a_worker_stops_early_leave
    integration.linear_cdgrab_goes_on_when_a_worker_stops_early_kill
    integration.tracker_orders_writes_table_csvs_and_plot
    PROPERTIES TIMEOUT 150)
endif()
