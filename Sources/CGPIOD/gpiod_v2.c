// CGPIOD, libgpiod 2.x branch (Debian 13 / Pi OS trixie): line settings →
// line config → request config → one request with one fd, on the kernel's
// v2 uAPI. Compiled only when the header is not a 1.x header.
//
// On a Debian 12 machine this branch is built against libgpiod 2.x from
// scripts/libgpiod2.sh (see docs/gpio.md, "Building against libgpiod 2.x").
#include "internal.h"

#ifndef GPIOD_LINE_BULK_MAX_LINES

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct bl_gpiod_request {
    bl_gpiod_chip *chip;
    struct gpiod_line_request *request;
    struct gpiod_edge_event_buffer *buffer;
    uint32_t buffer_capacity;
    uint32_t num_lines;
    unsigned int offsets[BL_GPIOD_MAX_LINES];
    bl_gpiod_line_config lines[BL_GPIOD_MAX_LINES];
    int has_events;
};

int bl_gpiod_api_version(void) { return 2; }
const char *bl_gpiod_library_version(void) { return gpiod_api_version(); }
uint32_t bl_gpiod_capabilities(void) {
    return BL_GPIOD_CAP_SEQNO | BL_GPIOD_CAP_DEBOUNCE | BL_GPIOD_CAP_INFO_EDGE | BL_GPIOD_CAP_ATOMIC_RECONFIGURE |
           BL_GPIOD_CAP_EVENT_BUFFER_SIZE;
}

int bl_gpiod_chip_get_info(bl_gpiod_chip *chip, bl_gpiod_chip_info *info, bl_gpiod_error *err) {
    memset(info, 0, sizeof(*info));
    struct gpiod_chip_info *ci = gpiod_chip_get_info(chip->chip);
    if (!ci) {
        bl_gpiod_set_error(err, errno, BL_GPIOD_OP_INFO, -1, "gpiod_chip_get_info");
        return -1;
    }
    bl_gpiod_copy(info->name, sizeof(info->name), gpiod_chip_info_get_name(ci));
    bl_gpiod_copy(info->label, sizeof(info->label), gpiod_chip_info_get_label(ci));
    info->num_lines = (uint32_t)gpiod_chip_info_get_num_lines(ci);
    gpiod_chip_info_free(ci);
    return 0;
}

int bl_gpiod_chip_get_line_info(bl_gpiod_chip *chip, uint32_t offset, bl_gpiod_line_info *info,
                                bl_gpiod_error *err) {
    memset(info, 0, sizeof(*info));
    struct gpiod_line_info *li = gpiod_chip_get_line_info(chip->chip, offset);
    if (!li) {
        bl_gpiod_set_error(err, errno, BL_GPIOD_OP_LINE_INFO, (int)offset, "gpiod_chip_get_line_info");
        return -1;
    }
    info->offset = offset;
    info->direction = gpiod_line_info_get_direction(li) == GPIOD_LINE_DIRECTION_OUTPUT ? BL_GPIOD_DIRECTION_OUTPUT
                                                                                      : BL_GPIOD_DIRECTION_INPUT;
    switch (gpiod_line_info_get_edge_detection(li)) {
    case GPIOD_LINE_EDGE_RISING: info->edge = BL_GPIOD_EDGE_RISING; break;
    case GPIOD_LINE_EDGE_FALLING: info->edge = BL_GPIOD_EDGE_FALLING; break;
    case GPIOD_LINE_EDGE_BOTH: info->edge = BL_GPIOD_EDGE_BOTH; break;
    default: info->edge = BL_GPIOD_EDGE_NONE; break;
    }
    switch (gpiod_line_info_get_bias(li)) {
    case GPIOD_LINE_BIAS_DISABLED: info->bias = BL_GPIOD_BIAS_DISABLED; break;
    case GPIOD_LINE_BIAS_PULL_UP: info->bias = BL_GPIOD_BIAS_PULL_UP; break;
    case GPIOD_LINE_BIAS_PULL_DOWN: info->bias = BL_GPIOD_BIAS_PULL_DOWN; break;
    default: info->bias = BL_GPIOD_BIAS_AS_IS; break;
    }
    switch (gpiod_line_info_get_drive(li)) {
    case GPIOD_LINE_DRIVE_OPEN_DRAIN: info->drive = BL_GPIOD_DRIVE_OPEN_DRAIN; break;
    case GPIOD_LINE_DRIVE_OPEN_SOURCE: info->drive = BL_GPIOD_DRIVE_OPEN_SOURCE; break;
    default: info->drive = BL_GPIOD_DRIVE_PUSH_PULL; break;
    }
    info->active_low = gpiod_line_info_is_active_low(li);
    info->used = gpiod_line_info_is_used(li);
    info->debounce_us = (uint32_t)gpiod_line_info_get_debounce_period_us(li);
    bl_gpiod_copy(info->name, sizeof(info->name), gpiod_line_info_get_name(li));
    bl_gpiod_copy(info->consumer, sizeof(info->consumer), gpiod_line_info_get_consumer(li));
    switch (gpiod_line_info_get_event_clock(li)) {
    case GPIOD_LINE_CLOCK_REALTIME: info->event_clock = BL_GPIOD_CLOCK_REALTIME; break;
    case GPIOD_LINE_CLOCK_HTE: info->event_clock = BL_GPIOD_CLOCK_HTE; break;
    default: info->event_clock = BL_GPIOD_CLOCK_MONOTONIC; break;
    }
    gpiod_line_info_free(li);
    return 0;
}

