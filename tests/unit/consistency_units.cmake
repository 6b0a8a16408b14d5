# Unit tests of the consistency pieces: the model and PS_CONSISTENCY, the scheduler's
# clock coordinator (internal to the runtime), and the server's rounds keyed by clock
# (internal to the server).
herdps_unit_test(consistency_test)
herdps_unit_test(clock_coordinator_test)
target_include_directories(clock_coordinator_test PRIVATE ${PROJECT_SOURCE_DIR}/ps/services)
herdps_unit_test(shard_store_rounds_test)
target_include_directories(shard_store_rounds_test PRIVATE ${PROJECT_SOURCE_DIR}/server)
herdps_unit_test(round_copies_test)
target_include_directories(round_copies_test PRIVATE ${PROJECT_SOURCE_DIR}/server)
