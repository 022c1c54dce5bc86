#include "CGPIOD.h"
#include <gpiod.h>
#ifdef GPIOD_LINE_BULK_MAX_LINES
int bl_gpiod_api_version(void) { return 1; }
#else
int bl_gpiod_api_version(void) { return 2; }
#endif
