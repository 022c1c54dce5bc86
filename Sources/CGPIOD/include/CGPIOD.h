// CGPIOD: one small C API over libgpiod, whatever version is installed.
//
// Why a shim and not libgpiod straight from Swift: libgpiod 1.6 (Debian 12,
// Raspberry Pi OS bookworm; the v1 API on the kernel's v1 uAPI) and 2.x
// (Debian 13, Pi OS trixie) have different object models, and 1.6 gives each
// edge-detecting line its own file descriptor. This header gives Swift the
// v2 object model on both: a chip, a request over several lines with one
// pollable fd, values read and written in bulk, and edge events read in bulk
// into a buffer the caller reserved. The branch is picked at compile time:
// only the 1.6 header defines GPIOD_LINE_BULK_MAX_LINES.
//
// Conventions: plain C types only; a failing call returns NULL or -1 and
// fills a bl_gpiod_error (errno, which call, and for EBUSY the consumer that
// holds the line). Nothing here allocates after a request is made: reading
// events and values uses the request's own storage.
#ifndef BOARDLOOP_CGPIOD_H
#define BOARDLOOP_CGPIOD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- constants ----------------------------------------------------------
enum {
    BL_GPIOD_DIRECTION_INPUT = 1,
    BL_GPIOD_DIRECTION_OUTPUT = 2,
};
enum {
    BL_GPIOD_EDGE_NONE = 0,
    BL_GPIOD_EDGE_RISING = 1,
    BL_GPIOD_EDGE_FALLING = 2,
    BL_GPIOD_EDGE_BOTH = 3,
    BL_GPIOD_EDGE_UNKNOWN = -1, // line info under 1.6: the v1 uAPI does not say
};
enum {
    BL_GPIOD_BIAS_AS_IS = 0,
    BL_GPIOD_BIAS_DISABLED = 1,
    BL_GPIOD_BIAS_PULL_UP = 2,
    BL_GPIOD_BIAS_PULL_DOWN = 3,
};
enum {
    /// The clock of edge event timestamps (2.x line info; 1.6 has only CLOCK_MONOTONIC
    /// and line info does not say: UNKNOWN).
    BL_GPIOD_CLOCK_MONOTONIC = 0,
    BL_GPIOD_CLOCK_REALTIME = 1,
    BL_GPIOD_CLOCK_HTE = 2,
    BL_GPIOD_CLOCK_UNKNOWN = -1,
};
enum {
    BL_GPIOD_DRIVE_PUSH_PULL = 0,
    BL_GPIOD_DRIVE_OPEN_DRAIN = 1,
    BL_GPIOD_DRIVE_OPEN_SOURCE = 2,
};

/// Lines per request (both libgpiod versions and both kernel uAPIs allow 64).
#define BL_GPIOD_MAX_LINES 64
/// The largest v2 request event buffer: linereq_create() in
/// drivers/gpio/gpiolib-cdev.c caps event_buffer_size at GPIO_V2_LINES_MAX * 16
/// (64 * 16 = 1024; 0 means 16 per line), and kfifo_alloc() rounds it up to a
/// power of two (a size below 2 fails with EINVAL). libgpiod 2.x caps its
/// user-space edge event buffer at the same 1024.
#define BL_GPIOD_V2_MAX_EVENT_BUFFER 1024
/// Events the v1 kernel uAPI buffers per line (DECLARE_KFIFO(events, ..., 16)
/// in drivers/gpio/gpiolib-cdev.c, checked in linux-source-6.1.192); when it
/// is full, newer edges are dropped without a trace.
#define BL_GPIOD_V1_KFIFO_EVENTS 16

// Capability bits of the compiled branch (bl_gpiod_capabilities()).
enum {
    /// Edge events carry global and per-line sequence numbers (2.x).
    BL_GPIOD_CAP_SEQNO = 1 << 0,
    /// The kernel debounces (2.x with the v2 uAPI); 1.6: software debounce.
    BL_GPIOD_CAP_DEBOUNCE = 1 << 1,
    /// Line info reports edge detection and debounce (2.x).
    BL_GPIOD_CAP_INFO_EDGE = 1 << 2,
    /// Reconfiguring an edge-detecting request keeps the lines requested
    /// (2.x); 1.6 releases and requests them again.
    BL_GPIOD_CAP_ATOMIC_RECONFIGURE = 1 << 3,
    /// The request's event buffer size can be chosen (2.x); 1.6: 16 per line.
    BL_GPIOD_CAP_EVENT_BUFFER_SIZE = 1 << 4,
};

