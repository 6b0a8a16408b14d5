# The van's shared-memory path in real jobs (docs/architecture.md, "Shared memory"):
# push/pull of 128 KiB to 3 MiB values is exact with PS_SHM=1 and the nodes' vans show
# frames through shared memory; a push split by server, and a push of an app's vectors
# to one server, is written straight into lent ring blocks, except with resend, and a
# pull's lent parts, and a pull of one run of keys (sent as a key frame), check answers
# that carry keys by their hash (split over servers, one run's parts, sent as bitmaps,
# by their bitmap); with PS_SHM=0 none; over ipc; with resend and injected
# drops (resends get new ring blocks, duplicates are dropped); an idle node, and one
# that enters a barrier after traffic, gives its rings' free pages and malloc's kept
# memory back (PS_IDLE_TRIM_MS). shm_test.py: a worker
# SIGKILLed while its ring is in use leaves nothing mapped in the survivors and no
# shared-memory segment behind.
herdps_node_test_app(shm_app shm_app.cc)

foreach(variant IN ITEMS
    "exact_and_through_shared_memory;-n;2;-s;1;--env;PS_SHM=1;--;--expect_shm=1"
    "exact_with_split_pushes_written_in_lent_ring_blocks;-n;2;-s;2;--;--expect_shm=1;--expect_lent=1"
    "exact_with_one_run_split_over_three_servers;-n;2;-s;3;--;--expect_shm=1;--expect_lent=1"
    "exact_with_lent_pull_parts_answered_with_copied_keys;-n;2;-s;2;--;--expect_lent=1;--answer_keys=copy"
    "failing_a_lent_pull_part_answered_with_other_keys;-n;2;-s;2;--;--expect_lent=1;--answer_keys=wrong"
    "exact_with_one_servers_pushes_from_vectors_written_in_lent_ring_blocks;-n;2;-s;1;--;--expect_shm=1;--expect_lent=1"
    "exact_with_one_servers_pulls_of_a_key_run_answered_with_copied_keys;-n;2;-s;1;--;--expect_lent=1;--answer_keys=copy"
    "failing_a_one_server_pull_of_a_key_run_answered_with_other_keys;-n;2;-s;1;--;--expect_lent=1;--answer_keys=wrong"
    "exact_and_on_the_sockets_with_shm_off;-n;2;-s;1;--env;PS_SHM=0;--;--expect_shm=0;--expect_lent=0"
    "exact_and_through_shared_memory_over_ipc;-n;2;-s;1;--transport;ipc;--;--expect_shm=1"
    "exact_with_a_small_ring_that_fills;-n;2;-s;1;--env;PS_SHM_BYTES=4194304;--;--expect_shm=1"
    "exact_with_resend_at_drop_rate_0.05;-n;2;-s;2;--env;PS_RESEND=1;--env;PS_DROP_RATE=0.05;--env;PS_RESEND_TIMEOUT=100;--;--expect_shm=1;--expect_lent=0"
    "then_idle_memory_goes_back;-n;1;-s;1;--env;PS_IDLE_TRIM_MS=250;--;--mode=idle;--expect_shm=1;--expect_release=1"
    "then_idle_memory_stays_with_idle_trim_off;-n;1;-s;1;--env;PS_IDLE_TRIM_MS=0;--;--mode=idle;--expect_shm=1;--expect_release=0"
    "then_a_barrier_gives_memory_back;-n;1;-s;1;--;--mode=barrier;--expect_shm=1;--expect_release=1"
    "then_a_barrier_keeps_memory_with_idle_trim_off;-n;1;-s;1;--env;PS_IDLE_TRIM_MS=0;--;--mode=barrier;--expect_shm=1;--expect_release=0")
  herdps_launch_variant(integration.shm_push_pull_ shm_app "${variant}")
endforeach()

foreach(behaviour IN ITEMS killed_worker_leaves_no_ring_mapped_and_no_segment
                           killed_server_ends_the_job_and_leaves_no_segment)
  add_test(NAME integration.shm_${behaviour}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/shm_test.py ${behaviour}
            ${LAUNCH} $<TARGET_FILE:shm_app>)
  set_tests_properties(integration.shm_${behaviour} PROPERTIES TIMEOUT 120)
endforeach()
