// CGPIOD, libgpiod 1.x branch (1.6 on Debian 12 / Pi OS bookworm): the v1
// API (gpiod_line_bulk, gpiod_line_request_bulk, gpiod_line_event_*) on the
// kernel's v1 uAPI. Compiled only when the header is a 1.x header.
//
// How the v2 shape is made from v1 parts:
// - a request is a set of groups: lines with identical settings share one
//   gpiod_line_bulk request (one kernel handle, so their values change
//   together); edge-detecting lines each get their own event fd from the
//   kernel (v1 has one fd per line event request);
// - the event fds sit in an epoll fd owned by the request, which is the one
//   fd the run loop watches (an epoll fd is itself pollable);
// - events carry the line offset (known from which fd they came), the
//   kernel timestamp, and no sequence numbers (v1 has none); the lines'
//   events of one read are merged into time order;
// - a read that returns BL_GPIOD_V1_KFIFO_EVENTS events from one line saw
//   its kernel FIFO full, so later edges may have been dropped: reported
//   in the read status, since v1 cannot say more.
#include "internal.h"

#ifdef GPIOD_LINE_BULK_MAX_LINES

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

struct bl_group {
    struct gpiod_line_bulk bulk;
    bl_gpiod_line_config config; // offset and output_value not meaningful
    int events;                  // requested for edge events
};

struct bl_gpiod_request {
    bl_gpiod_chip *chip;
    char consumer[32];
    uint32_t num_lines;
    bl_gpiod_line_config lines[BL_GPIOD_MAX_LINES];
    struct gpiod_line *line[BL_GPIOD_MAX_LINES];
    int group_of[BL_GPIOD_MAX_LINES];
    int index_in_group[BL_GPIOD_MAX_LINES];
    int event_fd[BL_GPIOD_MAX_LINES]; // -1 unless the line detects edges
    uint32_t since_drain[BL_GPIOD_MAX_LINES];
    int32_t out_values[BL_GPIOD_MAX_LINES]; // last logical value set, per line
    // A v1 handle writes all its lines at once, from out_values: a write
    // from another thread (a stop setting a stuck loop's outputs safe)
    // and the owner's must not interleave, or one could undo the other's
    // line with a stale value.
    pthread_mutex_t set_lock;
    int num_groups;
    struct bl_group groups[BL_GPIOD_MAX_LINES];
    int epfd;       // epoll over the event fds (created once, kept)
    int has_events; // any line detects edges
    int only_event_line; // the one line that detects edges, or -1 (none, or several)
    int requested;  // groups are currently requested
    uint32_t next_line; // round-robin start for reading
};

int bl_gpiod_api_version(void) { return 1; }
const char *bl_gpiod_library_version(void) { return gpiod_version_string(); }
uint32_t bl_gpiod_capabilities(void) { return 0; }

int bl_gpiod_chip_get_info(bl_gpiod_chip *chip, bl_gpiod_chip_info *info, bl_gpiod_error *err) {
    (void)err;
    memset(info, 0, sizeof(*info));
    bl_gpiod_copy(info->name, sizeof(info->name), gpiod_chip_name(chip->chip));
    bl_gpiod_copy(info->label, sizeof(info->label), gpiod_chip_label(chip->chip));
    info->num_lines = gpiod_chip_num_lines(chip->chip);
    return 0;
}

