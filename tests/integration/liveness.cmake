# Node failure handling: a slow handle is not a dead node; a frozen or killed server
# fails the requests waiting for it; a killed scheduler ends every node; a worker that
# dies or exits without Finalize is dropped and the others finish (then exit 1: the job
# lost a node); a frozen and resumed worker says it was stalled; lost heartbeats
# (drop rate 0.5) kill nobody; callbacks blocked on a full queue do not stall the
# control loop; a lost job's ipc socket files are removed. liveness_test.py
# starts the nodes (under tracker/launch, or by hand as on several hosts), signals them
# and checks exit codes, messages and time bounds.
herdps_node_test_app(liveness_app liveness_app.cc)

function(herdps_liveness_test behaviour timeout)
  add_test(NAME integration.liveness_${behaviour}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/liveness_test.py ${behaviour}
            ${LAUNCH} $<TARGET_FILE:liveness_app>)
  set_tests_properties(integration.liveness_${behaviour} PROPERTIES TIMEOUT ${timeout})
endfunction()

herdps_liveness_test(slow_handle_is_not_declared_dead 90)
herdps_liveness_test(slow_handle_with_default_delivery_is_not_declared_dead 60)
herdps_liveness_test(frozen_server_fails_pending_requests_and_ends_the_job 60)
herdps_liveness_test(killed_server_ends_the_launched_job 60)
herdps_liveness_test(killed_scheduler_ends_the_launched_job 60)
herdps_liveness_test(killed_server_fails_requests_naming_it 60)
herdps_liveness_test(killed_scheduler_makes_every_node_exit_non_zero 60)
herdps_liveness_test(killed_worker_is_dropped_and_the_others_finish 60)
herdps_liveness_test(worker_exiting_without_finalize_is_dropped_and_the_others_finish 60)
herdps_liveness_test(no_node_is_declared_dead_at_drop_rate_0_5 150)
herdps_liveness_test(frozen_worker_says_it_was_stalled_and_exits_non_zero 90)
herdps_liveness_test(blocked_callbacks_do_not_stall_the_control_loop 90)
herdps_liveness_test(ipc_files_of_a_lost_job_are_removed 90)
# apps/bench's raw ZeroMQ client gives up when its server dies (APP is bench here; a
# build without the apps has no bench).
if(TARGET bench)
  add_test(NAME integration.liveness_bench_stops_when_its_raw_server_dies
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/liveness_test.py
            bench_stops_when_its_raw_server_dies ${LAUNCH} $<TARGET_FILE:bench>)
  set_tests_properties(integration.liveness_bench_stops_when_its_raw_server_dies
    PROPERTIES TIMEOUT 90)
endif()

# Data before the node table is handed to app handles by the data channel's receiving
# thread, never by the control loop (early_data_app.cc).
herdps_node_test_app(early_data_app early_data_app.cc)
add_test(NAME integration.data_before_the_node_table_never_runs_a_handle_on_the_control_loop
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/early_data_test.py
          $<TARGET_FILE:early_data_app>)
set_tests_properties(
  integration.data_before_the_node_table_never_runs_a_handle_on_the_control_loop
  PROPERTIES TIMEOUT 300)

# A server's death survived: the restart path without replication (a killed server
# replaced by a new process with its rank, which resumes from its checkpoint or starts
# empty, started by hand or by tracker/launch --restart-failed; the workers' report of
# what the restart lost matches the final values: server_restart_test.py), and
# replication (PS_REPLICATION=2, 3 servers: replicas identical bit for bit; a killed
# server's keys served by their replicas, no acknowledged update lost or applied twice,
# by hand and under tracker/launch: replication_test.py). NAME runs SCRIPT HOW with the
# counter app (and the launcher after it when the last argument is LAUNCH).
herdps_node_test_app(server_restart_app server_restart_app.cc)
function(herdps_server_death_test name script how)
  set(launch)
  if(ARGN)
    set(launch ${LAUNCH})
  endif()
  add_test(NAME integration.${name}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/${script} ${how}
            $<TARGET_FILE:server_restart_app> ${launch})
  set_tests_properties(integration.${name} PROPERTIES TIMEOUT 150)
endfunction()
herdps_server_death_test(server_restart_from_checkpoint server_restart_test.py from_checkpoint)
herdps_server_death_test(server_restart_empty server_restart_test.py empty)
herdps_server_death_test(server_restart_by_the_launcher server_restart_test.py launcher LAUNCH)
herdps_server_death_test(replication_replicas_are_identical replication_test.py
                         replicas_are_identical)
herdps_server_death_test(replication_kill_one_of_three replication_test.py kill_one_of_three)
# A push that reaches a replica twice (as the dead owner's copy, then as the worker's
# part sent again) is taken once: forced by making the owner lose half of what it gets.
herdps_server_death_test(replication_push_sent_again_after_its_copy_is_taken_once
                         replication_test.py kill_one_of_three_lossy)
