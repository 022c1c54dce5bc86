// The raw message-port reference: a mutex-guarded ring of fixed slots and an
// eventfd, written when the ring goes non-empty and waited on through epoll.
// The wall-clock benchmark (raw.c: two threads) and the instruction
// reference (CInstrRef: one thread) both use this one ring, so both rows
// measure the same code. Static inline: each user compiles it in line.
#ifndef BOARDLOOP_BB_RING_H
#define BOARDLOOP_BB_RING_H
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

enum { BB_RING_SLOTS = 64, BB_RING_PAYLOAD = 16 };

typedef struct {
    pthread_mutex_t lock;
    int head, count, signalled;
    unsigned char slots[BB_RING_SLOTS][BB_RING_PAYLOAD];
    int efd, ep;
} bb_ring;

/// An epoll set watching `fd` for input; the set, or -errno.
static inline int bb_epoll_with(int fd) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return -errno;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        int e = errno;
        close(ep);
        return -e;
    }
    return ep;
}

/// Waits until `ep` reports something, then reads the eventfd `fd` back.
static inline void bb_wait_one(int ep, int fd) {
    struct epoll_event evs[8];
    for (;;) {
        int n = epoll_wait(ep, evs, 8, -1);
        if (n > 0) break;
    }
    uint64_t v;
    (void)!read(fd, &v, sizeof v);
}

static inline int bb_ring_init(bb_ring *r) {
    pthread_mutex_init(&r->lock, NULL);
    r->head = r->count = r->signalled = 0;
    r->efd = eventfd(0, EFD_CLOEXEC);
    if (r->efd < 0) return -errno;
    r->ep = bb_epoll_with(r->efd);
    return r->ep < 0 ? r->ep : 0;
}

static inline void bb_ring_destroy(bb_ring *r) {
    close(r->ep);
    close(r->efd);
    pthread_mutex_destroy(&r->lock);
}

/// Queues one payload (BB_RING_PAYLOAD bytes); -1 when the ring is full.
static inline int bb_ring_send(bb_ring *r, const void *payload) {
    pthread_mutex_lock(&r->lock);
    if (r->count == BB_RING_SLOTS) {
        pthread_mutex_unlock(&r->lock);
        return -1;
    }
    memcpy(r->slots[(r->head + r->count) % BB_RING_SLOTS], payload, BB_RING_PAYLOAD);
    r->count++;
    if (!r->signalled) {
        r->signalled = 1;
        uint64_t one = 1;
        (void)!write(r->efd, &one, sizeof one);
    }
    pthread_mutex_unlock(&r->lock);
    return 0;
}

/// Waits until the ring is signalled, then hands each queued message to
/// `handle`; returns how many.
static inline int bb_ring_receive(bb_ring *r, void (*handle)(void *ctx, const unsigned char *msg), void *ctx) {
    bb_wait_one(r->ep, r->efd);
    int n = 0;
    unsigned char msg[BB_RING_PAYLOAD];
    for (;;) {
        pthread_mutex_lock(&r->lock);
        if (r->count == 0) {
            r->signalled = 0;
            pthread_mutex_unlock(&r->lock);
            return n;
        }
        memcpy(msg, r->slots[r->head], BB_RING_PAYLOAD);
        r->head = (r->head + 1) % BB_RING_SLOTS;
        r->count--;
        pthread_mutex_unlock(&r->lock);
        handle(ctx, msg);
        n++;
    }
}

#endif