int bl_gpiod_chip_get_line_info(bl_gpiod_chip *chip, uint32_t offset, bl_gpiod_line_info *info,
                                bl_gpiod_error *err) {
    memset(info, 0, sizeof(*info));
    if (offset >= gpiod_chip_num_lines(chip->chip)) {
        bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_LINE_INFO, (int)offset, "offset beyond the chip's lines");
        return -1;
    }
    struct gpiod_line *line = gpiod_chip_get_line(chip->chip, offset);
    if (!line || gpiod_line_update(line) != 0) {
        bl_gpiod_set_error(err, errno, BL_GPIOD_OP_LINE_INFO, (int)offset, "gpiod_line_update");
        return -1;
    }
    info->offset = offset;
    info->direction = gpiod_line_direction(line) == GPIOD_LINE_DIRECTION_OUTPUT ? BL_GPIOD_DIRECTION_OUTPUT
                                                                               : BL_GPIOD_DIRECTION_INPUT;
    info->edge = BL_GPIOD_EDGE_UNKNOWN;
    switch (gpiod_line_bias(line)) {
    case GPIOD_LINE_BIAS_DISABLE: info->bias = BL_GPIOD_BIAS_DISABLED; break;
    case GPIOD_LINE_BIAS_PULL_UP: info->bias = BL_GPIOD_BIAS_PULL_UP; break;
    case GPIOD_LINE_BIAS_PULL_DOWN: info->bias = BL_GPIOD_BIAS_PULL_DOWN; break;
    default: info->bias = BL_GPIOD_BIAS_AS_IS; break;
    }
    info->drive = gpiod_line_is_open_drain(line)    ? BL_GPIOD_DRIVE_OPEN_DRAIN
                  : gpiod_line_is_open_source(line) ? BL_GPIOD_DRIVE_OPEN_SOURCE
                                                    : BL_GPIOD_DRIVE_PUSH_PULL;
    info->active_low = gpiod_line_active_state(line) == GPIOD_LINE_ACTIVE_STATE_LOW;
    info->used = gpiod_line_is_used(line);
    info->debounce_us = 0;
    info->event_clock = BL_GPIOD_CLOCK_UNKNOWN;
    bl_gpiod_copy(info->name, sizeof(info->name), gpiod_line_name(line));
    bl_gpiod_copy(info->consumer, sizeof(info->consumer), gpiod_line_consumer(line));
    return 0;
}

int bl_gpiod_chip_find_line(bl_gpiod_chip *chip, const char *name, bl_gpiod_error *err) {
    errno = 0;
    struct gpiod_line *line = gpiod_chip_find_line(chip->chip, name);
    if (!line) {
        bl_gpiod_set_error(err, errno ? errno : ENOENT, BL_GPIOD_OP_FIND_LINE, -1, "gpiod_chip_find_line");
        return -1;
    }
    return (int)gpiod_line_offset(line);
}

static int same_settings(const bl_gpiod_line_config *a, const bl_gpiod_line_config *b) {
    return a->direction == b->direction && a->edge == b->edge && a->bias == b->bias && a->drive == b->drive &&
           a->active_low == b->active_low;
}

static int request_flags(const bl_gpiod_line_config *c) {
    int flags = 0;
    if (c->active_low) flags |= GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW;
    if (c->drive == BL_GPIOD_DRIVE_OPEN_DRAIN) flags |= GPIOD_LINE_REQUEST_FLAG_OPEN_DRAIN;
    if (c->drive == BL_GPIOD_DRIVE_OPEN_SOURCE) flags |= GPIOD_LINE_REQUEST_FLAG_OPEN_SOURCE;
    if (c->bias == BL_GPIOD_BIAS_DISABLED) flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE;
    if (c->bias == BL_GPIOD_BIAS_PULL_UP) flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP;
    if (c->bias == BL_GPIOD_BIAS_PULL_DOWN) flags |= GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN;
    return flags;
}

static int request_type(const bl_gpiod_line_config *c) {
    if (c->direction == BL_GPIOD_DIRECTION_OUTPUT) return GPIOD_LINE_REQUEST_DIRECTION_OUTPUT;
    switch (c->edge) {
    case BL_GPIOD_EDGE_RISING: return GPIOD_LINE_REQUEST_EVENT_RISING_EDGE;
    case BL_GPIOD_EDGE_FALLING: return GPIOD_LINE_REQUEST_EVENT_FALLING_EDGE;
    case BL_GPIOD_EDGE_BOTH: return GPIOD_LINE_REQUEST_EVENT_BOTH_EDGES;
    default: return GPIOD_LINE_REQUEST_DIRECTION_INPUT;
    }
}

