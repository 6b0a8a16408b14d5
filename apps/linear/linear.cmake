# The linear app, included from apps/CMakeLists.txt (not a subdirectory: the binary
# must be <build>/apps/linear, which a build subdirectory of that name would block).
#
# herdps_linear_data: data loading, splitting, scaling, metrics and logistic-regression
# arithmetic for the linear app. Plain C++17, no HerdPS dependency, so it is testable alone.
set(LINEAR_DIR ${CMAKE_CURRENT_LIST_DIR})
add_library(herdps_linear_data STATIC
  ${LINEAR_DIR}/dataset.cc
  ${LINEAR_DIR}/line_reader.cc
  ${LINEAR_DIR}/field_parse.cc
  ${LINEAR_DIR}/csv_reader.cc
  ${LINEAR_DIR}/libsvm_reader.cc
  ${LINEAR_DIR}/split.cc
  ${LINEAR_DIR}/partition.cc
  ${LINEAR_DIR}/standardizer.cc
  ${LINEAR_DIR}/metrics.cc
  ${LINEAR_DIR}/logistic.cc)
target_include_directories(herdps_linear_data PUBLIC ${LINEAR_DIR})

# The app's training side (flags, loader, worker loop, clocks, stragglers, example orders), shared by the app and by
# linear_newton_reference.
add_library(herdps_linear_training STATIC ${LINEAR_DIR}/trainer.cc
  ${LINEAR_DIR}/training_options.cc ${LINEAR_DIR}/clock_pacer.cc ${LINEAR_DIR}/straggler.cc
  ${LINEAR_DIR}/step_order.cc ${LINEAR_DIR}/early_stop.cc)
target_include_directories(herdps_linear_training PUBLIC ${LINEAR_DIR})
target_link_libraries(herdps_linear_training PUBLIC herdps_linear_data HerdPS::ps gflags)
target_compile_definitions(herdps_linear_training PRIVATE
  HERDPS_LINEAR_DEFAULT_DATA="${LINEAR_DIR}/data/hmda.csv")

herdps_app(linear ${LINEAR_DIR}/linear.cc)
target_link_libraries(linear PRIVATE herdps_linear_training)

# The exact optimum of the app's objective by Newton's method, for the experiments
# (tracker/orders) and the tests that compare a trained model with it.
herdps_app(linear_newton_reference ${LINEAR_DIR}/newton_reference.cc)
target_link_libraries(linear_newton_reference PRIVATE herdps_linear_training)
