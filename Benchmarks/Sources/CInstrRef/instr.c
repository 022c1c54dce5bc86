// See CInstrRef.h.
#define _GNU_SOURCE
#include "CInstrRef.h"
#include "bb_ring.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

enum { PIPES = 8 };

static int make_pipes(int fds[PIPES][2]) {
    for (int i = 0; i < PIPES; i++) {
        if (pipe2(fds[i], O_NONBLOCK | O_CLOEXEC) != 0) return -errno;
        char b = 1;
        if (write(fds[i][1], &b, 1) != 1) return -errno;
    }
    return 0;
}

static void close_pipes(int fds[PIPES][2]) {
    for (int i = 0; i < PIPES; i++) { close(fds[i][0]); close(fds[i][1]); }
}

// The work of one dispatch, the same in every implementation.
static inline void bounce(int rfd, int wfd) {
    char b;
    if (read(rfd, &b, 1) == 1) (void)!write(wfd, &b, 1);
}

int ir_raw_fd(long dispatches) {
    int fds[PIPES][2];
    int rc = make_pipes(fds);
    if (rc) return rc;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < PIPES; i++) {
        struct epoll_event e = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i][0], &e);
    }
    struct epoll_event ev[32];
    long done = 0;
    while (done < dispatches) {
        int n = epoll_wait(ep, ev, 32, -1);
        for (int k = 0; k < n && done < dispatches; k++, done++) {
            int i = (int)ev[k].data.u32;
            bounce(fds[i][0], fds[i][1]);
        }
    }
    close(ep);
    close_pipes(fds);
    return 0;
}

typedef struct { int rfd, wfd; long *done; long target; uv_loop_t *loop; } uv_fd_ctx;

static void uv_fd_cb(uv_poll_t *h, int status, int events) {
    (void)status; (void)events;
    uv_fd_ctx *c = h->data;
    bounce(c->rfd, c->wfd);
    if (++*c->done >= c->target) uv_stop(c->loop);
}