herdps_server_death_test(replication_launched replication_test.py launched LAUNCH)
# PS_REPLICATION=3, 4 servers, 8 keys a push: two servers stopped, then killed at once. A
# part sent again is split among the new owners, and the copy of one piece reaches the
# server another piece goes to: each key's increment counts once.
herdps_server_death_test(replication_three_copies_two_servers_killed_at_once
                         replication_test.py stall_then_kill_two_of_four)
herdps_server_death_test(replication_three_copies_two_servers_killed_at_once_push_pull
                         replication_test.py stall_then_kill_two_of_four_push_pull)
# Fault schedules drawn from a seed (kills, stops, both with lost messages, servers
# added, leaving, killed and replaced or re-replicated, with lost messages): every
# acknowledged increment counted once. One seed each here (elastic: seed 4, an add, a
# re-replication, a kill and a new server, an add and a leave; elastic_one_copy, with
# PS_REPLICATION=1: seed 1, two adds, two leaves, an add; kills_three_copies, with
# PS_REPLICATION=3 and 4 servers: seed 1, two kills, then two servers killed at once;
# elastic_chunks, values of 3 chunks each at its own point of the ring: seed 4, an add,
# a re-replication, two kills each with a new server, an add; elastic_three_copies, with
# PS_REPLICATION=3 and 4 to 6 servers: seed 1, an add, two servers killed at once and
# replaced, a leave, two more killed at once, an add); docs/fault-tolerance.md gives the
# figures over many seeds.
foreach(schedule_seed kills:1 stops:1 mixed:1 elastic:4 elastic_one_copy:1
                      kills_three_copies:1 elastic_chunks:4 elastic_three_copies:1)
  string(REPLACE ":" ";" parts ${schedule_seed})
  list(GET parts 0 schedule)
  list(GET parts 1 seed)
  add_test(NAME integration.fault_schedule_${schedule}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/fault_schedule_test.py
            ${schedule} ${seed} $<TARGET_FILE:server_restart_app>)
  set_tests_properties(integration.fault_schedule_${schedule} PROPERTIES TIMEOUT 300)
endforeach()
# Link cuts: each server on a host of its own (network namespaces), its cable pulled for
# a moment or until it is declared dead (seed 2: both). Needs root and iproute2 (skips
# with 77 elsewhere); alone, as the multihost tests, whose namespaces it shares the kind of.
add_test(NAME integration.fault_schedule_cuts
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/fault_schedule_test.py
          cuts 2 $<TARGET_FILE:server_restart_app>)