int bl_gpiod_chip_find_line(bl_gpiod_chip *chip, const char *name, bl_gpiod_error *err) {
    errno = 0;
    int off = gpiod_chip_get_line_offset_from_name(chip->chip, name);
    if (off < 0) {
        bl_gpiod_set_error(err, errno ? errno : ENOENT, BL_GPIOD_OP_FIND_LINE, -1,
                           "gpiod_chip_get_line_offset_from_name");
        return -1;
    }
    return off;
}

static int fill_settings(struct gpiod_line_settings *s, const bl_gpiod_line_config *c) {
    gpiod_line_settings_reset(s);
    int rc = 0;
    rc |= gpiod_line_settings_set_direction(
        s, c->direction == BL_GPIOD_DIRECTION_OUTPUT ? GPIOD_LINE_DIRECTION_OUTPUT : GPIOD_LINE_DIRECTION_INPUT);
    enum gpiod_line_edge edge = GPIOD_LINE_EDGE_NONE;
    if (c->edge == BL_GPIOD_EDGE_RISING) edge = GPIOD_LINE_EDGE_RISING;
    if (c->edge == BL_GPIOD_EDGE_FALLING) edge = GPIOD_LINE_EDGE_FALLING;
    if (c->edge == BL_GPIOD_EDGE_BOTH) edge = GPIOD_LINE_EDGE_BOTH;
    rc |= gpiod_line_settings_set_edge_detection(s, edge);
    enum gpiod_line_bias bias = GPIOD_LINE_BIAS_AS_IS;
    if (c->bias == BL_GPIOD_BIAS_DISABLED) bias = GPIOD_LINE_BIAS_DISABLED;
    if (c->bias == BL_GPIOD_BIAS_PULL_UP) bias = GPIOD_LINE_BIAS_PULL_UP;
    if (c->bias == BL_GPIOD_BIAS_PULL_DOWN) bias = GPIOD_LINE_BIAS_PULL_DOWN;
    rc |= gpiod_line_settings_set_bias(s, bias);
    enum gpiod_line_drive drive = GPIOD_LINE_DRIVE_PUSH_PULL;
    if (c->drive == BL_GPIOD_DRIVE_OPEN_DRAIN) drive = GPIOD_LINE_DRIVE_OPEN_DRAIN;
    if (c->drive == BL_GPIOD_DRIVE_OPEN_SOURCE) drive = GPIOD_LINE_DRIVE_OPEN_SOURCE;
    rc |= gpiod_line_settings_set_drive(s, drive);
    gpiod_line_settings_set_active_low(s, c->active_low != 0);
    gpiod_line_settings_set_debounce_period_us(s, c->debounce_us);
    rc |= gpiod_line_settings_set_event_clock(s, GPIOD_LINE_CLOCK_MONOTONIC);
    if (c->direction == BL_GPIOD_DIRECTION_OUTPUT)
        rc |= gpiod_line_settings_set_output_value(s, c->output_value ? GPIOD_LINE_VALUE_ACTIVE
                                                                      : GPIOD_LINE_VALUE_INACTIVE);
    return rc ? -1 : 0;
}

// Builds a line config for `n` lines; NULL and err on failure.
static struct gpiod_line_config *make_line_config(const bl_gpiod_line_config *lines, uint32_t n, int op,
                                                  bl_gpiod_error *err) {
    struct gpiod_line_config *lc = gpiod_line_config_new();
    struct gpiod_line_settings *s = gpiod_line_settings_new();
    if (!lc || !s) {
        bl_gpiod_set_error(err, ENOMEM, op, -1, "gpiod_line_config_new");
        gpiod_line_config_free(lc);
        gpiod_line_settings_free(s);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        unsigned int off = lines[i].offset;
        if (fill_settings(s, &lines[i]) != 0 || gpiod_line_config_add_line_settings(lc, &off, 1, s) != 0) {
            bl_gpiod_set_error(err, errno ? errno : EINVAL, op, (int)off, "gpiod_line_settings");
            gpiod_line_config_free(lc);
            gpiod_line_settings_free(s);
            return NULL;
        }
    }
    gpiod_line_settings_free(s);
    return lc;
}

