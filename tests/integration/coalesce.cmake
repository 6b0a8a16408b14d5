# Coalescing (PS_COALESCE): a worker issuing asynchronous pushes without waiting sends
# them in batches (its receive thread sends them once it has handled an answer), the
# servers answer in batches, and every push still lands exactly once and in order
# (fifo_order checks both); with PS_COALESCE=0 no node sends or receives a batch.
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