// The request config of a group of lines with settings `c`: what
// request_groups() gives gpiod_line_request_bulk().
static struct gpiod_line_request_config group_request_config(const bl_gpiod_line_config *c, const char *consumer) {
    struct gpiod_line_request_config rc = {
        .consumer = consumer,
        .request_type = request_type(c),
        .flags = request_flags(c),
    };
    return rc;
}

int bl_gpiod_library_config(const bl_gpiod_line_config *lines, uint32_t n, bl_gpiod_line_config *out,
                            bl_gpiod_error *err) {
    if (bl_gpiod_validate_configs(lines, n, UINT32_MAX, err) != 0) return -1;
    for (uint32_t i = 0; i < n; i++) {
        struct gpiod_line_request_config rc = group_request_config(&lines[i], "");
        bl_gpiod_line_config *o = &out[i];
        memset(o, 0, sizeof(*o));
        o->offset = lines[i].offset;
        o->direction = BL_GPIOD_DIRECTION_INPUT;
        o->edge = BL_GPIOD_EDGE_NONE;
        switch (rc.request_type) {
        case GPIOD_LINE_REQUEST_DIRECTION_OUTPUT: o->direction = BL_GPIOD_DIRECTION_OUTPUT; break;
        case GPIOD_LINE_REQUEST_EVENT_RISING_EDGE: o->edge = BL_GPIOD_EDGE_RISING; break;
        case GPIOD_LINE_REQUEST_EVENT_FALLING_EDGE: o->edge = BL_GPIOD_EDGE_FALLING; break;
        case GPIOD_LINE_REQUEST_EVENT_BOTH_EDGES: o->edge = BL_GPIOD_EDGE_BOTH; break;
        default: break;
        }
        o->active_low = (rc.flags & GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW) != 0;
        o->drive = (rc.flags & GPIOD_LINE_REQUEST_FLAG_OPEN_DRAIN)    ? BL_GPIOD_DRIVE_OPEN_DRAIN
                   : (rc.flags & GPIOD_LINE_REQUEST_FLAG_OPEN_SOURCE) ? BL_GPIOD_DRIVE_OPEN_SOURCE
                                                                      : BL_GPIOD_DRIVE_PUSH_PULL;
        o->bias = (rc.flags & GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE)     ? BL_GPIOD_BIAS_DISABLED
                  : (rc.flags & GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP)   ? BL_GPIOD_BIAS_PULL_UP
                  : (rc.flags & GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN) ? BL_GPIOD_BIAS_PULL_DOWN
                                                                        : BL_GPIOD_BIAS_AS_IS;
        // The default value request_groups() passes for the line.
        o->output_value = lines[i].output_value ? 1 : 0;
        o->debounce_us = 0; // the v1 uAPI has no debounce
    }
    return 0;
}

uint32_t bl_gpiod_kernel_event_buffer(uint32_t num_lines, uint32_t event_buffer_size) {
    (void)event_buffer_size;
    return BL_GPIOD_V1_KFIFO_EVENTS * num_lines;
}

static void release_groups(struct bl_gpiod_request *r) {
    if (!r->requested) return;
    for (uint32_t i = 0; i < r->num_lines; i++) {
        if (r->event_fd[i] >= 0) {
            epoll_ctl(r->epfd, EPOLL_CTL_DEL, r->event_fd[i], NULL);
            r->event_fd[i] = -1;
        }
    }
    for (int g = 0; g < r->num_groups; g++) gpiod_line_release_bulk(&r->groups[g].bulk);
    r->requested = 0;
}