set_tests_properties(integration.fault_schedule_cuts PROPERTIES
  TIMEOUT 300 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
# A new server in a dead one's place catches up from the live servers; then another
# server dies, and nothing is lost (two of three servers dead, one at a time).
herdps_server_death_test(replication_replaced_then_another_killed replication_test.py
                         replaced_then_another_killed)
# No new server: 1 s after server 1's death (PS_REREPLICATE_AFTER=1) servers 0 and 2 copy
# its keys between them; then server 2 dies too, and nothing is lost.
herdps_server_death_test(replication_rereplicated_then_another_killed replication_test.py
                         rereplicated_then_another_killed)
# Two servers added to a running job by hand, one entering while the other waits: each
# catches up the keys the grown ring gives it while the pushes go on, then the ring
# places keys on it; nothing lost or applied twice (server_added_test.py).
herdps_server_death_test(server_added_twice server_added_test.py added_twice)
# A server added with PS_CATCH_UP_RATE=0.01: the keys go to it in paced slices while the
# pushes go on; nothing lost or applied twice, the copies identical.
herdps_server_death_test(server_added_throttled server_added_test.py added_throttled)
# A server added, then another one leaving gracefully on SIGTERM (PS_LEAVE_ON_SIGTERM=1):
# the others take its keys over while it serves them, it exits 0, nothing is lost.
herdps_server_death_test(server_added_then_removed server_added_test.py added_then_removed)
# The same with values in chunks (3 chunks a key, PS_CHUNK_BYTES=1024): each chunk has
# its own point of the ring and moves as a key does; every value of each key equal at
# the end, every chunk on exactly 2 servers.
herdps_server_death_test(server_added_then_removed_chunks server_added_test.py
                         added_then_removed_chunks)
# One copy of each key and values in chunks: a server added (a leave needs
# PS_CHUNK_BYTES=0 then); the chunks move to it, nothing lost or applied twice.
herdps_server_death_test(server_added_by_hand_chunks_one_copy server_added_test.py
                         added_by_hand_chunks_one_copy)
# The same with one copy of each key (PS_REPLICATION=1): the keys move, each key's one
# copy from its server to its new one, and the parts in flight to the server that left
# go to its keys' new servers; nothing is lost or applied twice.
herdps_server_death_test(server_added_then_removed_one_copy server_added_test.py
                         added_then_removed_one_copy)
# With one copy of each key, a server that applied a push and left its answer unsent
# (PS_LOSE_PUSH_ANSWER) leaves: its catch-ups name the push, so the key's new server
# answers the part the worker sends it again as taken; nothing is applied twice.
herdps_server_death_test(server_removed_after_a_lost_answer_one_copy server_added_test.py
                         removed_after_a_lost_answer_one_copy)
# A server added while another one is stopped (SIGSTOP): the add waits for the stopped
# one's keys until it is declared dead, then is called off; the new server exits 1
# saying why, the dead one's keys fail over, nothing is lost or applied twice.
herdps_server_death_test(server_added_while_another_stopped server_added_test.py
                         added_while_another_stopped)
# A server leaving on SIGTERM while another one is stopped: the leave is called off
# once the stopped one is declared dead; the leaving server serves on and exits 0.
herdps_server_death_test(server_removed_while_another_stopped server_added_test.py
                         removed_while_another_stopped)
# The same with server 1 stopped past PS_RING_CHANGE_TIMEOUT=3 but not dead (the
# runtime's heartbeats): the add, or the leave, is called off at its deadline; server 1
# runs again, and a new server is added, or server 0 asks again and leaves.
herdps_server_death_test(server_added_while_another_stalls server_added_test.py
                         added_while_another_stalls)
herdps_server_death_test(server_removed_while_another_stalls server_added_test.py
                         removed_while_another_stalls)
# The restart and the failover with the runtime's default heartbeats (dead after 10 s).
herdps_server_death_test(server_restart_from_checkpoint_with_default_heartbeats
                         server_restart_test.py from_checkpoint)
set_tests_properties(integration.server_restart_from_checkpoint_with_default_heartbeats
  PROPERTIES ENVIRONMENT HERDPS_TEST_HEARTBEAT_TIMEOUT=default)
herdps_server_death_test(replication_kill_one_of_three_with_default_heartbeats
                         replication_test.py kill_one_of_three)
set_tests_properties(integration.replication_kill_one_of_three_with_default_heartbeats
  PROPERTIES ENVIRONMENT HERDPS_TEST_HEARTBEAT_TIMEOUT=default)
herdps_server_death_test(replication_replaced_then_another_killed_with_default_heartbeats
                         replication_test.py replaced_then_another_killed)
set_tests_properties(integration.replication_replaced_then_another_killed_with_default_heartbeats
  PROPERTIES ENVIRONMENT HERDPS_TEST_HEARTBEAT_TIMEOUT=default)
herdps_server_death_test(server_added_while_another_stopped_with_default_heartbeats
                         server_added_test.py added_while_another_stopped)
set_tests_properties(integration.server_added_while_another_stopped_with_default_heartbeats
  PROPERTIES ENVIRONMENT HERDPS_TEST_HEARTBEAT_TIMEOUT=default)
# PS_REPLICATION=3: two of four servers killed at once, both declared dead 10 s later.
herdps_server_death_test(replication_three_copies_two_servers_killed_with_default_heartbeats
                         replication_test.py kill_two_of_four)
set_tests_properties(
  integration.replication_three_copies_two_servers_killed_with_default_heartbeats
  PROPERTIES ENVIRONMENT HERDPS_TEST_HEARTBEAT_TIMEOUT=default)
# apps/linear under BSP with PS_REPLICATION=2 finishes with a server killed mid-run, at
# the loss of a run without the kill (a build without the apps has no linear).
if(TARGET linear)
  add_test(NAME integration.replication_linear_finishes_after_a_server_dies
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/replication_test.py linear
            $<TARGET_FILE:linear> ${LAUNCH})
  set_tests_properties(integration.replication_linear_finishes_after_a_server_dies
    PROPERTIES TIMEOUT 300)
  # The same with the killed server replaced by a new one, which catches up.
  add_test(NAME integration.replication_linear_a_new_server_catches_up
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/replication_test.py
            linear_restarted $<TARGET_FILE:linear> ${LAUNCH})
  set_tests_properties(integration.replication_linear_a_new_server_catches_up
    PROPERTIES TIMEOUT 300)
  # The same with --sync_aggregation and PS_REPLICATE_ROUNDS=1: closed rounds copied.
  add_test(NAME integration.round_copies_linear_finishes_after_a_server_dies
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/replication_test.py
            linear_round_copies $<TARGET_FILE:linear> ${LAUNCH})
  set_tests_properties(integration.round_copies_linear_finishes_after_a_server_dies
    PROPERTIES TIMEOUT 300)
endif()
# A server added to a job running under tracker/launch --job-file F by tracker/launch
# --add-servers 1 --job-file F: it catches up while the pushes go on, both launchers exit 0,
# nothing lost or applied twice, F gone with the job (server_added_by_launcher_test.py).
herdps_server_death_test(server_added_by_the_launcher server_added_by_launcher_test.py
                         launched LAUNCH)
