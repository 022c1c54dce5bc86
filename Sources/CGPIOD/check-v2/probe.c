// A probe for the CGPIOD shim that runs without GPIO hardware: it is linked
// against either libgpiod (1.6 from the system, or 2.x built from source by
// check-v2.sh) and checks what can be checked without /dev/gpiochip*: the
// branch, the capabilities, chip scanning, and clean open errors.
// Not part of the Swift build (excluded in Package.swift).
#include "CGPIOD.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                                                                         \
    do {                                                                                                         \
        if (cond) {                                                                                              \
            printf("ok    ");                                                                                    \
        } else {                                                                                                 \
            printf("FAIL  ");                                                                                    \
            failures++;                                                                                          \
        }                                                                                                        \
        printf(__VA_ARGS__);                                                                                     \
        printf("\n");                                                                                            \
    } while (0)

int main(int argc, char **argv) {
    int expect = argc > 1 ? argv[1][0] - '0' : 0;
    int v = bl_gpiod_api_version();
    printf("branch %d, libgpiod %s, capabilities 0x%x\n", v, bl_gpiod_library_version(), bl_gpiod_capabilities());
    if (expect) CHECK(v == expect, "compiled branch is %d", expect);
    CHECK(v != 2 || (bl_gpiod_capabilities() & BL_GPIOD_CAP_SEQNO), "2.x reports sequence numbers");
    CHECK(v != 1 || bl_gpiod_capabilities() == 0, "1.x reports no v2-only capability");
    CHECK(strlen(bl_gpiod_library_version()) > 0, "library version string");

    bl_gpiod_error err;
    int32_t numbers[8];
    int n = bl_gpiod_scan_chips("/nonexistent-dir", numbers, 8, &err);
    CHECK(n == -1 && err.code == ENOENT && err.op == BL_GPIOD_OP_SCAN, "scan of a missing dir: ENOENT");
    n = bl_gpiod_scan_chips("/dev", numbers, 8, &err);
    CHECK(n >= 0, "scan of /dev: %d chip(s)", n);

    bl_gpiod_chip *chip = bl_gpiod_chip_open("/dev/gpiochip-does-not-exist", &err);
    CHECK(chip == NULL && err.code == ENOENT && err.op == BL_GPIOD_OP_OPEN, "open of a missing chip: ENOENT");
    chip = bl_gpiod_chip_open("/dev/null", &err);
    CHECK(chip == NULL && err.code != 0, "open of /dev/null fails (errno %d: %s)", err.code, err.detail);
    chip = bl_gpiod_chip_open("/etc/hostname", &err);
    CHECK(chip == NULL && err.code == ENOTTY, "open of a regular file: ENOTTY");
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/dev/gpiochip%d", numbers[i]);
        chip = bl_gpiod_chip_open(path, &err);
        bl_gpiod_chip_info info;
        if (chip && bl_gpiod_chip_get_info(chip, &info, &err) == 0)
            printf("      %s: %s [%s] %u lines\n", path, info.name, info.label, info.num_lines);
        bl_gpiod_chip_close(chip);
    }
    printf("%s\n", failures ? "PROBE FAILED" : "PROBE OK");
    return failures ? 1 : 0;
}