int ir_uv_fd(long dispatches) {
    int fds[PIPES][2];
    int rc = make_pipes(fds);
    if (rc) return rc;
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_poll_t polls[PIPES];
    uv_fd_ctx ctx[PIPES];
    long done = 0;
    for (int i = 0; i < PIPES; i++) {
        ctx[i] = (uv_fd_ctx){ fds[i][0], fds[i][1], &done, dispatches, &loop };
        uv_poll_init(&loop, &polls[i], fds[i][0]);
        polls[i].data = &ctx[i];
        uv_poll_start(&polls[i], UV_READABLE, uv_fd_cb);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    for (int i = 0; i < PIPES; i++) uv_close((uv_handle_t *)&polls[i], NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    close_pipes(fds);
    return 0;
}

// --- wake -------------------------------------------------------------------

typedef struct { int my_fd, peer_fd; long round_trips; int initiator; } raw_side;

static void *raw_wake_side(void *arg) {
    raw_side *s = arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e = { .events = EPOLLIN };
    epoll_ctl(ep, EPOLL_CTL_ADD, s->my_fd, &e);
    uint64_t one = 1, v;
    if (s->initiator) (void)!write(s->peer_fd, &one, 8);
    for (long i = 0; i < s->round_trips; i++) {
        struct epoll_event got;
        while (epoll_wait(ep, &got, 1, -1) < 1) {}
        (void)!read(s->my_fd, &v, 8);
        if (!s->initiator || i + 1 < s->round_trips) (void)!write(s->peer_fd, &one, 8);
    }
    close(ep);
    return NULL;
}

int ir_raw_wake(long round_trips) {
    int a = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), b = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    raw_side sa = { a, b, round_trips, 1 }, sb = { b, a, round_trips, 0 };
    pthread_t tb;
    pthread_create(&tb, NULL, raw_wake_side, &sb);
    raw_wake_side(&sa);
    pthread_join(tb, NULL);
    close(a);
    close(b);
    return 0;
}

typedef struct uv_side {
    uv_loop_t loop;
    uv_async_t async;
    struct uv_side *peer;
    long count, target;
    int initiator;
} uv_side;

static void uv_wake_cb(uv_async_t *h) {
    uv_side *s = h->data;
    s->count++;
    if (s->initiator && s->count >= s->target) {
        uv_stop(&s->loop);
        uv_stop(&s->peer->loop);
        uv_async_send(&s->peer->async); // wake it to see the stop
        return;
    }
    uv_async_send(&s->peer->async);
}

static void *uv_wake_thread(void *arg) {
    uv_side *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

int ir_uv_wake(long round_trips) {
    static uv_side a, b;
    uv_loop_init(&a.loop);
    uv_loop_init(&b.loop);
    uv_async_init(&a.loop, &a.async, uv_wake_cb);
    uv_async_init(&b.loop, &b.async, uv_wake_cb);
    a.async.data = &a;
    b.async.data = &b;
    a.peer = &b;
    b.peer = &a;
    a.count = b.count = 0;
    a.target = round_trips;
    a.initiator = 1;
    b.initiator = 0;
    pthread_t tb;
    pthread_create(&tb, NULL, uv_wake_thread, &b);
    uv_async_send(&b.async);
    uv_run(&a.loop, UV_RUN_DEFAULT);
    pthread_join(tb, NULL);
    uv_close((uv_handle_t *)&a.async, NULL);
    uv_close((uv_handle_t *)&b.async, NULL);
    uv_run(&a.loop, UV_RUN_DEFAULT);
    uv_run(&b.loop, UV_RUN_DEFAULT);
    uv_loop_close(&a.loop);
    uv_loop_close(&b.loop);
    return 0;
}

/* One thread: an async handle whose callback sends it again, `posts`
 * times. uv_async_send from the loop's own thread still goes through the
 * loop's eventfd (a write, an epoll_wait, a read): libuv's one way to hand
 * work to a loop, and the same-thread counterpart of boardloop's work item
 * re-posting itself. (Across threads the count is not comparable under
 * valgrind: see ir_uv_wake.) */
typedef struct { uv_loop_t *loop; long count, target; } uv_self_ctx;

static void uv_self_cb(uv_async_t *h) {
    uv_self_ctx *c = h->data;
    if (++c->count >= c->target) {
        uv_stop(c->loop);
        return;
    }
    uv_async_send(h);
}

int ir_uv_perform(long posts) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_async_t async;
    uv_self_ctx ctx = { &loop, 0, posts };
    uv_async_init(&loop, &async, uv_self_cb);
    async.data = &ctx;
    uv_async_send(&async);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&async, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return ctx.count == posts ? 0 : -EPROTO;
}

// --- timer ------------------------------------------------------------------

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static struct itimerspec at(uint64_t ns, long period_ns) {
    struct itimerspec s = { 0 };
    s.it_value.tv_sec = (time_t)(ns / 1000000000u);
    s.it_value.tv_nsec = (long)(ns % 1000000000u);
    s.it_interval.tv_nsec = period_ns;
    return s;
}

int ir_raw_timer_oneshot(long fires, long period_ns) {
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e = { .events = EPOLLIN };
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &e);
    uint64_t next = now_ns() + (uint64_t)period_ns;
    struct itimerspec s = at(next, 0);
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &s, NULL);
    for (long i = 0; i < fires; i++) {
        struct epoll_event got;
        while (epoll_wait(ep, &got, 1, -1) < 1) {}
        // (the handler's work: none)
        uint64_t expirations;
        (void)!read(tfd, &expirations, 8); // drained after the handler, as the engine does
        next += (uint64_t)period_ns;       // re-armed before the next wait
        s = at(next, 0);
        timerfd_settime(tfd, TFD_TIMER_ABSTIME, &s, NULL);
    }
    close(ep);
    close(tfd);
    return 0;
}

int ir_raw_timer_periodic(long fires, long period_ns) {
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e = { .events = EPOLLIN };
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &e);
    struct itimerspec s = at(now_ns() + (uint64_t)period_ns, period_ns);
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &s, NULL);
    for (long i = 0; i < fires; i++) {
        struct epoll_event got;
        while (epoll_wait(ep, &got, 1, -1) < 1) {}
        uint64_t expirations;
        (void)!read(tfd, &expirations, 8);
    }
    close(ep);
    close(tfd);
    return 0;
}

// --- message-burst ----------------------------------------------------------

// The raw message-port reference: CBenchRaw's ring (bb_ring.h), used
// from one thread.

struct burst_sum {
    long got;
    uint64_t sum;
};

static void burst_one(void *ctx, const unsigned char *msg) {
    struct burst_sum *b = ctx;
    uint64_t v;
    memcpy(&v, msg + 8, 8);
    b->sum += v;
    b->got++;
}

int ir_raw_message_burst(long messages, long burst) {
    static bb_ring r;
    int rc = bb_ring_init(&r);
    if (rc != 0) return rc;
    long sent = 0;
    struct burst_sum b = {0, 0};
    while (sent < messages) {
        for (long k = 0; k < burst; k++, sent++) {
            uint64_t m[2] = { 0, (uint64_t)sent };
            if (bb_ring_send(&r, m) != 0) return -ENOSPC;
        }
        bb_ring_receive(&r, burst_one, &b);
    }
    bb_ring_destroy(&r);
    return b.got == messages && b.sum == (uint64_t)messages * (uint64_t)(messages - 1) / 2 ? 0 : -EIO;
}
