# The request pipeline end to end. Values longer than the job's chunk size: stored in
# chunks by the optimizer server, sent whole to a handle that takes whole values only
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

# Chunk support is agreed once per server app (tests/integration/chunk_agreement_app.cc):
# an app one of whose servers takes whole values only gets every value whole, exactly
# once, next to an app that takes chunks; also when that server sets its app up late;
# a chunk refused after the agreement fails its request without a whole resend; and a
# question no server can answer fails only the requests that would chunk.
herdps_node_test_app(chunk_agreement_app chunk_agreement_app.cc)
foreach(variant IN ITEMS
    "mixed_servers_of_one_app_get_whole_values_exactly_once;-n;2;-s;2;--env;PS_CHUNK_BYTES=4096;--;--scenario=mixed"
    "a_server_app_set_up_late_is_asked_before_any_chunk_goes;-n;2;-s;2;--env;PS_CHUNK_BYTES=4096;--;--scenario=mixed;--late_server_ms=3000"
    "a_chunk_refused_later_fails_its_request_without_a_whole_resend;-n;1;-s;2;--env;PS_CHUNK_BYTES=4096;--;--scenario=replaced"
    "an_app_no_server_runs_fails_what_would_chunk_and_sends_the_rest;-n;1;-s;2;--env;PS_CHUNK_BYTES=4096;--;--scenario=missing")
  herdps_launch_variant(integration.chunk_agreement_ chunk_agreement_app "${variant}")
endforeach()

# Keys on the wire (tests/integration/key_lists_app.cc): key frames, key lists kept by
# the servers and sent as ids, servers that keep almost nothing (every list sent again
# with its keys), and both switched off; exact every time.
herdps_node_test_app(key_lists_app key_lists_app.cc)
foreach(variant IN ITEMS
    "encoded_and_cached_lists_land_exactly;-n;3;-s;2;--;--expect=cached"
    "lists_a_server_did_not_keep_are_sent_again_exactly_once;-n;2;-s;2;--;--expect=resent;--server_cache_bytes=2048"
    "raw_keys_when_both_are_switched_off;-n;2;-s;2;--env;PS_KEY_ENCODING=0;--env;PS_KEY_CACHE_BYTES=0;--;--expect=raw")
  herdps_launch_variant(integration.key_lists_ key_lists_app "${variant}")
endforeach()