int bl_gpiod_library_config(const bl_gpiod_line_config *lines, uint32_t n, bl_gpiod_line_config *out,
                            bl_gpiod_error *err) {
    if (bl_gpiod_validate_configs(lines, n, UINT32_MAX, err) != 0) return -1;
    struct gpiod_line_config *lc = make_line_config(lines, n, BL_GPIOD_OP_REQUEST, err);
    if (!lc) return -1;
    for (uint32_t i = 0; i < n; i++) {
        struct gpiod_line_settings *s = gpiod_line_config_get_line_settings(lc, lines[i].offset);
        if (!s) {
            bl_gpiod_set_error(err, errno ? errno : ENOENT, BL_GPIOD_OP_REQUEST, (int)lines[i].offset,
                               "gpiod_line_config_get_line_settings");
            gpiod_line_config_free(lc);
            return -1;
        }
        bl_gpiod_line_config *o = &out[i];
        memset(o, 0, sizeof(*o));
        o->offset = lines[i].offset;
        o->direction = gpiod_line_settings_get_direction(s) == GPIOD_LINE_DIRECTION_OUTPUT ? BL_GPIOD_DIRECTION_OUTPUT
                                                                                          : BL_GPIOD_DIRECTION_INPUT;
        switch (gpiod_line_settings_get_edge_detection(s)) {
        case GPIOD_LINE_EDGE_RISING: o->edge = BL_GPIOD_EDGE_RISING; break;
        case GPIOD_LINE_EDGE_FALLING: o->edge = BL_GPIOD_EDGE_FALLING; break;
        case GPIOD_LINE_EDGE_BOTH: o->edge = BL_GPIOD_EDGE_BOTH; break;
        default: o->edge = BL_GPIOD_EDGE_NONE; break;
        }
        switch (gpiod_line_settings_get_bias(s)) {
        case GPIOD_LINE_BIAS_DISABLED: o->bias = BL_GPIOD_BIAS_DISABLED; break;
        case GPIOD_LINE_BIAS_PULL_UP: o->bias = BL_GPIOD_BIAS_PULL_UP; break;
        case GPIOD_LINE_BIAS_PULL_DOWN: o->bias = BL_GPIOD_BIAS_PULL_DOWN; break;
        default: o->bias = BL_GPIOD_BIAS_AS_IS; break;
        }
        switch (gpiod_line_settings_get_drive(s)) {
        case GPIOD_LINE_DRIVE_OPEN_DRAIN: o->drive = BL_GPIOD_DRIVE_OPEN_DRAIN; break;
        case GPIOD_LINE_DRIVE_OPEN_SOURCE: o->drive = BL_GPIOD_DRIVE_OPEN_SOURCE; break;
        default: o->drive = BL_GPIOD_DRIVE_PUSH_PULL; break;
        }
        o->active_low = gpiod_line_settings_get_active_low(s) ? 1 : 0;
        o->output_value = gpiod_line_settings_get_output_value(s) == GPIOD_LINE_VALUE_ACTIVE ? 1 : 0;
        o->debounce_us = (uint32_t)gpiod_line_settings_get_debounce_period_us(s);
        gpiod_line_settings_free(s);
    }
    gpiod_line_config_free(lc);
    return 0;
}

uint32_t bl_gpiod_kernel_event_buffer(uint32_t num_lines, uint32_t event_buffer_size) {
    // linereq_create(): 0 -> 16 per line, above GPIO_V2_LINES_MAX * 16 -> that;
    // kfifo_alloc(): rounded up to a power of two.
    uint32_t size = event_buffer_size ? event_buffer_size : 16 * num_lines;
    if (size > BL_GPIOD_V2_MAX_EVENT_BUFFER) size = BL_GPIOD_V2_MAX_EVENT_BUFFER;
    uint32_t p = 2;
    while (p < size) p <<= 1;
    return p;
}

