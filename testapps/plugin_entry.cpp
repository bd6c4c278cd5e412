// The entry of a test app built as a plugin (testapps/CMakeLists.txt): its
// main() compiled as cuxfer_plugin_main, called by plugin_host.cpp through
// this unmangled, exported name.
int cuxfer_plugin_main(int argc, char** argv);

extern "C" __attribute__((visibility("default"))) int plugin_main(int argc, char** argv) {
  return cuxfer_plugin_main(argc, argv);
}
