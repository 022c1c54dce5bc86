// Shared between the version branches of CGPIOD (not part of the public header).
#ifndef BOARDLOOP_CGPIOD_INTERNAL_H
#define BOARDLOOP_CGPIOD_INTERNAL_H
#include "CGPIOD.h"
#include <gpiod.h>

/// A chip handle with a reference count: the caller's handle is one
/// reference, each live request another (under 1.6 the request's lines
/// belong to the chip object, so it must outlive them).
struct bl_gpiod_chip {
    struct gpiod_chip *chip;
    int refs;
    char path[64];
};

void bl_gpiod_set_error(bl_gpiod_error *err, int code, int op, int offset, const char *detail);
void bl_gpiod_copy(char *dst, size_t size, const char *src);
void bl_gpiod_chip_retain(bl_gpiod_chip *chip);
void bl_gpiod_chip_release_ref(bl_gpiod_chip *chip);
/// Checks per-line configs shared by both branches: count, distinct
/// offsets, known enum values, and the combinations no kernel accepts.
int bl_gpiod_validate_configs(const bl_gpiod_line_config *lines, uint32_t n, uint32_t num_chip_lines,
                              bl_gpiod_error *err);
/// Fills err->offset/consumer with the first line of `lines` in use by
/// someone (after an EBUSY); leaves them when none is found.
void bl_gpiod_find_busy_line(bl_gpiod_chip *chip, const bl_gpiod_line_config *lines, uint32_t n,
                             bl_gpiod_error *err);
#endif
