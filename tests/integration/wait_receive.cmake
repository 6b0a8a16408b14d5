# A waiting worker thread receiving the data channel itself (PS_RECEIVE_IN_WAIT,
# Van::ReceiveWhileWaiting) in real jobs: waited requests, callbacks nobody waits for,
# four threads of one worker waiting at once and callbacks interleaved with waits are all exact, with
# it on (answers are received by waiting threads) and off (none are); also over ipc and
# with resend and injected drops.
herdps_node_test_app(wait_receive_app wait_receive_app.cc)

foreach(variant IN ITEMS
    "exact_with_waiters_receiving;-n;2;-s;2;--;--expect_in_wait=1"
    "exact_with_receive_in_wait_off;-n;2;-s;2;--env;PS_RECEIVE_IN_WAIT=0;--;--expect_in_wait=0"
    "exact_over_ipc;-n;2;-s;1;--transport;ipc;--;--expect_in_wait=1"
    "exact_with_resend_at_drop_rate_0.05;-n;2;-s;2;--env;PS_RESEND=1;--env;PS_DROP_RATE=0.05;--env;PS_RESEND_TIMEOUT=100;--;--rounds=100;--expect_in_wait=1")
  herdps_launch_variant(integration.wait_receive_ wait_receive_app "${variant}")
endforeach()
