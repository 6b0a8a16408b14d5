# An app's own update rule registered with OptimizerServer, exact against a local
# replay: each key pushed by one worker (asp), and under synchronous aggregation (bsp).
herdps_node_test_app(update_rule_app update_rule_app.cc)
foreach(variant
    "each_key_by_one_worker;-n;2;-s;2;--;--clocks=25"
    "under_synchronous_aggregation;-n;3;-s;2;--consistency;bsp;--;--sync;--clocks=25")
  herdps_launch_variant(integration.an_apps_update_rule_matches_its_replay_ update_rule_app
    "${variant}")
endforeach()
