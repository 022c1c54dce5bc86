// CGPIOD: the parts that do not depend on the libgpiod version: chip
// discovery (/dev scanning), opening with clean errnos, reference counts,
// validation and error filling.
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void bl_gpiod_copy(char *dst, size_t size, const char *src) {
    if (size == 0) return;
    if (!src) src = "";
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void bl_gpiod_set_error(bl_gpiod_error *err, int code, int op, int offset, const char *detail) {
    if (!err) return;
    err->code = code;
    err->op = op;
    err->offset = offset;
    err->consumer[0] = '\0';
    bl_gpiod_copy(err->detail, sizeof(err->detail), detail);
}

void bl_gpiod_chip_retain(bl_gpiod_chip *chip) { __atomic_add_fetch(&chip->refs, 1, __ATOMIC_ACQ_REL); }

void bl_gpiod_chip_release_ref(bl_gpiod_chip *chip) {
    if (__atomic_sub_fetch(&chip->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        gpiod_chip_close(chip->chip);
        free(chip);
    }
}

void bl_gpiod_chip_close(bl_gpiod_chip *chip) {
    if (chip) bl_gpiod_chip_release_ref(chip);
}

static int compare_int32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int bl_gpiod_scan_chips(const char *dir, int32_t *numbers, int max, bl_gpiod_error *err) {
    DIR *d = opendir(dir);
    if (!d) {
        bl_gpiod_set_error(err, errno, BL_GPIOD_OP_SCAN, -1, "opendir");
        return -1;
    }
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && count < max) {
        if (strncmp(e->d_name, "gpiochip", 8) != 0) continue;
        const char *digits = e->d_name + 8;
        if (*digits == '\0') continue;
        char *end = NULL;
        long n = strtol(digits, &end, 10);
        if (*end != '\0' || n < 0 || n > 1000000) continue;
        char path[300];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISCHR(st.st_mode)) continue;
        numbers[count++] = (int32_t)n;
    }
    closedir(d);
    qsort(numbers, (size_t)count, sizeof(int32_t), compare_int32);
    return count;
}

bl_gpiod_chip *bl_gpiod_chip_open(const char *path, bl_gpiod_error *err) {
    struct stat st;
    if (stat(path, &st) != 0) {
        bl_gpiod_set_error(err, errno, BL_GPIOD_OP_OPEN, -1, "stat");
        return NULL;
    }
    if (!S_ISCHR(st.st_mode)) {
        bl_gpiod_set_error(err, ENOTTY, BL_GPIOD_OP_OPEN, -1, "not a character device");
        return NULL;
    }
    // Check access first: libgpiod maps some open failures to other errnos.
    if (access(path, R_OK | W_OK) != 0) {
        bl_gpiod_set_error(err, errno, BL_GPIOD_OP_OPEN, -1, "access");
        return NULL;
    }
    errno = 0;
    struct gpiod_chip *c = gpiod_chip_open(path);
    if (!c) {
        bl_gpiod_set_error(err, errno ? errno : ENODEV, BL_GPIOD_OP_OPEN, -1, "gpiod_chip_open");
        return NULL;
    }
    bl_gpiod_chip *chip = calloc(1, sizeof(*chip));
    if (!chip) {
        gpiod_chip_close(c);
        bl_gpiod_set_error(err, ENOMEM, BL_GPIOD_OP_OPEN, -1, "calloc");
        return NULL;
    }
    chip->chip = c;
    chip->refs = 1;
    bl_gpiod_copy(chip->path, sizeof(chip->path), path);
    return chip;
}

int bl_gpiod_validate_configs(const bl_gpiod_line_config *lines, uint32_t n, uint32_t num_chip_lines,
                              bl_gpiod_error *err) {
    if (n == 0 || n > BL_GPIOD_MAX_LINES) {
        bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_REQUEST, -1,
                           n == 0 ? "no lines to request" : "more than 64 lines in one request");
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        const bl_gpiod_line_config *c = &lines[i];
        int off = (int)c->offset;
        if (c->offset >= num_chip_lines) {
            bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_REQUEST, off, "offset beyond the chip's lines");
            return -1;
        }
        for (uint32_t j = 0; j < i; j++) {
            if (lines[j].offset == c->offset) {
                bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_REQUEST, off, "offset requested twice");
                return -1;
            }
        }
        if (c->direction != BL_GPIOD_DIRECTION_INPUT && c->direction != BL_GPIOD_DIRECTION_OUTPUT) {
            bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_REQUEST, off, "unknown direction");
            return -1;
        }
        if (c->edge < BL_GPIOD_EDGE_NONE || c->edge > BL_GPIOD_EDGE_BOTH || c->bias < BL_GPIOD_BIAS_AS_IS ||
            c->bias > BL_GPIOD_BIAS_PULL_DOWN || c->drive < BL_GPIOD_DRIVE_PUSH_PULL ||
            c->drive > BL_GPIOD_DRIVE_OPEN_SOURCE) {
            bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_REQUEST, off, "unknown edge, bias or drive value");
            return -1;
        }
        if (c->direction == BL_GPIOD_DIRECTION_OUTPUT && c->edge != BL_GPIOD_EDGE_NONE) {
            bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_REQUEST, off, "edge detection on an output");
            return -1;
        }
        if (c->direction == BL_GPIOD_DIRECTION_OUTPUT && c->debounce_us != 0) {
            bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_REQUEST, off, "debounce on an output");
            return -1;
        }
        if (c->direction == BL_GPIOD_DIRECTION_INPUT && c->drive != BL_GPIOD_DRIVE_PUSH_PULL) {
            bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_REQUEST, off, "open-drain/open-source drive on an input");
            return -1;
        }
    }
    return 0;
}

void bl_gpiod_find_busy_line(bl_gpiod_chip *chip, const bl_gpiod_line_config *lines, uint32_t n,
                             bl_gpiod_error *err) {
    if (!err) return;
    for (uint32_t i = 0; i < n; i++) {
        bl_gpiod_line_info info;
        bl_gpiod_error ignored;
        if (bl_gpiod_chip_get_line_info(chip, lines[i].offset, &info, &ignored) != 0) continue;
        if (info.used) {
            err->offset = (int32_t)lines[i].offset;
            bl_gpiod_copy(err->consumer, sizeof(err->consumer), info.consumer);
            return;
        }
    }
}
