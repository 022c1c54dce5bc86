#define _GNU_SOURCE
#include "CBenchRaw.h"
#include "bb_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

uint64_t bb_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int bb_pin_self(int cpu) {
    if (cpu < 0) return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    return rc == 0 ? 0 : -rc;
}

int bb_set_timer_slack(unsigned long ns) {
    return prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0) == 0 ? 0 : -errno;
}

int bb_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    return CPU_COUNT(&set);
}

int bb_pm_qos_hold(int max_us) {
    int fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    int32_t v = max_us;
    if (write(fd, &v, sizeof v) != sizeof v) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

void bb_spin_until(uint64_t deadline_ns) {
    while (bb_now_ns() < deadline_ns) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
}

// --- 1. wake ---------------------------------------------------------------

struct wake_peer {
    int ep, own, other, rounds, cpu;
};

static void *wake_peer_main(void *arg) {
    struct wake_peer *p = arg;
    bb_pin_self(p->cpu);
    uint64_t one = 1;
    for (int i = 0; i < p->rounds; i++) {
        bb_wait_one(p->ep, p->own);
        (void)!write(p->other, &one, sizeof one);
    }
    return NULL;
}

int bb_raw_wake(uint64_t *samples, int warmup, int iterations, int cpu_a, int cpu_b) {
    int efa = eventfd(0, EFD_CLOEXEC), efb = eventfd(0, EFD_CLOEXEC);
    if (efa < 0 || efb < 0) return -errno;
    int epa = bb_epoll_with(efa), epb = bb_epoll_with(efb);
    if (epa < 0 || epb < 0) return epa < 0 ? epa : epb;
    struct wake_peer b = {.ep = epb, .own = efb, .other = efa, .rounds = warmup + iterations, .cpu = cpu_b};
    pthread_t t;
    int rc = pthread_create(&t, NULL, wake_peer_main, &b);
    if (rc != 0) return -rc;
    bb_pin_self(cpu_a);
    uint64_t one = 1;
    for (int i = 0; i < warmup + iterations; i++) {
        uint64_t t0 = bb_now_ns();
        (void)!write(efb, &one, sizeof one);
        bb_wait_one(epa, efa);
        uint64_t t1 = bb_now_ns();
        if (i >= warmup) samples[i - warmup] = t1 - t0;
    }
    pthread_join(t, NULL);
    close(epa); close(epb); close(efa); close(efb);
    return 0;
}

// --- 2. timer --------------------------------------------------------------

/// The repeating timer of both raw references: periodic (the kernel re-arms
/// it: it_interval) or, with `oneshot`, armed (absolute) for the next grid
/// point before each wait and read after the "handler", as the engine does.
static int raw_timer(uint64_t period_ns, int warmup, int fires, int64_t *lateness, uint64_t *missed, int cpu, int oneshot) {
    bb_pin_self(cpu);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | (oneshot ? TFD_NONBLOCK : 0));
    if (tfd < 0) return -errno;
    int ep = bb_epoll_with(tfd);
    if (ep < 0) return ep;
    uint64_t t0 = bb_now_ns() + period_ns;
    if (!oneshot) {
        struct itimerspec its = {
            .it_value = {.tv_sec = (time_t)(t0 / 1000000000ull), .tv_nsec = (long)(t0 % 1000000000ull)},
            .it_interval = {.tv_sec = (time_t)(period_ns / 1000000000ull), .tv_nsec = (long)(period_ns % 1000000000ull)},
        };
        if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0) return -errno;
    }
    struct epoll_event evs[8];
    int64_t last_k = -1;
    uint64_t miss = 0, exp;
    for (int i = 0; i < warmup + fires;) {
        if (oneshot) {
            // The next grid point after the last one fired for.
            uint64_t next = t0 + (uint64_t)(last_k + 1) * period_ns;
            struct itimerspec its = {
                .it_value = {.tv_sec = (time_t)(next / 1000000000ull), .tv_nsec = (long)(next % 1000000000ull)},
            };
            if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0) return -errno;
        }
        int n = epoll_wait(ep, evs, 8, -1);
        if (n <= 0) continue;
        // Periodic: read first, as a loop must before its handler; one-shot:
        // the read comes after the handler (below).
        if (!oneshot && read(tfd, &exp, sizeof exp) != sizeof exp) continue;
        // Measured where a loop's timer handler would start.
        uint64_t now = bb_now_ns();
        // The same measure as every other timer row: the grid point at or
        // before now is the one fired for; grid points in between were missed.
        int64_t k = (int64_t)((now - t0) / period_ns);
        if (i >= warmup) {
            lateness[i - warmup] = (int64_t)(now - (t0 + (uint64_t)k * period_ns));
            if (last_k >= 0 && k > last_k + 1) miss += (uint64_t)(k - last_k - 1);
        }
        last_k = k;
        i++;
        if (oneshot) (void)!read(tfd, &exp, sizeof exp);
    }
    *missed = miss;
    close(ep);
    close(tfd);
    return 0;
}

