/*
 * react-ref: the reaction "an edge on an input toggles an output", written
 * directly against libgpiod (1.6 or 2.x) with poll(2) — the limit boardd's
 * reaction latency is compared with in the gpio-sim guest
 * (tests-guest/scenarios/20-reaction-latency.sh).
 *
 * Requests INPUT (both edges, pull-up, active-low) and OUTPUT (off) on the
 * chip labelled LABEL, then for each edge event sets the output to the
 * opposite of its last value and records the time from the event's kernel
 * timestamp (CLOCK_MONOTONIC) to the return of the set-value call: what
 * boardd's "trigger to actions done" figure measures. After COUNT edges it
 * prints one line:
 *   react-ref: COUNT edges, trigger to actions done p50 Xus p99 Yus max Zus
 *
 * usage: react-ref LABEL INPUT OUTPUT COUNT
 * Build: cc -O2 react-ref.c $(pkg-config --cflags --libs libgpiod) \
 *        -DREF_LIBGPIOD_MAJOR=$(pkg-config --modversion libgpiod | cut -d. -f1)
 */
#include <gpiod.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Percentiles as boardd's histogram gives them, so the two compare like for
 * like: log-linear buckets, 8 per power of two; a percentile is the upper
 * bound of the bucket holding the ceil(n * fraction)-th value, at most the
 * maximum. */
static uint64_t bucket_upper(uint64_t ns)
{
    if (ns < 8)
        return ns;
    int exp = 63 - __builtin_clzll(ns);
    uint64_t sub = (ns >> (exp - 3)) & 7;
    return ((8 + sub + 1) << (exp - 3)) - 1;
}

static double percentile_us(const uint64_t *sorted, int n, double fraction)
{
    int rank = (int)(n * fraction + 0.999999);
    if (rank < 1)
        rank = 1;
    uint64_t v = bucket_upper(sorted[rank - 1]);
    return (v < sorted[n - 1] ? v : sorted[n - 1]) / 1000.0;
}

static void report(uint64_t *samples, int n)
{
    qsort(samples, (size_t)n, sizeof *samples, cmp_u64);
    printf("react-ref: %d edges, trigger to actions done p50 %.1fus p99 %.1fus max %.1fus\n", n,
           percentile_us(samples, n, 0.5), percentile_us(samples, n, 0.99), samples[n - 1] / 1000.0);
    fflush(stdout);
}

/* The two libgpiod APIs behind four calls: open_lines requests INPUT (both
 * edges, pull-up, active-low) and OUTPUT (off) and returns the fd to poll;
 * read_edges reads up to MAX waiting events' kernel timestamps; set_output
 * writes the output; close_lines releases both. */

#if REF_LIBGPIOD_MAJOR >= 2

static struct gpiod_chip *chip;
static struct gpiod_line_request *req;
static struct gpiod_edge_event_buffer *buf;
static unsigned int out_offset;
static const char *api_version(void) { return gpiod_api_version(); }

/* libgpiod 2.x has no lookup by label: try /dev/gpiochip* in turn. */
static struct gpiod_chip *open_by_label(const char *label)
{
    char path[64];
    for (int i = 0; i < 64; i++) {
        snprintf(path, sizeof path, "/dev/gpiochip%d", i);
        struct gpiod_chip *c = gpiod_chip_open(path);
        if (!c)
            continue;
        struct gpiod_chip_info *info = gpiod_chip_get_info(c);
        int match = info && strcmp(gpiod_chip_info_get_label(info), label) == 0;
        if (info)
            gpiod_chip_info_free(info);
        if (match)
            return c;
        gpiod_chip_close(c);
    }
    return NULL;
}

