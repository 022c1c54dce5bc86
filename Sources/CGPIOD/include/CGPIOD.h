// CGPIOD: one small C API over libgpiod 1.6 and 2.x (filled by the GPIO issue).
#ifndef BOARDLOOP_CGPIOD_H
#define BOARDLOOP_CGPIOD_H
int bl_gpiod_api_version(void);
#endif
