// The entry of a driver-API app built as a library for driver_launcher.cpp:
// the app's main, compiled as testapp_body_main (-Dmain=testapp_body_main),
// under a name the launcher can look up without C++ mangling.
int testapp_body_main(int argc, char** argv);

extern "C" __attribute__((visibility("default"))) int testapp_body_main_c(int argc, char** argv) {
  return testapp_body_main(argc, argv);
}
