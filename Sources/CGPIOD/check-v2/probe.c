// A probe for the CGPIOD shim, linked against either libgpiod (1.6 from the
// system, or 2.x built from source by check-v2.sh). Without arguments beyond
// the expected branch it checks what can be checked without /dev/gpiochip*:
// the branch, the capabilities, chip scanning, and clean open errors. Given a
// gpio-sim chip and its sysfs directory it also requests lines, writes
// values, reads edge events (sequence numbers on 2.x), a busy error with its
// consumer, an overflow, and a reconfigure, on the real kernel.
// Not part of the Swift build (excluded in Package.swift).
#include "CGPIOD.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

// Writes `text` to a sysfs file; 0 or errno.
static int put(const char *dir, unsigned offset, const char *attr, const char *text) {
    char path[256];
    snprintf(path, sizeof(path), "%s/sim_gpio%u/%s", dir, offset, attr);
    FILE *f = fopen(path, "w");
    if (!f) return errno;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : errno;
}

static int get(const char *dir, unsigned offset) {
    char path[256], buf[8] = {0};
    snprintf(path, sizeof(path), "%s/sim_gpio%u/value", dir, offset);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    if (!fgets(buf, sizeof(buf), f)) buf[0] = '?';
    fclose(f);
    return buf[0] == '1' ? 1 : buf[0] == '0' ? 0 : -1;
}

// Waits for the request fd to be readable and reads what is there.
static int wait_read(bl_gpiod_request *req, bl_gpiod_edge_event *evs, int max, bl_gpiod_read_status *st) {
    struct pollfd p = {.fd = bl_gpiod_request_fd(req), .events = POLLIN};
    int total = 0;
    bl_gpiod_error err;
    while (total < max && poll(&p, 1, 500) == 1) {
        int n = bl_gpiod_request_read_events(req, evs + total, (uint32_t)(max - total), st, &err);
        if (n <= 0) break;
        total += n;
    }
    return total;
}

