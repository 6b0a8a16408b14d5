# Unit tests of the control plane's pieces that the integration tests only reach end to
# end: request tracking in Customer, the membership snapshot, scheduler plugin
# registration. (Config and meta codec additions live in config_test / meta_codec_test.)
herdps_unit_test(customer_test)
herdps_unit_test(membership_test)
herdps_unit_test(scheduler_plugin_test)