bl_gpiod_request *bl_gpiod_request_lines(bl_gpiod_chip *chip, const char *consumer,
                                         const bl_gpiod_line_config *lines, uint32_t num_lines,
                                         uint32_t event_buffer_size, bl_gpiod_error *err) {
    bl_gpiod_chip_info ci;
    if (bl_gpiod_chip_get_info(chip, &ci, err) != 0) return NULL;
    if (bl_gpiod_validate_configs(lines, num_lines, ci.num_lines, err) != 0) return NULL;
    struct bl_gpiod_request *r = calloc(1, sizeof(*r));
    if (!r) {
        bl_gpiod_set_error(err, ENOMEM, BL_GPIOD_OP_REQUEST, -1, "calloc");
        return NULL;
    }
    r->chip = chip;
    r->num_lines = num_lines;
    for (uint32_t i = 0; i < num_lines; i++) {
        r->offsets[i] = lines[i].offset;
        r->lines[i] = lines[i];
        if (lines[i].edge != BL_GPIOD_EDGE_NONE) r->has_events = 1;
    }
    uint32_t capacity = event_buffer_size ? event_buffer_size : 16 * num_lines;
    if (capacity > BL_GPIOD_V2_MAX_EVENT_BUFFER) capacity = BL_GPIOD_V2_MAX_EVENT_BUFFER; // libgpiod's limit too
    struct gpiod_request_config *rc = gpiod_request_config_new();
    struct gpiod_line_config *lc = make_line_config(lines, num_lines, BL_GPIOD_OP_REQUEST, err);
    if (!rc || !lc) {
        if (!rc) bl_gpiod_set_error(err, ENOMEM, BL_GPIOD_OP_REQUEST, -1, "gpiod_request_config_new");
        gpiod_request_config_free(rc);
        gpiod_line_config_free(lc);
        free(r);
        return NULL;
    }
    gpiod_request_config_set_consumer(rc, consumer);
    // The kernel's kfifo needs at least 2 (a buffer of 1 fails with EINVAL).
    gpiod_request_config_set_event_buffer_size(rc, capacity < 2 ? 2 : capacity);
    errno = 0;
    r->request = gpiod_chip_request_lines(chip->chip, rc, lc);
    int e = errno;
    gpiod_request_config_free(rc);
    gpiod_line_config_free(lc);
    if (!r->request) {
        bl_gpiod_set_error(err, e ? e : EIO, BL_GPIOD_OP_REQUEST, -1, "gpiod_chip_request_lines");
        if (e == EBUSY) bl_gpiod_find_busy_line(chip, lines, num_lines, err);
        free(r);
        return NULL;
    }
    r->buffer = gpiod_edge_event_buffer_new(capacity);
    r->buffer_capacity = capacity;
    int fd = gpiod_line_request_get_fd(r->request);
    if (!r->buffer || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        bl_gpiod_set_error(err, r->buffer ? errno : ENOMEM, BL_GPIOD_OP_REQUEST, -1, "event buffer setup");
        gpiod_edge_event_buffer_free(r->buffer);
        gpiod_line_request_release(r->request);
        free(r);
        return NULL;
    }
    bl_gpiod_chip_retain(chip);
    return r;
}

void bl_gpiod_request_release(bl_gpiod_request *r) {
    if (!r) return;
    gpiod_edge_event_buffer_free(r->buffer);
    gpiod_line_request_release(r->request);
    bl_gpiod_chip_release_ref(r->chip);
    free(r);
}

int bl_gpiod_request_fd(bl_gpiod_request *r) { return r->has_events ? gpiod_line_request_get_fd(r->request) : -1; }

int bl_gpiod_request_get_values(bl_gpiod_request *r, int32_t *values, bl_gpiod_error *err) {
    enum gpiod_line_value tmp[BL_GPIOD_MAX_LINES];
    if (gpiod_line_request_get_values_subset(r->request, r->num_lines, r->offsets, tmp) != 0) {
        bl_gpiod_set_error(err, errno, BL_GPIOD_OP_GET_VALUES, -1, "gpiod_line_request_get_values_subset");
        return -1;
    }
    for (uint32_t i = 0; i < r->num_lines; i++) values[i] = tmp[i] == GPIOD_LINE_VALUE_ACTIVE ? 1 : 0;
    return 0;
}