// With a gpio-sim chip: requests, values, edge events with sequence
// numbers, busy errors, reconfigure and overflow, on a real kernel.
static void sim_checks(const char *chip_path, const char *sysfs_dir) {
    bl_gpiod_error err;
    bl_gpiod_chip *chip = bl_gpiod_chip_open(chip_path, &err);
    CHECK(chip != NULL, "open %s (errno %d)", chip_path, chip ? 0 : err.code);
    if (!chip) return;
    bl_gpiod_chip_info info;
    CHECK(bl_gpiod_chip_get_info(chip, &info, &err) == 0, "chip info: %s [%s] %u lines", info.name, info.label,
          info.num_lines);
    for (unsigned o = 0; o < 3; o++) put(sysfs_dir, o, "pull", "pull-down");
    bl_gpiod_line_config lines[3] = {
        {.offset = 0, .direction = BL_GPIOD_DIRECTION_INPUT, .edge = BL_GPIOD_EDGE_BOTH},
        {.offset = 1, .direction = BL_GPIOD_DIRECTION_INPUT, .edge = BL_GPIOD_EDGE_BOTH},
        {.offset = 2, .direction = BL_GPIOD_DIRECTION_OUTPUT, .output_value = 1},
    };
    bl_gpiod_request *req = bl_gpiod_request_lines(chip, "probe", lines, 3, 0, &err);
    CHECK(req != NULL, "request 0,1 (both edges) and 2 (output 1) (errno %d %s)", req ? 0 : err.code,
          req ? "" : err.detail);
    if (!req) return;
    CHECK(get(sysfs_dir, 2) == 1, "sim_gpio2/value is 1 after the request");
    uint32_t off2 = 2;
    int32_t zero = 0;
    CHECK(bl_gpiod_request_set_values(req, &off2, &zero, 1, &err) == 0 && get(sysfs_dir, 2) == 0,
          "set line 2 to 0: sim_gpio2/value is 0");
    bl_gpiod_line_info li;
    CHECK(bl_gpiod_chip_get_line_info(chip, 0, &li, &err) == 0 && li.used && strcmp(li.consumer, "probe") == 0,
          "line 0 info: used by '%s', edge %d", li.consumer, li.edge);

    put(sysfs_dir, 0, "pull", "pull-up");
    usleep(2000);
    put(sysfs_dir, 1, "pull", "pull-up");
    usleep(2000);
    put(sysfs_dir, 0, "pull", "pull-down");
    usleep(2000);
    bl_gpiod_edge_event evs[64];
    bl_gpiod_read_status st;
    int n = wait_read(req, evs, 64, &st);
    int order_ok = n == 3 && evs[0].offset == 0 && evs[0].edge == BL_GPIOD_EDGE_RISING && evs[1].offset == 1 &&
                   evs[1].edge == BL_GPIOD_EDGE_RISING && evs[2].offset == 0 && evs[2].edge == BL_GPIOD_EDGE_FALLING;
    CHECK(order_ok, "3 edges in order: %d read", n);
    if (n == 3) {
        int seq_ok = bl_gpiod_api_version() == 1
                         ? evs[0].global_seqno == 0
                         : evs[0].global_seqno == 1 && evs[1].global_seqno == 2 && evs[2].global_seqno == 3 &&
                               evs[2].line_seqno == 2;
        CHECK(seq_ok, "sequence numbers %llu/%llu %llu/%llu %llu/%llu", (unsigned long long)evs[0].global_seqno,
              (unsigned long long)evs[0].line_seqno, (unsigned long long)evs[1].global_seqno,
              (unsigned long long)evs[1].line_seqno, (unsigned long long)evs[2].global_seqno,
              (unsigned long long)evs[2].line_seqno);
        CHECK(evs[0].timestamp_ns <= evs[1].timestamp_ns && evs[1].timestamp_ns <= evs[2].timestamp_ns,
              "timestamps in order");
    }
    int32_t vals[3];
    CHECK(bl_gpiod_request_get_values(req, vals, &err) == 0 && vals[0] == 0 && vals[1] == 1 && vals[2] == 0,
          "values 0,1,0");

    bl_gpiod_line_config again = {.offset = 0, .direction = BL_GPIOD_DIRECTION_INPUT};
    bl_gpiod_request *busy = bl_gpiod_request_lines(chip, "other", &again, 1, 0, &err);
    CHECK(busy == NULL && err.code == EBUSY && err.offset == 0 && strcmp(err.consumer, "probe") == 0,
          "a second request of line 0: EBUSY naming consumer '%s'", err.consumer);
    bl_gpiod_request_release(busy);

    // Overflow: more toggles of line 1 than the kernel keeps, unread. 1.6:
    // 16 per line. 2.x: the request's buffer, 16 per line = 48 here, which
    // the kernel's kfifo_alloc rounds up to a power of two: 64.
    int toggles = bl_gpiod_api_version() == 1 ? 41 : 80;
    for (int k = 0; k < toggles; k++) {
        put(sysfs_dir, 1, "pull", k % 2 == 0 ? "pull-down" : "pull-up");
        usleep(1000);
    }
    n = wait_read(req, evs, 64, &st);
    if (bl_gpiod_api_version() == 1) {
        CHECK(n == 16 && st.num_full >= 1, "1.6 overflow: %d kept (FIFO of 16), full FIFO flagged %u", n, st.num_full);
    } else {
        unsigned long long first = n > 0 ? evs[0].global_seqno : 0, last = n > 0 ? evs[n - 1].global_seqno : 0;
        CHECK(n == 64 && last == 3 + (unsigned long long)toggles && last - first + 1 == (unsigned long long)n && first > 4,
              "2.x overflow: %d of %d kept (buffer 48 -> 64), seqnos %llu..%llu: %llu lost shown by the gap", n, toggles,
              first, last, first - 4);
    }

    // Reconfigure: line 2 becomes an input, line 0 stops detecting edges.
    bl_gpiod_line_config re[3] = {
        {.offset = 0, .direction = BL_GPIOD_DIRECTION_INPUT},
        {.offset = 1, .direction = BL_GPIOD_DIRECTION_INPUT, .edge = BL_GPIOD_EDGE_BOTH},
        {.offset = 2, .direction = BL_GPIOD_DIRECTION_INPUT},
    };
    int fd_before = bl_gpiod_request_fd(req);
    memset(&err, 0, sizeof(err));
    CHECK(bl_gpiod_request_reconfigure(req, re, 3, &err) == 0, "reconfigure (errno %d %s)", err.code, err.detail);
    CHECK(bl_gpiod_request_fd(req) == fd_before, "the request fd stays the same over reconfigure");
    CHECK(bl_gpiod_chip_get_line_info(chip, 2, &li, &err) == 0 && li.direction == BL_GPIOD_DIRECTION_INPUT,
          "line 2 is an input now");
    bl_gpiod_request_release(req);
    CHECK(bl_gpiod_chip_get_line_info(chip, 0, &li, &err) == 0 && !li.used, "released: line 0 is free");
    bl_gpiod_chip_close(chip);
}

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
    chip = bl_gpiod_chip_open(argv[0], &err); // this program: a regular file
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
    // probe EXPECTED-BRANCH /dev/gpiochipN /sys/devices/platform/gpio-sim.X/gpiochipN
    if (argc > 3) sim_checks(argv[2], argv[3]);
    printf("%s\n", failures ? "PROBE FAILED" : "PROBE OK");
    return failures ? 1 : 0;
}
