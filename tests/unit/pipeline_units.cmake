# Unit tests of the request pipeline's server side: chunks in the shard store
# (internal to the server).
herdps_unit_test(shard_store_chunks_test)
target_include_directories(shard_store_chunks_test PRIVATE ${PROJECT_SOURCE_DIR}/server)