// Which call failed (bl_gpiod_error.op).
enum {
    BL_GPIOD_OP_NONE = 0,
    BL_GPIOD_OP_OPEN = 1,
    BL_GPIOD_OP_INFO = 2,
    BL_GPIOD_OP_LINE_INFO = 3,
    BL_GPIOD_OP_FIND_LINE = 4,
    BL_GPIOD_OP_REQUEST = 5,
    BL_GPIOD_OP_GET_VALUES = 6,
    BL_GPIOD_OP_SET_VALUES = 7,
    BL_GPIOD_OP_RECONFIGURE = 8,
    BL_GPIOD_OP_READ_EVENTS = 9,
    BL_GPIOD_OP_SCAN = 10,
};

// ---- plain data ---------------------------------------------------------
typedef struct {
    /// errno of the failure (EBUSY, EACCES, ENOENT, ENODEV, EINVAL, ...).
    int32_t code;
    /// BL_GPIOD_OP_*.
    int32_t op;
    /// The line the failure is about, or -1.
    int32_t offset;
    /// For EBUSY: the consumer holding `offset` ("" when the kernel gave none).
    char consumer[32];
    /// A short note from the shim (which libgpiod call, what was invalid).
    char detail[96];
} bl_gpiod_error;

typedef struct {
    char name[32];
    char label[32];
    uint32_t num_lines;
} bl_gpiod_chip_info;

typedef struct {
    uint32_t offset;
    int32_t direction;  // BL_GPIOD_DIRECTION_*
    int32_t edge;       // BL_GPIOD_EDGE_* (UNKNOWN under 1.6)
    int32_t bias;       // BL_GPIOD_BIAS_*
    int32_t drive;      // BL_GPIOD_DRIVE_*
    int32_t active_low;
    int32_t used;
    uint32_t debounce_us;
    char name[32];
    char consumer[32];
    int32_t event_clock; // BL_GPIOD_CLOCK_* (UNKNOWN under 1.6)
} bl_gpiod_line_info;

/// How one line of a request is configured.
typedef struct {
    uint32_t offset;
    int32_t direction;    // BL_GPIOD_DIRECTION_*
    int32_t edge;         // BL_GPIOD_EDGE_* (inputs only)
    int32_t bias;         // BL_GPIOD_BIAS_*
    int32_t drive;        // BL_GPIOD_DRIVE_* (outputs only)
    int32_t active_low;
    int32_t output_value; // initial logical value of an output
    uint32_t debounce_us; // honoured only with BL_GPIOD_CAP_DEBOUNCE
} bl_gpiod_line_config;

/// One edge event, in the v2 shape on both versions.
typedef struct {
    uint64_t timestamp_ns; // kernel timestamp, CLOCK_MONOTONIC
    uint64_t global_seqno; // 0 when the library gives none (1.6)
    uint64_t line_seqno;   // 0 when the library gives none (1.6)
    uint32_t offset;
    uint32_t edge;         // BL_GPIOD_EDGE_RISING or BL_GPIOD_EDGE_FALLING
} bl_gpiod_edge_event;

enum {
    /// The chip went away (EPOLLERR/EPOLLHUP on a line fd, or ENODEV).
    BL_GPIOD_READ_VANISHED = 1 << 0,
    /// The caller's buffer filled up; more events are waiting.
    BL_GPIOD_READ_MORE = 1 << 1,
};

/// What a bulk read saw besides the events.
typedef struct {
    uint32_t flags;          // BL_GPIOD_READ_*
    int32_t error;           // errno of an unexpected read failure, else 0
    /// 1.6: lines whose kernel FIFO was found full (a read returned
    /// BL_GPIOD_V1_KFIFO_EVENTS events): later edges may have been dropped.
    uint32_t num_full;
    uint32_t full_offsets[BL_GPIOD_MAX_LINES];
} bl_gpiod_read_status;

typedef struct bl_gpiod_chip bl_gpiod_chip;
typedef struct bl_gpiod_request bl_gpiod_request;

// ---- library ------------------------------------------------------------
/// 1 for the libgpiod 1.x branch, 2 for the 2.x branch.
int bl_gpiod_api_version(void);
/// libgpiod's own version string ("1.6.3", "2.1.3").
const char *bl_gpiod_library_version(void);
/// BL_GPIOD_CAP_* bits of the compiled branch.
uint32_t bl_gpiod_capabilities(void);