// Groups the lines by settings and requests each group; fills the event fds.
static int request_groups(struct bl_gpiod_request *r, bl_gpiod_error *err) {
    r->num_groups = 0;
    r->has_events = 0;
    r->only_event_line = -1;
    for (uint32_t i = 0; i < r->num_lines; i++) {
        const bl_gpiod_line_config *c = &r->lines[i];
        int g = 0;
        while (g < r->num_groups && !same_settings(&r->groups[g].config, c)) g++;
        if (g == r->num_groups) {
            r->num_groups++;
            gpiod_line_bulk_init(&r->groups[g].bulk);
            r->groups[g].config = *c;
            r->groups[g].events = c->direction == BL_GPIOD_DIRECTION_INPUT && c->edge != BL_GPIOD_EDGE_NONE;
        }
        r->group_of[i] = g;
        r->index_in_group[i] = (int)gpiod_line_bulk_num_lines(&r->groups[g].bulk);
        gpiod_line_bulk_add(&r->groups[g].bulk, r->line[i]);
        r->event_fd[i] = -1;
        r->since_drain[i] = 0;
        if (r->groups[g].events) r->has_events = 1;
    }
    for (int g = 0; g < r->num_groups; g++) {
        struct bl_group *grp = &r->groups[g];
        int defaults[BL_GPIOD_MAX_LINES] = {0};
        for (uint32_t i = 0; i < r->num_lines; i++)
            if (r->group_of[i] == g) defaults[r->index_in_group[i]] = r->out_values[i] ? 1 : 0;
        struct gpiod_line_request_config rc = group_request_config(&grp->config, r->consumer);
        errno = 0;
        if (gpiod_line_request_bulk(&grp->bulk, &rc, defaults) != 0) {
            int e = errno ? errno : EIO;
            for (int h = 0; h < g; h++) gpiod_line_release_bulk(&r->groups[h].bulk);
            bl_gpiod_set_error(err, e, BL_GPIOD_OP_REQUEST, -1, "gpiod_line_request_bulk");
            return -1;
        }
    }
    r->requested = 1;
    for (uint32_t i = 0; i < r->num_lines; i++) {
        if (!r->groups[r->group_of[i]].events) continue;
        int fd = gpiod_line_event_get_fd(r->line[i]);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLPRI, .data.u32 = i};
        if (fd < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0 ||
            epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            int e = errno;
            release_groups(r);
            bl_gpiod_set_error(err, e, BL_GPIOD_OP_REQUEST, (int)r->lines[i].offset, "event fd setup");
            return -1;
        }
        r->event_fd[i] = fd;
    }
    int with_events = 0;
    for (uint32_t i = 0; i < r->num_lines; i++) {
        if (r->event_fd[i] < 0) continue;
        with_events++;
        r->only_event_line = (int)i;
    }
    if (with_events != 1) r->only_event_line = -1;
    return 0;
}

bl_gpiod_request *bl_gpiod_request_lines(bl_gpiod_chip *chip, const char *consumer,
                                         const bl_gpiod_line_config *lines, uint32_t num_lines,
                                         uint32_t event_buffer_size, bl_gpiod_error *err) {
    (void)event_buffer_size; // v1: the kernel keeps 16 per line, not settable
    if (bl_gpiod_validate_configs(lines, num_lines, gpiod_chip_num_lines(chip->chip), err) != 0) return NULL;
    struct bl_gpiod_request *r = calloc(1, sizeof(*r));
    if (!r) {
        bl_gpiod_set_error(err, ENOMEM, BL_GPIOD_OP_REQUEST, -1, "calloc");
        return NULL;
    }
    r->chip = chip;
    bl_gpiod_copy(r->consumer, sizeof(r->consumer), consumer);
    r->num_lines = num_lines;
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (r->epfd < 0) {
        bl_gpiod_set_error(err, errno, BL_GPIOD_OP_REQUEST, -1, "epoll_create1");
        free(r);
        return NULL;
    }
    pthread_mutex_init(&r->set_lock, NULL);
    for (uint32_t i = 0; i < num_lines; i++) {
        r->lines[i] = lines[i];
        r->out_values[i] = lines[i].output_value ? 1 : 0;
        r->line[i] = gpiod_chip_get_line(chip->chip, lines[i].offset);
        if (!r->line[i]) {
            bl_gpiod_set_error(err, errno, BL_GPIOD_OP_REQUEST, (int)lines[i].offset, "gpiod_chip_get_line");
            close(r->epfd);
            pthread_mutex_destroy(&r->set_lock);
            free(r);
            return NULL;
        }
    }
    if (request_groups(r, err) != 0) {
        if (err && err->code == EBUSY) bl_gpiod_find_busy_line(chip, lines, num_lines, err);
        close(r->epfd);
        pthread_mutex_destroy(&r->set_lock);
        free(r);
        return NULL;
    }
    bl_gpiod_chip_retain(chip);
    return r;
}