int bb_raw_timer(uint64_t period_ns, int warmup, int fires, int64_t *lateness, uint64_t *missed, int cpu) {
    return raw_timer(period_ns, warmup, fires, lateness, missed, cpu, 0);
}

int bb_raw_timer_oneshot(uint64_t period_ns, int warmup, int fires, int64_t *lateness, uint64_t *missed, int cpu) {
    return raw_timer(period_ns, warmup, fires, lateness, missed, cpu, 1);
}

// --- 3. fd -----------------------------------------------------------------

struct bb_producer {
    int n;
    int *write_fds;
    long messages, written;
    int chunk, rate_hz, cpu;
    pthread_t thread;
};

bb_producer *bb_producer_create(int n, int *read_fds) {
    bb_producer *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n;
    p->write_fds = calloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            bb_producer_destroy(p);
            return NULL;
        }
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
        read_fds[i] = fds[0];
        p->write_fds[i] = fds[1];
    }
    return p;
}

static void *producer_main(void *arg) {
    bb_producer *p = arg;
    bb_pin_self(p->cpu);
    uint64_t buf[256];
    long sent = 0;
    int next = 0;
    if (p->rate_hz == 0) {
        int chunk = p->chunk < 1 ? 1 : (p->chunk > 256 ? 256 : p->chunk);
        while (sent < p->messages) {
            long m = p->messages - sent < chunk ? p->messages - sent : chunk;
            uint64_t now = bb_now_ns();
            for (long j = 0; j < m; j++) buf[j] = now;
            ssize_t w = write(p->write_fds[next], buf, (size_t)m * 8);
            if (w > 0) sent += w / 8;
            next = (next + 1) % p->n;
        }
    } else {
        uint64_t period = 1000000000ull / (uint64_t)p->rate_hz;
        uint64_t t = bb_now_ns() + period;
        while (sent < p->messages) {
            bb_spin_until(t);
            buf[0] = bb_now_ns();
            if (write(p->write_fds[next], buf, 8) == 8) sent++;
            next = (next + 1) % p->n;
            t += period;
        }
    }
    p->written = sent;
    return NULL;
}

int bb_producer_start(bb_producer *p, long messages, int chunk, int rate_hz, int cpu) {
    p->messages = messages;
    p->chunk = chunk;
    p->rate_hz = rate_hz;
    p->cpu = cpu;
    p->written = 0;
    int rc = pthread_create(&p->thread, NULL, producer_main, p);
    return rc == 0 ? 0 : -rc;
}

long bb_producer_join(bb_producer *p) {
    pthread_join(p->thread, NULL);
    return p->written;
}

void bb_producer_destroy(bb_producer *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++)
        if (p->write_fds[i] > 0) close(p->write_fds[i]);
    free(p->write_fds);
    free(p);
}

uint64_t bb_read_message(int fd) {
    uint64_t v;
    return read(fd, &v, 8) == 8 ? v : 0;
}

