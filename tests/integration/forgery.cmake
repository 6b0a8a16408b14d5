# Sender checks and request identity: messages forged by a process outside the job, a
# stranger's partial frames, joins without the job's token, messages over
# PS_MAX_MESSAGE_BYTES, requests for an app that never starts, and answers meant for a
# destroyed KVWorker.
herdps_node_test_app(forgery_app forgery_app.cc)
add_executable(forger forger.cc)
target_link_libraries(forger PRIVATE herdps_proto herdps_zmq gflags)

add_test(NAME integration.messages_forged_from_outside_the_job_are_refused_counted_and_change_nothing
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/forgery_test.py
          $<TARGET_FILE:forgery_app> $<TARGET_FILE:forger>)
set_tests_properties(
  integration.messages_forged_from_outside_the_job_are_refused_counted_and_change_nothing
  PROPERTIES TIMEOUT 240)

herdps_node_test_app(request_identity_app request_identity_app.cc)
add_test(NAME integration.push_over_max_message_bytes_fails_at_the_caller_and_later_pushes_work
  COMMAND ${Python3_EXECUTABLE} ${LAUNCH} -n 1 -s 1 --timeout 60
          --env PS_MAX_MESSAGE_BYTES=1048576
          -- $<TARGET_FILE:request_identity_app> --scenario too_large)
set_tests_properties(
  integration.push_over_max_message_bytes_fails_at_the_caller_and_later_pushes_work
  PROPERTIES TIMEOUT 90)
# The same with PS_RESEND=1, keys raw so that the push is over the limit at the worker:
# the push never leaves, yet its sequence was taken; a skip takes its place, or the
# server would hold every later message of this worker for good.
add_test(NAME integration.push_over_max_message_bytes_with_resend_leaves_no_gap_in_the_sequence
  COMMAND ${Python3_EXECUTABLE} ${LAUNCH} -n 1 -s 1 --timeout 60
          --env PS_MAX_MESSAGE_BYTES=1048576 --env PS_RESEND=1 --env PS_KEY_ENCODING=0
          -- $<TARGET_FILE:request_identity_app> --scenario too_large)
set_tests_properties(
  integration.push_over_max_message_bytes_with_resend_leaves_no_gap_in_the_sequence
  PROPERTIES TIMEOUT 90)
add_test(NAME integration.request_for_an_app_no_server_runs_ends_with_not_found_after_10_s
  COMMAND ${Python3_EXECUTABLE} ${LAUNCH} -n 1 -s 1 --timeout 60
          --env PS_HEARTBEAT_INTERVAL=0
          -- $<TARGET_FILE:request_identity_app> --scenario missing_app)
set_tests_properties(
  integration.request_for_an_app_no_server_runs_ends_with_not_found_after_10_s
  PROPERTIES TIMEOUT 90)
add_test(NAME integration.recreated_kvworker_gets_only_its_own_answers_and_counts_stale_ones
  COMMAND ${Python3_EXECUTABLE} ${LAUNCH} -n 1 -s 1 --timeout 60
          -- $<TARGET_FILE:request_identity_app> --scenario recreated_customer)
set_tests_properties(
  integration.recreated_kvworker_gets_only_its_own_answers_and_counts_stale_ones
  PROPERTIES TIMEOUT 90)

# A stranger's partial frames (van/connection_guard.h): four connections announcing
# 900 MiB frames leave the server under 512 MiB, and the job goes on.
add_test(NAME integration.stranger_partial_frames_of_900_mib_leave_the_server_under_512_mib
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/stranger_test.py
          partial_frames_of_900_mib_leave_the_server_under_512_mib ${LAUNCH}
          $<TARGET_FILE:liveness_app>)
set_tests_properties(integration.stranger_partial_frames_of_900_mib_leave_the_server_under_512_mib
  PROPERTIES TIMEOUT 120)
