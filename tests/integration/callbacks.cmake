# A callback that throws ends its request all the same, and Wait says so
# (tests/integration/callback_throw_app.cc): with a waiting thread receiving the answers
# (PS_RECEIVE_IN_WAIT on) and with the receive thread receiving them all.
herdps_node_test_app(callback_throw_app callback_throw_app.cc)

foreach(variant IN ITEMS
    "a_waiting_thread_receives;-n;1;-s;1;--env;PS_REQUEST_TIMEOUT=2;--;--expect_in_wait=1"
    "the_receive_thread_receives;-n;1;-s;1;--env;PS_REQUEST_TIMEOUT=2;--env;PS_RECEIVE_IN_WAIT=0;--;--expect_in_wait=0")
  herdps_launch_variant(integration.a_throwing_callback_still_ends_its_request_when_
    callback_throw_app "${variant}")
endforeach()
