// The references boardloop is measured against, in C on the raw kernel
// primitives (epoll, eventfd, timerfd, pipes), plus the producer threads and
// helpers both sides share, so that the only thing that differs between a
// reference row and a boardloop row is what consumes the events.
#ifndef BOARDLOOP_CBENCHRAW_H
#define BOARDLOOP_CBENCHRAW_H
#include <stdint.h>
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

/// CLOCK_MONOTONIC in nanoseconds (vDSO).
uint64_t bb_now_ns(void);
/// Pins the calling thread to `cpu` (-1: no pinning). 0 or -errno.
int bb_pin_self(int cpu);
/// Sets the calling thread's timer slack (PR_SET_TIMERSLACK). 0 or -errno.
int bb_set_timer_slack(unsigned long ns);
/// CPUs this process may run on.
int bb_cpu_count(void);
/// Asks the kernel to keep every CPU's idle exit latency at or below
/// `max_us` (PM QoS through /dev/cpu_dma_latency, as cyclictest does) for as
/// long as the process lives. Returns the open fd, or -errno (EACCES: not root).
int bb_pm_qos_hold(int max_us);
/// Busy-waits until CLOCK_MONOTONIC reaches `deadline_ns`.
void bb_spin_until(uint64_t deadline_ns);

// --- 1. wake: cross-thread round trip, eventfd + epoll on both sides ------
/// `iterations` round trips after `warmup`; round-trip times (ns) into
/// `samples`. 0 or -errno.
int bb_raw_wake(uint64_t *samples, int warmup, int iterations, int cpu_a, int cpu_b);

// --- 2. timer: repeating timerfd (TFD_TIMER_ABSTIME, it_interval) -----------
/// Fires a `period_ns` timer `fires` times (after `warmup` fires); lateness
/// against the grid (ns) into `lateness`, missed periods into *missed.
int bb_raw_timer(uint64_t period_ns, int warmup, int fires, int64_t *lateness, uint64_t *missed, int cpu);
/// The same with a one-shot timerfd re-armed (absolute) for the next grid
/// point before each wait and read after the handler, as the engine does.
int bb_raw_timer_oneshot(uint64_t period_ns, int warmup, int fires, int64_t *lateness, uint64_t *missed, int cpu);

// --- 3. fd: pipes written by a producer thread -------------------------------
/// A producer thread writing 8-byte messages (its send time, CLOCK_MONOTONIC)
/// round-robin to the write ends of `n` pipes. Saturation: `chunk` messages per
/// write() as fast as the pipes take them. Paced: one message every
/// 1e9/rate_hz ns, spinning to the send time.
typedef struct bb_producer bb_producer;
/// Makes `n` pipes (read ends non-blocking) into read_fds; the producer owns
/// the write ends. Starts nothing yet.
bb_producer *bb_producer_create(int n, int *read_fds);
/// Starts the producer thread. rate_hz == 0: saturation with `chunk`.
int bb_producer_start(bb_producer *p, long messages, int chunk, int rate_hz, int cpu);
/// Waits for the producer to finish; returns messages written.
long bb_producer_join(bb_producer *p);
/// Closes the write ends and frees the producer (read ends stay yours).
void bb_producer_destroy(bb_producer *p);

/// Reads one 8-byte message from `fd`; returns its send time, or 0 if none.
uint64_t bb_read_message(int fd);

/// The raw epoll consumer: level-triggered epoll over `n` fds, one message
/// read per ready fd per epoll_wait (the same work per dispatch as
/// boardloop's handler), until `messages` were read. Latencies (receive −
/// send, ns) into `latency` when not NULL. Returns messages read per second
/// between the first and last read, or a negative -errno.
double bb_raw_fd_consume(const int *fds, int n, long messages, uint64_t *latency);

// --- 4. message port: mutex-protected slot ring + eventfd + epoll ------------
/// Round trips of a 16-byte message between two threads through rings like
/// boardloop's BoardMessagePort (bounded slots, signalled flag, one eventfd
/// write per empty→non-empty). window == 1: ping-pong, RTT samples (ns) into
/// `samples` (iterations of them). window > 1: `window` messages in flight;
/// returns messages per second. `samples` may be NULL then.
double bb_raw_message(int window, int warmup, int iterations, uint64_t *samples, int cpu_a, int cpu_b);

#ifdef __cplusplus
}
#endif
#endif
