/* Stands in for libcuxfer.so in the launcher tests: honours the launcher's
 * contract (CUXFER_OUTPUT_DIR, CUXFER_TRACE_NAME, CUXFER_MANIFEST) and writes,
 * instead of a trace, the CUXFER_* environment it was given. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char** environ;

/* The build stamp `cuxfer record` checks before preloading (shim/build_stamp.cpp):
 * this build's, or FAKE_SHIM_BUILD_ID for the stand-in of another build's shim. */
#include <cuxfer/build_info.h>
#ifndef FAKE_SHIM_BUILD_ID
#define FAKE_SHIM_BUILD_ID CUXFER_BUILD_ID
#endif
__attribute__((used, retain, section(".cuxfer_build"))) const char fake_shim_stamp[] = "cuxfer-build-id=" FAKE_SHIM_BUILD_ID;

__attribute__((constructor)) static void fake_shim_start(void) {
  const char* dir = getenv("CUXFER_OUTPUT_DIR");
  const char* manifest = getenv("CUXFER_MANIFEST");
  if (!dir || !manifest) return;
  char exe[PATH_MAX] = "";
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) exe[n] = '\0';
  const char* name = getenv("CUXFER_TRACE_NAME");
  if (!name) {
    const char* slash = strrchr(exe, '/');
    name = slash ? slash + 1 : exe;
  }
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/cuxfer-%s-%d.trace", dir, name, (int)getpid());
  FILE* f = fopen(path, "w");
  if (!f) return;
  for (char** e = environ; *e; ++e)
    if (strncmp(*e, "CUXFER_", 7) == 0 || strncmp(*e, "LD_PRELOAD=", 11) == 0) fprintf(f, "%s\n", *e);
  fclose(f);
  char line[PATH_MAX + 32];
  int len = snprintf(line, sizeof line, "%d %s\n", (int)getpid(), path);
  int fd = open(manifest, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd >= 0) {
    if (write(fd, line, (size_t)len) < 0) perror("fake shim");
    close(fd);
  }
}
