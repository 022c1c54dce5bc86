// The system's libgpiod, found through pkg-config (libgpiod.pc from
// libgpiod-dev). CGPIOD includes <gpiod.h> itself; this module exists so
// the compiler and linker flags come from pkg-config.
#include <gpiod.h>
