# Example orders (docs/orders.md): workers run OrderClients and check every order they get
# against the one they compute themselves (order_plugin_app.cc); with cdgrab through the
# scheduler's order plugin, also when a worker stops early (finishes, leaves or is killed;
# nodes started by hand).
herdps_node_test_app(order_plugin_app order_plugin_app.cc)

herdps_launch_test(integration.orders_cdgrab_4_workers_match_the_balancer_over_3_epochs
  4 2 order_plugin_app --algorithm cdgrab --epochs 3)
herdps_launch_test(integration.orders_cdgrab_odd_n_projected_small_batches_match_the_balancer
  4 1 order_plugin_app --algorithm cdgrab --epochs 3 --examples 63 --dim 40 --projection 8
  --batch_pairs 5)
# The same orders from sparse reports (OrderClient::ReportSparse) as from dense ones.
herdps_launch_test(integration.orders_cdgrab_sparse_reports_match_the_balancer
  3 1 order_plugin_app --algorithm cdgrab --epochs 3 --sparse --dim 24 --batch_pairs 5)
herdps_launch_test(integration.orders_idgrab_projected_sparse_reports_match_the_local_reference
  2 1 order_plugin_app --algorithm idgrab --epochs 3 --sparse --dim 40 --projection 8)
foreach(algorithm rr idgrab fixed)
  herdps_launch_test(integration.orders_${algorithm}_match_the_local_reference
    2 1 order_plugin_app --algorithm ${algorithm} --epochs 3)
endforeach()

foreach(how finish finalize kill)
  add_test(NAME integration.orders_cdgrab_go_on_when_a_worker_stops_early_${how}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/order_leave_test.py ${how}
            $<TARGET_FILE:order_plugin_app>)
  set_tests_properties(integration.orders_cdgrab_go_on_when_a_worker_stops_early_${how}
    PROPERTIES TIMEOUT 120)
endforeach()