double bb_raw_fd_consume(const int *fds, int n, long messages, uint64_t *latency) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return -errno;
    for (int i = 0; i < n; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0) return -errno;
    }
    struct epoll_event evs[64];
    long got = 0;
    uint64_t first = 0, last = 0;
    while (got < messages) {
        int k = epoll_wait(ep, evs, 64, -1);
        for (int j = 0; j < k && got < messages; j++) {
            uint64_t sent = bb_read_message(fds[evs[j].data.u32]);
            if (sent == 0) continue;
            uint64_t now = bb_now_ns();
            if (got == 0) first = now;
            last = now;
            if (latency) latency[got] = now - sent;
            got++;
        }
    }
    close(ep);
    return last > first ? (double)(got - 1) * 1e9 / (double)(last - first) : 0;
}

// --- 4. message port ---------------------------------------------------------

// Each side's state on cache lines of its own (as the rings): B reads its
// struct every message and A writes its own, and the harness's bookkeeping
// sharing a line would cost a transfer between the CPUs per message that
// is no part of the mechanism measured.
struct msg_echo {
    bb_ring *in, *out;
    long total;
    int cpu;
} __attribute__((aligned(64)));

static void echo_one(void *ctx, const unsigned char *msg) {
    struct msg_echo *e = ctx;
    while (bb_ring_send(e->out, msg) != 0) sched_yield();
}

static void *echo_main(void *arg) {
    struct msg_echo *e = arg;
    bb_pin_self(e->cpu);
    long seen = 0;
    while (seen < e->total) seen += bb_ring_receive(e->in, echo_one, e);
    return NULL;
}

struct msg_origin {
    bb_ring *out;
    long received, sent, total;
    int warmup;
    uint64_t *samples;
    uint64_t first_ns;
} __attribute__((aligned(64)));

static void origin_one(void *ctx, const unsigned char *msg) {
    struct msg_origin *o = ctx;
    uint64_t sent_at, seq;
    memcpy(&sent_at, msg, 8);
    memcpy(&seq, msg + 8, 8);
    uint64_t now = bb_now_ns();
    if (o->samples && o->received >= o->warmup) o->samples[o->received - o->warmup] = now - sent_at;
    if (o->received == o->warmup) o->first_ns = now;
    o->received++;
    if (o->sent < o->total) {
        unsigned char m[BB_RING_PAYLOAD];
        uint64_t s = (uint64_t)o->sent;
        memcpy(m, &now, 8);
        memcpy(m + 8, &s, 8);
        bb_ring_send(o->out, m);
        o->sent++;
    }
}

double bb_raw_message(int window, int warmup, int iterations, uint64_t *samples, int cpu_a, int cpu_b) {
    if (window < 1 || window > BB_RING_SLOTS) return -EINVAL;
    // Each ring on lines of its own (the size rounded up to whole lines).
    size_t ring_size = (sizeof(bb_ring) + 63) / 64 * 64;
    bb_ring *to_b = aligned_alloc(64, ring_size), *to_a = aligned_alloc(64, ring_size);
    if (!to_b || !to_a) {
        free(to_b);
        free(to_a);
        return -ENOMEM;
    }
    int rc = bb_ring_init(to_b);
    if (rc == 0) rc = bb_ring_init(to_a);
    if (rc != 0) return rc;
    long total = (long)warmup + iterations;
    struct msg_echo e = {.in = to_b, .out = to_a, .total = total, .cpu = cpu_b};
    pthread_t t;
    pthread_create(&t, NULL, echo_main, &e);
    bb_pin_self(cpu_a);
    struct msg_origin o = {.out = to_b, .total = total, .warmup = warmup, .samples = window == 1 ? samples : NULL};
    for (int i = 0; i < window; i++) {
        unsigned char m[BB_RING_PAYLOAD];
        uint64_t now = bb_now_ns(), s = (uint64_t)i;
        memcpy(m, &now, 8);
        memcpy(m + 8, &s, 8);
        bb_ring_send(to_b, m);
        o.sent++;
    }
    while (o.received < total) bb_ring_receive(to_a, origin_one, &o);
    uint64_t end = bb_now_ns();
    pthread_join(t, NULL);
    bb_ring_destroy(to_a);
    bb_ring_destroy(to_b);
    free(to_a);
    free(to_b);
    return end > o.first_ns ? (double)iterations * 1e9 / (double)(end - o.first_ns) : 0;
}
