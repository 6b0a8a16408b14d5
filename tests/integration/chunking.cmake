# The request pipeline end to end. Values longer than the job's chunk size: stored in
# chunks by the optimizer server, sent whole to a handle that refuses chunks
# (tests/integration/chunked_values.cc).
herdps_node_test_app(chunked_values chunked_values.cc)
foreach(server optimizer default)
  add_test(NAME integration.chunked_values_are_exact_with_the_${server}_server
    COMMAND ${Python3_EXECUTABLE} ${LAUNCH} -n 3 -s 3 --timeout 120 --env PS_CHUNK_BYTES=4096
            -- $<TARGET_FILE:chunked_values> --server ${server})
  set_tests_properties(integration.chunked_values_are_exact_with_the_${server}_server
    PROPERTIES TIMEOUT 150)
endforeach()

# Compressed pushes (a codec per key range, chunks included) and fp16 pulls against a
# local reference; garbage frames answered with InvalidArgument.
herdps_node_test_app(compressed_pushes compressed_pushes.cc)
add_test(NAME integration.compressed_pushes_match_a_local_reference_per_codec
  COMMAND ${Python3_EXECUTABLE} ${LAUNCH} -n 1 -s 2 --timeout 120 --env PS_CHUNK_BYTES=4096
          -- $<TARGET_FILE:compressed_pushes>)
set_tests_properties(integration.compressed_pushes_match_a_local_reference_per_codec
  PROPERTIES TIMEOUT 150)
