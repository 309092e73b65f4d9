// A shared object memory_trim_test loads while a release is under way: a load the release must
// notice. It holds nothing the test calls.
extern "C" int edge_daemon_test_loadable_object() {
  return 42;
}