void bl_gpiod_request_release(bl_gpiod_request *r) {
    if (!r) return;
    release_groups(r);
    close(r->epfd);
    bl_gpiod_chip_release_ref(r->chip);
    pthread_mutex_destroy(&r->set_lock);
    free(r);
}

int bl_gpiod_request_fd(bl_gpiod_request *r) { return r->has_events ? r->epfd : -1; }

int bl_gpiod_request_get_values(bl_gpiod_request *r, int32_t *values, bl_gpiod_error *err) {
    if (!r->requested) {
        bl_gpiod_set_error(err, ENODEV, BL_GPIOD_OP_GET_VALUES, -1, "lines not requested");
        return -1;
    }
    for (int g = 0; g < r->num_groups; g++) {
        int tmp[BL_GPIOD_MAX_LINES];
        if (gpiod_line_get_value_bulk(&r->groups[g].bulk, tmp) != 0) {
            bl_gpiod_set_error(err, errno, BL_GPIOD_OP_GET_VALUES, -1, "gpiod_line_get_value_bulk");
            return -1;
        }
        for (uint32_t i = 0; i < r->num_lines; i++)
            if (r->group_of[i] == g) values[i] = tmp[r->index_in_group[i]];
    }
    return 0;
}

static int set_values_locked(bl_gpiod_request *r, const uint32_t *offsets, const int32_t *values, uint32_t count,
                             bl_gpiod_error *err) {
    if (!r->requested) {
        bl_gpiod_set_error(err, ENODEV, BL_GPIOD_OP_SET_VALUES, -1, "lines not requested");
        return -1;
    }
    uint64_t touched = 0; // groups to write
    int32_t next[BL_GPIOD_MAX_LINES];
    memcpy(next, r->out_values, sizeof(next));
    for (uint32_t k = 0; k < count; k++) {
        uint32_t i = 0;
        while (i < r->num_lines && r->lines[i].offset != offsets[k]) i++;
        if (i == r->num_lines) {
            bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_SET_VALUES, (int)offsets[k], "line not in this request");
            return -1;
        }
        if (r->lines[i].direction != BL_GPIOD_DIRECTION_OUTPUT) {
            bl_gpiod_set_error(err, EPERM, BL_GPIOD_OP_SET_VALUES, (int)offsets[k], "line is an input");
            return -1;
        }
        next[i] = values[k] ? 1 : 0;
        touched |= 1ull << r->group_of[i];
    }
    for (int g = 0; g < r->num_groups; g++) {
        if (!(touched & (1ull << g))) continue;
        int tmp[BL_GPIOD_MAX_LINES] = {0};
        for (uint32_t i = 0; i < r->num_lines; i++)
            if (r->group_of[i] == g) tmp[r->index_in_group[i]] = next[i];
        if (gpiod_line_set_value_bulk(&r->groups[g].bulk, tmp) != 0) {
            bl_gpiod_set_error(err, errno, BL_GPIOD_OP_SET_VALUES, -1, "gpiod_line_set_value_bulk");
            return -1;
        }
        for (uint32_t i = 0; i < r->num_lines; i++)
            if (r->group_of[i] == g) r->out_values[i] = next[i];
    }
    return 0;
}

int bl_gpiod_request_set_values(bl_gpiod_request *r, const uint32_t *offsets, const int32_t *values,
                                uint32_t count, bl_gpiod_error *err) {
    pthread_mutex_lock(&r->set_lock);
    int rc = set_values_locked(r, offsets, values, count, err);
    pthread_mutex_unlock(&r->set_lock);
    return rc;
}