int bl_gpiod_request_set_values(bl_gpiod_request *r, const uint32_t *offsets, const int32_t *values,
                                uint32_t count, bl_gpiod_error *err) {
    unsigned int offs[BL_GPIOD_MAX_LINES];
    enum gpiod_line_value vals[BL_GPIOD_MAX_LINES];
    if (count > BL_GPIOD_MAX_LINES) {
        bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_SET_VALUES, -1, "more than 64 values");
        return -1;
    }
    for (uint32_t k = 0; k < count; k++) {
        uint32_t i = 0;
        while (i < r->num_lines && r->offsets[i] != offsets[k]) i++;
        if (i == r->num_lines) {
            bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_SET_VALUES, (int)offsets[k], "line not in this request");
            return -1;
        }
        if (r->lines[i].direction != BL_GPIOD_DIRECTION_OUTPUT) {
            bl_gpiod_set_error(err, EPERM, BL_GPIOD_OP_SET_VALUES, (int)offsets[k], "line is an input");
            return -1;
        }
        offs[k] = offsets[k];
        vals[k] = values[k] ? GPIOD_LINE_VALUE_ACTIVE : GPIOD_LINE_VALUE_INACTIVE;
    }
    if (gpiod_line_request_set_values_subset(r->request, count, offs, vals) != 0) {
        bl_gpiod_set_error(err, errno, BL_GPIOD_OP_SET_VALUES, -1, "gpiod_line_request_set_values_subset");
        return -1;
    }
    return 0;
}

int bl_gpiod_request_reconfigure(bl_gpiod_request *r, const bl_gpiod_line_config *lines, uint32_t num_lines,
                                 bl_gpiod_error *err) {
    bl_gpiod_chip_info ci;
    if (bl_gpiod_chip_get_info(r->chip, &ci, err) != 0) return -1;
    if (bl_gpiod_validate_configs(lines, num_lines, ci.num_lines, err) != 0) return -1;
    if (num_lines != r->num_lines) {
        bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_RECONFIGURE, -1, "reconfigure must name the same lines");
        return -1;
    }
    for (uint32_t i = 0; i < num_lines; i++) {
        if (lines[i].offset != r->offsets[i]) {
            bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_RECONFIGURE, (int)lines[i].offset,
                               "reconfigure must name the same lines in the same order");
            return -1;
        }
    }
    struct gpiod_line_config *lc = make_line_config(lines, num_lines, BL_GPIOD_OP_RECONFIGURE, err);
    if (!lc) return -1;
    int rc = gpiod_line_request_reconfigure_lines(r->request, lc);
    int e = errno;
    gpiod_line_config_free(lc);
    if (rc != 0) {
        bl_gpiod_set_error(err, e, BL_GPIOD_OP_RECONFIGURE, -1, "gpiod_line_request_reconfigure_lines");
        return -1;
    }
    int has_events = 0;
    for (uint32_t i = 0; i < num_lines; i++) {
        r->lines[i] = lines[i];
        if (lines[i].edge != BL_GPIOD_EDGE_NONE) has_events = 1;
    }
    r->has_events = has_events;
    return 0;
}

int bl_gpiod_request_read_events(bl_gpiod_request *r, bl_gpiod_edge_event *out, uint32_t max,
                                 bl_gpiod_read_status *status, bl_gpiod_error *err) {
    status->flags = 0;
    status->error = 0;
    status->num_full = 0;
    if (!r->has_events) return 0;
    uint32_t want = max < r->buffer_capacity ? max : r->buffer_capacity;
    if (want == 0) {
        status->flags |= BL_GPIOD_READ_MORE;
        return 0;
    }
    int got = gpiod_line_request_read_edge_events(r->request, r->buffer, want);
    if (got < 0) {
        int e = errno;
        if (e == EAGAIN || e == EINTR) return 0;
        if (e == ENODEV || e == EIO) {
            status->flags |= BL_GPIOD_READ_VANISHED;
            return 0;
        }
        bl_gpiod_set_error(err, e, BL_GPIOD_OP_READ_EVENTS, -1, "gpiod_line_request_read_edge_events");
        return -1;
    }
    for (int j = 0; j < got; j++) {
        struct gpiod_edge_event *ev = gpiod_edge_event_buffer_get_event(r->buffer, (unsigned long)j);
        bl_gpiod_edge_event *o = &out[j];
        o->timestamp_ns = gpiod_edge_event_get_timestamp_ns(ev);
        o->global_seqno = gpiod_edge_event_get_global_seqno(ev);
        o->line_seqno = gpiod_edge_event_get_line_seqno(ev);
        o->offset = gpiod_edge_event_get_line_offset(ev);
        o->edge = gpiod_edge_event_get_event_type(ev) == GPIOD_EDGE_EVENT_RISING_EDGE ? BL_GPIOD_EDGE_RISING
                                                                                     : BL_GPIOD_EDGE_FALLING;
    }
    if ((uint32_t)got == want && want == max) status->flags |= BL_GPIOD_READ_MORE;
    return got;
}

#endif // !GPIOD_LINE_BULK_MAX_LINES
