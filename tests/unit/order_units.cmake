# The example-order balancing (ps/internal/order_balancer.h): CD-GraB's rule, its
# baselines and the random projection; then apps/order_replay end to end, on hand-checked
# cases and on malformed input (exit 2 and a message).
herdps_unit_test(order_balancer_test)

# The app exists only when apps are built.
if(TARGET order_replay)
  foreach(mode hand_checked malformed)
    add_test(NAME order_replay.${mode}
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/order_replay_check.py
              $<TARGET_FILE:order_replay> ${mode})
    set_tests_properties(order_replay.${mode} PROPERTIES TIMEOUT 120)
  endforeach()
endif()
# The scheduler's order plugin (internal to the runtime) driven through a fake plugin
# context, and the order protocol's codec.
herdps_unit_test(order_plugin_test)
target_include_directories(order_plugin_test PRIVATE ${PROJECT_SOURCE_DIR}/ps/services)