int bl_gpiod_request_reconfigure(bl_gpiod_request *r, const bl_gpiod_line_config *lines, uint32_t num_lines,
                                 bl_gpiod_error *err) {
    if (bl_gpiod_validate_configs(lines, num_lines, gpiod_chip_num_lines(r->chip->chip), err) != 0) return -1;
    if (num_lines != r->num_lines) {
        bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_RECONFIGURE, -1, "reconfigure must name the same lines");
        return -1;
    }
    for (uint32_t i = 0; i < num_lines; i++) {
        if (lines[i].offset != r->lines[i].offset) {
            bl_gpiod_set_error(err, EINVAL, BL_GPIOD_OP_RECONFIGURE, (int)lines[i].offset,
                               "reconfigure must name the same lines in the same order");
            return -1;
        }
    }
    // In place when no line detects edges before or after, and the grouping
    // stays the same: GPIOHANDLE_SET_CONFIG_IOCTL keeps the lines requested.
    int in_place = r->requested;
    for (uint32_t i = 0; i < num_lines && in_place; i++) {
        if (r->lines[i].edge != BL_GPIOD_EDGE_NONE || lines[i].edge != BL_GPIOD_EDGE_NONE) in_place = 0;
        for (uint32_t j = 0; j < i && in_place; j++) {
            int was = r->group_of[i] == r->group_of[j];
            int will = same_settings(&lines[i], &lines[j]);
            if (was != will) in_place = 0;
        }
    }
    if (in_place) {
        for (int g = 0; g < r->num_groups; g++) {
            uint32_t first = 0;
            while (r->group_of[first] != g) first++;
            const bl_gpiod_line_config *c = &lines[first];
            int vals[BL_GPIOD_MAX_LINES] = {0};
            for (uint32_t i = 0; i < num_lines; i++)
                if (r->group_of[i] == g) vals[r->index_in_group[i]] = lines[i].output_value ? 1 : 0;
            int dir = c->direction == BL_GPIOD_DIRECTION_OUTPUT ? GPIOD_LINE_REQUEST_DIRECTION_OUTPUT
                                                                : GPIOD_LINE_REQUEST_DIRECTION_INPUT;
            if (gpiod_line_set_config_bulk(&r->groups[g].bulk, dir, request_flags(c), vals) != 0) {
                bl_gpiod_set_error(err, errno, BL_GPIOD_OP_RECONFIGURE, -1, "gpiod_line_set_config_bulk");
                return -1;
            }
            r->groups[g].config = *c;
        }
        for (uint32_t i = 0; i < num_lines; i++) {
            r->lines[i] = lines[i];
            r->out_values[i] = lines[i].output_value ? 1 : 0;
        }
        return 0;
    }
    // Otherwise: release and request again with the new settings. The epoll
    // fd stays, so a run loop watching it needs no change.
    bl_gpiod_line_config old[BL_GPIOD_MAX_LINES];
    int32_t old_values[BL_GPIOD_MAX_LINES];
    memcpy(old, r->lines, sizeof(old));
    memcpy(old_values, r->out_values, sizeof(old_values));
    release_groups(r);
    for (uint32_t i = 0; i < num_lines; i++) {
        r->lines[i] = lines[i];
        r->out_values[i] = lines[i].output_value ? 1 : 0;
    }
    if (request_groups(r, err) != 0) {
        if (err) err->op = BL_GPIOD_OP_RECONFIGURE;
        if (err && err->code == EBUSY) bl_gpiod_find_busy_line(r->chip, lines, num_lines, err);
        // Try to get the old configuration back, so the caller keeps its lines.
        memcpy(r->lines, old, sizeof(old));
        memcpy(r->out_values, old_values, sizeof(old_values));
        bl_gpiod_error ignored;
        (void)request_groups(r, &ignored);
        return -1;
    }
    return 0;
}

