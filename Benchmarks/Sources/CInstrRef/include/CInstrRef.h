// Fixed-count references for instruction counting (scripts/bench.sh
// --instructions): the raw kernel mechanism and libuv doing exactly the work
// boardloop's scenario does, a given number of times, with nothing else in
// the loop (no clock reads, no samples), so callgrind's count per event is
// the mechanism's cost.
#ifndef BOARDLOOP_CINSTRREF_H
#define BOARDLOOP_CINSTRREF_H
#ifdef __cplusplus
extern "C" {
#endif

/// 8 pipes, each holding one byte; `dispatches` times: epoll_wait (level
/// triggered), then for each ready fd read its byte and write it back.
/// Returns 0 or -errno.
int ir_raw_fd(long dispatches);
/// The same with libuv: uv_poll on the 8 read ends, one read + write-back
/// per callback, uv_stop after `dispatches`.
int ir_uv_fd(long dispatches);

/// Cross-thread round trips A -> B -> A: eventfd + epoll on each side.
int ir_raw_wake(long round_trips);
/// The same with libuv: one loop per thread, uv_async_send each way.
int ir_uv_wake(long round_trips);
/// One thread: a libuv async handle re-sending itself from its callback,
/// `posts` times (the counterpart of a work item re-posting itself).
int ir_uv_perform(long posts);

/// A one-shot CLOCK_MONOTONIC timerfd re-armed (absolute) after each fire,
/// `period_ns` apart, read after the handler: the engine's way. `fires`
/// fires (the loop sleeps between fires: the on-time path).
int ir_raw_timer_oneshot(long fires, long period_ns);
/// A periodic timerfd (it_interval): the kernel re-arms it.
int ir_raw_timer_periodic(long fires, long period_ns);

/// One thread: bursts of `burst` 16-byte messages into a mutex-guarded ring
/// of 64 slots (an eventfd written on empty -> non-empty), each burst
/// received after epoll_wait, one lock round trip per message (CBenchRaw's
/// message-port reference without the second thread). `messages` in all.
int ir_raw_message_burst(long messages, long burst);

#ifdef __cplusplus
}
#endif
#endif
