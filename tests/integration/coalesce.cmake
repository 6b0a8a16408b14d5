# Coalescing (PS_COALESCE): a worker issuing asynchronous pushes without waiting sends
# them in batches (its receive thread sends them once it has handled an answer), the
# servers answer in batches, and every push still lands exactly once and in order
# (fifo_order checks both); with PS_COALESCE=0 no node sends or receives a batch. A
# window's first request waits in the batch with the rest, once windows come, and goes
# by the van's deadline when nobody waits for it; requests one at a time never wait
# (window_lead_app); with PS_COALESCE_FIRST=0 it never waits.
herdps_node_test_app(window_lead_app window_lead_app.cc)
add_test(NAME integration.coalesce_a_windows_first_request_waits_for_the_rest
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/expect_output.py --exit 0
          --line "\\[worker 0\\] window_lead: ok"
          --timeout 110
          -- ${Python3_EXECUTABLE} ${LAUNCH} -n 1 -s 2 --timeout 100
          -- $<TARGET_FILE:window_lead_app>)
set_tests_properties(integration.coalesce_a_windows_first_request_waits_for_the_rest
  PROPERTIES TIMEOUT 130)
add_test(NAME integration.coalesce_first_off_sends_a_windows_first_request_at_once
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/expect_output.py --exit 0
          --line "\\[worker 0\\] window_lead: ok"
          --timeout 110
          -- ${Python3_EXECUTABLE} ${LAUNCH} -n 1 -s 2 --timeout 100 --env PS_COALESCE_FIRST=0
          -- $<TARGET_FILE:window_lead_app>)
set_tests_properties(integration.coalesce_first_off_sends_a_windows_first_request_at_once
  PROPERTIES TIMEOUT 130)
add_test(NAME integration.coalesce_async_pushes_go_in_batches_exact_and_in_order
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/expect_output.py --exit 0
          --line "\\[worker 0\\] coalesced: messages=[1-9][0-9]* sent_batches=[1-9][0-9]* received_batches=[1-9]"
          --line "\\[server 0\\] coalesced: messages=[1-9][0-9]* sent_batches=[1-9][0-9]* received_batches=[1-9]"
          --line "\\[server 1\\] coalesced: messages=[1-9][0-9]* sent_batches=[1-9][0-9]* received_batches=[1-9]"
          --timeout 110
          -- ${Python3_EXECUTABLE} ${LAUNCH} -n 1 -s 2 --timeout 100
          -- $<TARGET_FILE:fifo_order> --pushes 20000)
set_tests_properties(integration.coalesce_async_pushes_go_in_batches_exact_and_in_order
  PROPERTIES TIMEOUT 130)
add_test(NAME integration.coalesce_off_sends_every_message_alone
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/expect_output.py --exit 0
          --line "\\[worker 0\\] coalesced: messages=0 sent_batches=0 received_batches=0"
          --line "\\[server 0\\] coalesced: messages=0 sent_batches=0 received_batches=0"
          --line "\\[server 1\\] coalesced: messages=0 sent_batches=0 received_batches=0"
          --timeout 110
          -- ${Python3_EXECUTABLE} ${LAUNCH} -n 1 -s 2 --timeout 100 --env PS_COALESCE=0
          -- $<TARGET_FILE:fifo_order> --pushes 20000)
set_tests_properties(integration.coalesce_off_sends_every_message_alone
  PROPERTIES TIMEOUT 130)
