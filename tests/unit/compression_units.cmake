# Gradient compression: the codec frame format and its validating decoder
# (ps/internal/codec_frame.h), the encoders with error feedback, CodecSpec and
# ResidualStore (ps/compressor.h). Registered as herdps_unit_test does, with the suite in
# the prefix (unit.compression.<Suite>.<Test>), so that `ctest -R compression` runs them.
add_executable(compression_test compression_test.cc)
target_link_libraries(compression_test PRIVATE HerdPS::ps GTest::gtest_main)
gtest_discover_tests(compression_test TEST_PREFIX "unit.compression." DISCOVERY_TIMEOUT 60)