int bl_gpiod_request_read_events(bl_gpiod_request *r, bl_gpiod_edge_event *out, uint32_t max,
                                 bl_gpiod_read_status *status, bl_gpiod_error *err) {
    status->flags = 0;
    status->error = 0;
    status->num_full = 0;
    if (!r->requested || !r->has_events) return 0;
    struct epoll_event ready[BL_GPIOD_MAX_LINES];
    int n;
    if (r->only_event_line >= 0) {
        // One line detects edges: read its fd directly (non-blocking; EAGAIN
        // when nothing waits) instead of asking the inner epoll first, one
        // system call fewer per read. A vanished chip shows in the read's
        // error, and the caller's epoll reports the hangup.
        ready[0].events = EPOLLIN;
        ready[0].data.u32 = (uint32_t)r->only_event_line;
        n = 1;
    } else {
        n = epoll_wait(r->epfd, ready, BL_GPIOD_MAX_LINES, 0);
    }
    if (n < 0) {
        if (errno == EINTR) return 0;
        bl_gpiod_set_error(err, errno, BL_GPIOD_OP_READ_EVENTS, -1, "epoll_wait");
        return -1;
    }
    // Start with the line after the one that was first last time, so a busy
    // line cannot starve the others when the caller's buffer is small.
    uint32_t count = 0;
    for (int pass = 0; pass < n; pass++) {
        int k = (int)((pass + r->next_line) % (uint32_t)n);
        uint32_t i = ready[k].data.u32;
        int fd = r->event_fd[i];
        if (fd < 0) continue;
        if (ready[k].events & (EPOLLERR | EPOLLHUP)) {
            status->flags |= BL_GPIOD_READ_VANISHED;
            continue;
        }
        while (1) {
            uint32_t room = max - count;
            if (room == 0) {
                status->flags |= BL_GPIOD_READ_MORE;
                break;
            }
            uint32_t chunk = room < BL_GPIOD_V1_KFIFO_EVENTS ? room : BL_GPIOD_V1_KFIFO_EVENTS;
            struct gpiod_line_event evs[BL_GPIOD_V1_KFIFO_EVENTS];
            int got = gpiod_line_event_read_fd_multiple(fd, evs, chunk);
            if (got < 0) {
                int e = errno;
                if (e == EAGAIN || e == EINTR) {
                    r->since_drain[i] = 0;
                } else if (e == ENODEV || e == EIO) {
                    status->flags |= BL_GPIOD_READ_VANISHED;
                } else {
                    status->error = e;
                }
                break;
            }
            for (int j = 0; j < got; j++) {
                bl_gpiod_edge_event *o = &out[count++];
                o->timestamp_ns = (uint64_t)evs[j].ts.tv_sec * 1000000000ull + (uint64_t)evs[j].ts.tv_nsec;
                o->global_seqno = 0;
                o->line_seqno = 0;
                o->offset = r->lines[i].offset;
                o->edge = evs[j].event_type == GPIOD_LINE_EVENT_RISING_EDGE ? BL_GPIOD_EDGE_RISING
                                                                            : BL_GPIOD_EDGE_FALLING;
            }
            r->since_drain[i] += (uint32_t)got;
            if ((uint32_t)got == BL_GPIOD_V1_KFIFO_EVENTS || r->since_drain[i] >= BL_GPIOD_V1_KFIFO_EVENTS) {
                // The FIFO held its capacity: edges after that were dropped, if any came.
                uint32_t f = 0;
                while (f < status->num_full && status->full_offsets[f] != r->lines[i].offset) f++;
                if (f == status->num_full && f < BL_GPIOD_MAX_LINES) status->full_offsets[status->num_full++] = r->lines[i].offset;
                r->since_drain[i] = 0;
            }
            if ((uint32_t)got < chunk) {
                r->since_drain[i] = 0;
                break;
            }
        }
    }
    r->next_line++;
    // Each line's events are in order; merge the lines into time order, as
    // one v2 request fd would give them (stable insertion sort: the input is
    // a few sorted runs, so this is close to linear; no allocation).
    for (uint32_t i = 1; i < count; i++) {
        bl_gpiod_edge_event e = out[i];
        uint32_t j = i;
        while (j > 0 && out[j - 1].timestamp_ns > e.timestamp_ns) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = e;
    }
    return (int)count;
}

#endif // GPIOD_LINE_BULK_MAX_LINES