// ---- chips --------------------------------------------------------------
/// The N of every `gpiochipN` character device in `dir` ("/dev"), sorted,
/// at most `max`. Returns the count (0 when there are none), or -1 and
/// `err` when the directory cannot be read.
int bl_gpiod_scan_chips(const char *dir, int32_t *numbers, int max, bl_gpiod_error *err);
/// Opens the chip at `path`. NULL and `err` on failure: ENOENT (no such
/// file), EACCES/EPERM (permission), ENODEV/ENXIO (gone), ENOTTY/EINVAL
/// (not a GPIO chip).
bl_gpiod_chip *bl_gpiod_chip_open(const char *path, bl_gpiod_error *err);
/// Closes the caller's handle. The chip stays open while requests made on
/// it are alive, and closes when the last one is released.
void bl_gpiod_chip_close(bl_gpiod_chip *chip);
int bl_gpiod_chip_get_info(bl_gpiod_chip *chip, bl_gpiod_chip_info *info, bl_gpiod_error *err);
int bl_gpiod_chip_get_line_info(bl_gpiod_chip *chip, uint32_t offset, bl_gpiod_line_info *info, bl_gpiod_error *err);
/// The offset of the line called `name`, or -1 (err->code ENOENT when no
/// line has that name).
int bl_gpiod_chip_find_line(bl_gpiod_chip *chip, const char *name, bl_gpiod_error *err);

// ---- requests -----------------------------------------------------------
/// Requests `num_lines` lines (at most BL_GPIOD_MAX_LINES, distinct
/// offsets) with per-line settings. `event_buffer_size` is the number of
/// events the request's read buffer holds (0: 16 per line); it is reserved
/// here, so reading events never allocates. On EBUSY `err` names the busy
/// line and its consumer.
bl_gpiod_request *bl_gpiod_request_lines(bl_gpiod_chip *chip, const char *consumer,
                                         const bl_gpiod_line_config *lines, uint32_t num_lines,
                                         uint32_t event_buffer_size, bl_gpiod_error *err);
/// What the library is asked for when `lines` are requested, read back from
/// the library's own objects and needing no chip: the shim builds them as
/// bl_gpiod_request_lines does (2.x: the gpiod_line_config, read back with
/// gpiod_line_config_get_line_settings; 1.6: the request type, flags and
/// default value of each line's group) and writes what they say into `out`
/// (same order; debounce_us is 0 under 1.6, which has no kernel debounce).
/// For tests of the backend's configuration (active-low, bias, drive, edges).
int bl_gpiod_library_config(const bl_gpiod_line_config *lines, uint32_t num_lines, bl_gpiod_line_config *out,
                            bl_gpiod_error *err);
/// The size the kernel's event buffer gets for a request of `num_lines`
/// lines asking for `event_buffer_size` (2.x; see BL_GPIOD_V2_MAX_EVENT_BUFFER);
/// 1.6: 16 per line, whatever was asked.
uint32_t bl_gpiod_kernel_event_buffer(uint32_t num_lines, uint32_t event_buffer_size);
/// Releases the lines and frees the request.
void bl_gpiod_request_release(bl_gpiod_request *req);
/// One fd that is readable while any line has edge events waiting (and
/// reports EPOLLERR/EPOLLHUP when the chip goes, on kernels that say so);
/// -1 when no line detects edges. 2.x: the request fd; 1.6: an epoll fd
/// over the per-line event fds. Stable over the request's life.
int bl_gpiod_request_fd(bl_gpiod_request *req);
/// Logical values of all lines, in request order.
int bl_gpiod_request_get_values(bl_gpiod_request *req, int32_t *values, bl_gpiod_error *err);
/// Sets `count` lines (given by offset) to logical `values`; lines of one
/// kernel handle change together.
int bl_gpiod_request_set_values(bl_gpiod_request *req, const uint32_t *offsets, const int32_t *values,
                                uint32_t count, bl_gpiod_error *err);
/// Applies new settings to the same lines (same offsets, same order).
/// 2.x: atomically; 1.6: in place for value-only requests, otherwise the
/// lines are released and requested again (the fd stays the same).
int bl_gpiod_request_reconfigure(bl_gpiod_request *req, const bl_gpiod_line_config *lines, uint32_t num_lines,
                                 bl_gpiod_error *err);
/// Reads waiting edge events into `events` (at most `max`), never blocking.
/// Returns the count (0 when none are waiting) or -1 and `err`; `status`
/// reports a vanished chip and, under 1.6, full kernel FIFOs.
int bl_gpiod_request_read_events(bl_gpiod_request *req, bl_gpiod_edge_event *events, uint32_t max,
                                 bl_gpiod_read_status *status, bl_gpiod_error *err);

#ifdef __cplusplus
}
#endif
#endif
