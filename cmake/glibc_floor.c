// Linked into the portable build's programs only (cmake/Linking.cmake).
//
// Debian 12's libstdc++.a was compiled against glibc 2.36 and calls
// arc4random from std::random_device; linking it statically would make the
// program need GLIBC_2.36 for a function cuxfer never reaches. This local
// definition satisfies the reference, so the glibc a program needs is the
// one its own calls need (docs/install.md gives the floor).
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>

uint32_t arc4random(void) {
  uint32_t v = 0;
  unsigned char* p = (unsigned char*)&v;
  size_t got = 0;
  while (got < sizeof v) {
    ssize_t n = getrandom(p + got, sizeof v - got, 0);
    if (n > 0)
      got += (size_t)n;
    else if (n < 0 && errno != EINTR)
      break;  // no entropy to be had: never reached by cuxfer anyway
  }
  return v;
}