static int open_lines(const char *label, unsigned int in, unsigned int out)
{
    out_offset = out;
    if (!(chip = open_by_label(label)))
        return -1;
    struct gpiod_line_settings *is = gpiod_line_settings_new(), *os = gpiod_line_settings_new();
    gpiod_line_settings_set_direction(is, GPIOD_LINE_DIRECTION_INPUT);
    gpiod_line_settings_set_edge_detection(is, GPIOD_LINE_EDGE_BOTH);
    gpiod_line_settings_set_bias(is, GPIOD_LINE_BIAS_PULL_UP);
    gpiod_line_settings_set_active_low(is, true);
    gpiod_line_settings_set_direction(os, GPIOD_LINE_DIRECTION_OUTPUT);
    gpiod_line_settings_set_output_value(os, GPIOD_LINE_VALUE_INACTIVE);
    struct gpiod_line_config *lc = gpiod_line_config_new();
    struct gpiod_request_config *rc = gpiod_request_config_new();
    gpiod_request_config_set_consumer(rc, "react-ref");
    if (gpiod_line_config_add_line_settings(lc, &in, 1, is) || gpiod_line_config_add_line_settings(lc, &out, 1, os))
        return -1;
    if (!(req = gpiod_chip_request_lines(chip, rc, lc)))
        return -1;
    buf = gpiod_edge_event_buffer_new(16);
    return gpiod_line_request_get_fd(req);
}

static int read_edges(uint64_t *ts, int max)
{
    int got = gpiod_line_request_read_edge_events(req, buf, (size_t)max);
    for (int k = 0; k < got; k++)
        ts[k] = gpiod_edge_event_get_timestamp_ns(gpiod_edge_event_buffer_get_event(buf, (unsigned long)k));
    return got;
}

static void set_output(int level)
{
    gpiod_line_request_set_value(req, out_offset, level ? GPIOD_LINE_VALUE_ACTIVE : GPIOD_LINE_VALUE_INACTIVE);
}

static void close_lines(void)
{
    gpiod_line_request_release(req);
    gpiod_chip_close(chip);
}

#else /* libgpiod 1.6 */

static struct gpiod_chip *chip;
static struct gpiod_line *in_line, *out_line;
static const char *api_version(void) { return gpiod_version_string(); }

static int open_lines(const char *label, unsigned int in, unsigned int out)
{
    if (!(chip = gpiod_chip_open_by_label(label)))
        return -1;
    in_line = gpiod_chip_get_line(chip, in);
    out_line = gpiod_chip_get_line(chip, out);
    if (!in_line || !out_line
        || gpiod_line_request_both_edges_events_flags(
               in_line, "react-ref", GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP | GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW)
        || gpiod_line_request_output(out_line, "react-ref", 0))
        return -1;
    return gpiod_line_event_get_fd(in_line);
}

static int read_edges(uint64_t *ts, int max)
{
    struct gpiod_line_event events[16];
    int got = gpiod_line_event_read_fd_multiple(gpiod_line_event_get_fd(in_line), events, max < 16 ? max : 16);
    for (int k = 0; k < got; k++)
        ts[k] = (uint64_t)events[k].ts.tv_sec * 1000000000u + (uint64_t)events[k].ts.tv_nsec;
    return got;
}

static void set_output(int level) { gpiod_line_set_value(out_line, level); }

static void close_lines(void)
{
    gpiod_line_release(in_line);
    gpiod_line_release(out_line);
    gpiod_chip_close(chip);
}

#endif

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: react-ref LABEL INPUT OUTPUT COUNT\n");
        return 2;
    }
    int count = atoi(argv[4]);
    int fd = open_lines(argv[1], (unsigned int)atoi(argv[2]), (unsigned int)atoi(argv[3]));
    if (fd < 0 || count < 1) {
        perror("react-ref: request");
        return 1;
    }
    uint64_t *samples = calloc((size_t)count, sizeof *samples), ts[16];
    int n = 0, level = 0;
    printf("react-ref: ready (libgpiod %s)\n", api_version());
    fflush(stdout);
    struct pollfd p = { .fd = fd, .events = POLLIN };
    while (n < count) {
        if (poll(&p, 1, 30000) <= 0) {
            fprintf(stderr, "react-ref: no edge within 30 s (%d of %d)\n", n, count);
            return 1;
        }
        int got = read_edges(ts, 16);
        for (int k = 0; k < got && n < count; k++) {
            level = !level;
            set_output(level);
            uint64_t done = now_ns();
            samples[n++] = done > ts[k] ? done - ts[k] : 0;
        }
    }
    report(samples, n);
    close_lines();
    return 0;
}
